<?php

declare(strict_types=1);

namespace Oncehook;

use Oncehook\Internal\Api;

/**
 * Publishes events to a gateway's outbox sources (outbox: true): POST /v1/publish/{source}.
 *
 *     $pub = (new Oncehook\Outbox())->publish('orders', $sale->id, ['event_name' => 'Purchase']);
 *     $pub->isDuplicate();   // published before under this key: nothing written, no second delivery
 *
 * $url defaults to $ONCEHOOK_API (else http://127.0.0.1:8081), $token to $ONCEHOOK_API_TOKEN (a token that
 * may publish to the source); $timeout bounds each call.
 */
final class Outbox
{
    private const TOKEN_CHARS = '/^[A-Za-z0-9!#$%&\'*+\-.^_`|~:\/]+$/D';

    private readonly Api $api;

    public function __construct(?string $url = null, ?string $token = null, float $timeout = Api::DEFAULT_TIMEOUT)
    {
        $this->api = new Api($url, $token, $timeout);
    }

    public function url(): string
    {
        return $this->api->url;
    }

    public function __debugInfo(): array // never the token
    {
        return ['url' => $this->api->url];
    }

    /**
     * Publish $body to $source under $key (the Idempotency-Key header; null leaves the key to the
     * source's key: rules). A string body is sent as its bytes ($contentType, default application/json);
     * any other value is encoded as JSON. $headers are sent too (a source's type: rules may read one).
     * $reconcile marks a publish from a reconciliation pass (?reconcile=true): a key the gateway has not
     * seen is counted as republished, so the pass shows what it closed. Publishing again with the same key
     * is safe: it answers duplicate. So after an UnreachableException or a 503, publish again.
     *
     * @param array<string, string> $headers
     */
    public function publish(
        string $source,
        ?string $key,
        mixed $body,
        ?string $contentType = null,
        array $headers = [],
        bool $reconcile = false,
        ?float $timeout = null,
    ): Published {
        if ($source === '' || str_contains($source, '/')) {
            throw new InvalidException(json_encode($source) . " is not a source's name", field: 'source');
        }
        if (is_string($body)) {
            $data = $body;
        } else {
            try {
                $data = json_encode($body, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION | JSON_THROW_ON_ERROR);
            } catch (\JsonException $e) {
                throw new InvalidException('the body is not JSON: ' . $e->getMessage(), field: 'body', previous: $e);
            }
        }
        $h = [];
        foreach ($headers as $name => $value) {
            $h[strtolower($name)] = $value;
        }
        $h['content-type'] = $contentType ?? 'application/json';
        if ($key !== null) {
            $h['idempotency-key'] = self::formatKey($key);
        }
        $path = '/v1/publish/' . Api::pathEscape($source) . ($reconcile ? '?reconcile=true' : '');
        $a = $this->api->request('POST', $path, $data, $h, $timeout);
        if ($a->status !== 200 && $a->status !== 202) {
            throw Api::errorFor($a, 'publish to ' . json_encode($source));
        }
        $b = $a->json();
        $events = array_values(array_filter(is_array($b['events'] ?? null) ? $b['events'] : [], 'is_array'));
        $status = is_string($b['status'] ?? null) ? $b['status'] : ($a->status === 202 ? 'accepted' : 'duplicate');
        return new Published($status, $events ? (string) ($events[0]['key'] ?? '') : ($key ?? ''), $events);
    }

    /**
     * An Idempotency-Key as the gateway reads it: bare when made of token characters (ord_1042, a UUID),
     * else an RFC 8941 string ("ord 7"), which the gateway reads as the same key.
     */
    public static function formatKey(string $key): string
    {
        if ($key === '' || strlen($key) > 255) {
            throw new InvalidException('an Idempotency-Key has 1 to 255 characters', field: 'Idempotency-Key');
        }
        if (preg_match(self::TOKEN_CHARS, $key)) {
            return $key;
        }
        if (!preg_match('/^[\x20-\x7e]+$/D', $key)) {
            throw new InvalidException('an Idempotency-Key is printable ASCII only', field: 'Idempotency-Key');
        }
        return '"' . str_replace(['\\', '"'], ['\\\\', '\\"'], $key) . '"';
    }
}
