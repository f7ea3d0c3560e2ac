<?php

declare(strict_types=1);

namespace Oncehook;

use Oncehook\Internal\Api;

/**
 * Takes a pull destination's deliveries (pull: {}) and acks them: POST /v1/destinations/{name}/pull, then
 * POST /v1/deliveries/{id}/ack with each one's outcome. For a service with no inbound port: the gateway
 * keeps the deliveries until a consumer takes them, and hands one out again (next attempt, same
 * Idempotency-Key) when its lease ends unacked.
 *
 *     (new Oncehook\Consumer(name: 'billing-1'))->consume('billing', function (PulledDelivery $d) {
 *         charge(json_decode($d->body, true));   // a throw is retried, a Permanent is a dead letter
 *     });
 *
 * $url defaults to $ONCEHOOK_API (else http://127.0.0.1:8081), $token to $ONCEHOOK_API_TOKEN (a consumer's
 * token, pull: [names], or one that may change anything); $name says which consumer this is (the attempts
 * record it after the token's name); $timeout bounds each call beyond a pull's wait.
 */
final class Consumer
{
    private readonly Api $api;

    public function __construct(?string $url = null, ?string $token = null, public readonly string $name = '', float $timeout = Api::DEFAULT_TIMEOUT)
    {
        $this->api = new Api($url, $token, $timeout);
    }

    public function __debugInfo(): array // never the token
    {
        return ['url' => $this->api->url, 'name' => $this->name];
    }

    /**
     * Lease up to $max of $destination's due deliveries for $lease seconds each, waiting up to $wait
     * seconds for the first (a long poll): [] when none came.
     *
     * @return list<PulledDelivery>
     */
    public function pull(string $destination, int $max = 16, float $lease = 30.0, float $wait = 20.0): array
    {
        if ($destination === '' || str_contains($destination, '/')) {
            throw new InvalidException(json_encode($destination) . " is not a destination's name", field: 'destination');
        }
        $body = ['max' => $max, 'lease' => Outcome::ms($lease), 'wait' => Outcome::ms($wait)];
        if ($this->name !== '') {
            $body['consumer'] = $this->name;
        }
        $a = $this->api->request('POST', '/v1/destinations/' . Api::pathEscape($destination) . '/pull', Api::encode($body),
            [], $this->api->timeout + max($wait, 0.0), true);
        if ($a->status !== 200) {
            throw Api::errorFor($a, 'pull from ' . json_encode($destination));
        }
        $ds = $a->json()['deliveries'] ?? [];
        return array_values(array_map([PulledDelivery::class, 'fromWire'], array_filter(is_array($ds) ? $ds : [], 'is_array')));
    }

    /**
     * End $delivery's lease with $outcome (delivered when none), and return how the gateway classified it:
     * delivered, retry or permanent. A lease that ended first (it expired: the delivery is handed out
     * again) throws ConflictException (lease_unknown) or StaleTokenException.
     */
    public function ack(PulledDelivery $delivery, ?Outcome $outcome = null): string
    {
        $outcome ??= Outcome::delivered();
        $body = json_encode($outcome->wire($delivery->token),
            JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE | JSON_THROW_ON_ERROR);
        $a = $this->api->request('POST', '/v1/deliveries/' . Api::pathEscape($delivery->id) . '/ack', $body);
        if ($a->status !== 200) {
            throw Api::errorFor($a, "ack of {$delivery->id}");
        }
        return (string) ($a->json()['outcome'] ?? '');
    }

    /**
     * Pull $destination in a loop, run $handler on each delivery and ack it with its outcome: what the
     * handler returns (an Outcome, or an int as a status; anything else is delivered), a retry when it
     * throws, permanent when it throws Permanent. Returns once $until() says true (asked between pulls:
     * within $wait). An unreachable gateway is tried again with backoff; an error answer (403: the token
     * may not pull it, 404: no such pull destination) is thrown.
     *
     * @param callable(PulledDelivery): mixed $handler
     * @param (callable(): bool)|null $until
     */
    public function consume(string $destination, callable $handler, int $max = 16, float $lease = 30.0, float $wait = 20.0, ?callable $until = null): void
    {
        $backoff = 0.5;
        while ($until === null || !$until()) {
            try {
                $batch = $this->pull($destination, $max, $lease, $wait);
            } catch (UnreachableException $e) {
                error_log("oncehook: pull from {$destination}: {$e->getDetail()}; again in {$backoff}s");
                usleep((int) ($backoff * 1e6));
                $backoff = min($backoff * 2, 30.0);
                continue;
            }
            $backoff = 0.5;
            foreach ($batch as $d) {
                $this->handle($d, $handler);
            }
        }
    }

    private function handle(PulledDelivery $d, callable $handler): void
    {
        $start = hrtime(true);
        try {
            $got = $handler($d);
            $out = match (true) {
                $got instanceof Outcome => $got,
                is_int($got) => new Outcome($got),
                default => Outcome::delivered(),
            };
        } catch (Permanent $e) {
            $out = Outcome::permanent(get_class($e) . ': ' . $e->getMessage());
        } catch (\Throwable $e) { // the handler failed: retried, same key
            $out = Outcome::retry(get_class($e) . ': ' . $e->getMessage());
        }
        if ($out->latency === null) {
            $out = $out->withLatency((hrtime(true) - $start) / 1e9);
        }
        try {
            $this->ack($d, $out);
        } catch (ConflictException | StaleTokenException | UnreachableException $e) {
            // The lease ended first, or the ack did not arrive: the delivery comes again, same key.
            error_log("oncehook: ack of {$d->id} ({$d->idempotencyKey()}): {$e->getDetail()}");
        }
    }
}
