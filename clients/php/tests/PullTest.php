<?php

declare(strict_types=1);

namespace Oncehook\Tests;

use Oncehook\ApiException;
use Oncehook\ConflictException;
use Oncehook\Consumer;
use Oncehook\Ledger;
use Oncehook\Outbox;
use Oncehook\Outcome;
use Oncehook\Permanent;
use Oncehook\PulledDelivery;

/**
 * A pull destination's consumer against a real gateway: events published to the outbox, pulled, handled
 * once each, a handler's exception retried under the same Idempotency-Key, and a consumer's token refused
 * everywhere else.
 */
final class PullTest
{
    private static Gateway $gw;
    private Outbox $outbox;
    private Consumer $consumer;

    public static function setUpClass(): void
    {
        self::$gw = new Gateway();
    }

    public static function tearDownClass(): void
    {
        self::$gw->close();
    }

    public function __construct()
    {
        $this->outbox = new Outbox(self::$gw->api, Gateway::TOKEN);
        $this->consumer = new Consumer(self::$gw->api, Gateway::PULL_TOKEN, name: 'php-test');
    }

    private function publish(string $key, mixed $body): void
    {
        Check::same('accepted', $this->outbox->publish('jobs', $key, $body, headers: ['X-Event-Type' => 'job.done'])->status);
    }

    /** @return list<PulledDelivery> */
    private function pullN(int $n): array
    {
        $out = [];
        for ($giveUp = microtime(true) + 15; count($out) < $n && microtime(true) < $giveUp;) {
            array_push($out, ...$this->consumer->pull('laptop', max: $n - count($out), lease: 10, wait: 2));
        }
        return $out;
    }

    public function testConsumeHandlesEachOnceAndRetriesAThrowUnderTheSameKey(): void
    {
        $keys = ['once-0', 'once-1', 'once-2', 'once-3'];
        foreach ($keys as $k) {
            $this->publish($k, ['job' => $k, 'note' => "caf\u{e9} \u{2603}"]);
        }
        $seen = [];
        $done = [];
        $giveUp = microtime(true) + 20;
        $this->consumer->consume('laptop', function (PulledDelivery $d) use (&$seen, &$done) {
            $d->verify(Gateway::SECRET); // signed as a push delivery is, over the same bytes
            $seen[] = [$d->idempotencyKey(), $d->attempt, $d->body];
            if ($d->key === 'once-2' && $d->attempt === 1) {
                throw new \RuntimeException('the database was down');
            }
            $done[$d->key] = true;
        }, max: 8, lease: 10, wait: 1, until: function () use (&$done, $keys, $giveUp) {
            return count($done) === count($keys) || microtime(true) > $giveUp;
        });
        ksort($done);
        Check::same($keys, array_keys($done), 'handled: ' . json_encode($seen));
        foreach ($keys as $k) {
            $body = json_encode(['job' => $k, 'note' => "caf\u{e9} \u{2603}"], JSON_UNESCAPED_UNICODE);
            $got = array_values(array_map(fn ($s) => [$s[1], $s[2]], array_filter($seen, fn ($s) => $s[0] === "jobs:{$k}")));
            Check::same($k === 'once-2' ? [[1, $body], [2, $body]] : [[1, $body]], $got, $k);
        }
        Check::same([], $this->consumer->pull('laptop', max: 10, wait: 1.5), 'acked: nothing is handed out again');
    }

    public function testAckAnswersTheGatewaysClassification(): void
    {
        $this->publish('outcome-1', 'one');
        [$d] = $this->pullN(1);
        Check::same([1, 'one', 'jobs:outcome-1'], [$d->attempt, $d->body, $d->header('idempotency-key')]);
        Check::same('retry', $this->consumer->ack($d, Outcome::retry('busy', after: 1)));
        $e = Check::throws(ConflictException::class, fn () => $this->consumer->ack($d), 'acked: its lease is over');
        Check::same([409, 'lease_unknown'], [$e->getHttpStatus(), $e->getErrorCode()]);
        [$again] = $this->pullN(1); // after the backoff (Retry-After is bounded by retry.max_delay)
        Check::same([$d->id, 2, 'jobs:outcome-1'], [$again->id, $again->attempt, $again->idempotencyKey()]);
        Check::same('permanent', $this->consumer->ack($again, Outcome::permanent('no such customer')));
        $this->publish('outcome-2', 'two');
        [$d2] = $this->pullN(1);
        Check::same('delivered', $this->consumer->ack($d2, Outcome::delivered(204, latency: 0.012)));
    }

    public function testAPermanentThrowIsNotRetriedAndALongPollOutlastsTheTimeout(): void
    {
        $this->publish('perm-1', 'x');
        $got = [];
        $giveUp = microtime(true) + 15;
        $this->consumer->consume('laptop', function (PulledDelivery $d) use (&$got) {
            $got[] = $d->attempt;
            throw new Permanent('invalid phone number');
        }, wait: 1, until: function () use (&$got, $giveUp) {
            return $got !== [] || microtime(true) > $giveUp;
        });
        Check::same([1], $got);
        $short = new Consumer(self::$gw->api, Gateway::PULL_TOKEN, timeout: 0.5);
        Check::same([], $short->pull('laptop', wait: 1.5), 'nothing again, after a wait longer than the timeout');
    }

    public function testATransformationsPathAndQueryComeWithTheDelivery(): void
    {
        $this->publish('routed-1', ['job' => 'resize']);
        $ops = new Consumer(self::$gw->api, Gateway::TOKEN); // a token that may change anything pulls too
        // Every jobs event goes to routed too: the others are acked on the way.
        $got = null;
        for ($giveUp = microtime(true) + 15; $got === null && microtime(true) < $giveUp;) {
            foreach ($ops->pull('routed', max: 100, wait: 2) as $d) {
                $got = $d->key === 'routed-1' ? $d : $got;
                $ops->ack($d);
            }
        }
        Check::same(['/jobs/resize', 'v=2'], $got ? [$got->path, $got->query] : null);
        [$plain] = $this->pullN(1); // the same event through laptop, which has no transformation
        Check::same(['routed-1', '', ''], [$plain->key, $plain->path, $plain->query]);
        $this->consumer->ack($plain);
    }

    public function testAConsumersTokenIsRefusedElsewhere(): void
    {
        $e = Check::throws(ApiException::class, fn () => $this->consumer->pull('other', wait: 0));
        Check::same([403, 'not_consumer'], [$e->getHttpStatus(), $e->getErrorCode()]);
        $e = Check::throws(ApiException::class, fn () => $this->consumer->consume('other', fn () => null));
        Check::same(403, $e->getHttpStatus());
        $e = Check::throws(ApiException::class, fn () => (new Outbox(self::$gw->api, Gateway::PULL_TOKEN))->publish('jobs', 'nope', 'x'));
        Check::same(403, $e->getHttpStatus());
        $e = Check::throws(ApiException::class, fn () => (new Ledger(self::$gw->api, Gateway::PULL_TOKEN))->claim('pull-token-claims'));
        Check::same([403, 'pull_only'], [$e->getHttpStatus(), $e->getErrorCode()]);
    }
}
