<?php

declare(strict_types=1);

namespace Oncehook;

use Oncehook\Internal\Api;

/**
 * One delivery a pull leased to this consumer: what a push delivery carries ($headers, $body byte for
 * byte) and the lease to ack it under ($token, until $leaseExpiresAt). $attempt counts the destination's
 * attempts (1 on the first); idempotencyKey() is the same on every attempt: dedupe on it.
 */
final class PulledDelivery
{
    /** @param array<string, list<string>> $headers as the gateway sent them (Idempotency-Key => [...]) */
    public function __construct(
        public readonly string $id,
        public readonly string $source,
        public readonly string $key,
        public readonly ?string $type,
        public readonly int $attempt,
        public readonly string $token,
        public readonly ?\DateTimeImmutable $leaseExpiresAt,
        public readonly ?\DateTimeImmutable $receivedAt,
        public readonly array $headers,
        public readonly string $body,
        /** Set when the destination's transformation set the request's path ('' otherwise): it replaces your URL's. */
        public readonly string $path = '',
        /** Likewise the query, encoded (a=1&b=2). */
        public readonly string $query = '',
    ) {
    }

    /** @param array<string, mixed> $d one of a pull's deliveries */
    public static function fromWire(array $d): self
    {
        $headers = [];
        foreach (is_array($d['headers'] ?? null) ? $d['headers'] : [] as $name => $values) {
            $headers[(string) $name] = array_map('strval', is_array($values) ? array_values($values) : [$values]);
        }
        $body = base64_decode(is_string($d['body'] ?? null) ? $d['body'] : '', true);
        return new self(
            (string) ($d['id'] ?? ''), (string) ($d['source'] ?? ''), (string) ($d['key'] ?? ''),
            is_string($d['type'] ?? null) && $d['type'] !== '' ? $d['type'] : null, (int) ($d['attempt'] ?? 0),
            (string) ($d['token'] ?? ''), Api::parseTime($d['lease_expires_at'] ?? null),
            Api::parseTime($d['received_at'] ?? null), $headers, $body === false ? '' : $body,
            is_string($d['path'] ?? null) ? $d['path'] : '', is_string($d['query'] ?? null) ? $d['query'] : '',
        );
    }

    /** A header's first value, the name in any case; null when it is absent. */
    public function header(string $name): ?string
    {
        foreach ($this->headers as $n => $values) {
            if (strcasecmp($n, $name) === 0) {
                return $values[0] ?? null;
            }
        }
        return null;
    }

    /** The Idempotency-Key header ("stripe:evt_1"): the same on every attempt and replay. */
    public function idempotencyKey(): string
    {
        return $this->header('Idempotency-Key') ?? "{$this->source}:{$this->key}";
    }

    /**
     * Check the destination's signature over the body, as Delivery::verify() does for a push.
     *
     * @param string|list<string> $secret
     */
    public function verify(string|array $secret, int $tolerance = Delivery::DEFAULT_TOLERANCE): Delivery
    {
        return Delivery::verify($this->body, $this->headers, $secret, $tolerance);
    }

    public function __debugInfo(): array // never the lease token
    {
        return ['id' => $this->id, 'source' => $this->source, 'key' => $this->key, 'type' => $this->type,
            'attempt' => $this->attempt, 'headers' => $this->headers, 'body' => $this->body];
    }
}
