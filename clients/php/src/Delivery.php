<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * A delivery from oncehook, as its headers tell it; Delivery::verify() checks its Standard Webhooks
 * signature over the raw bytes of the body first.
 *
 * $idempotencyKey is the Idempotency-Key header ("orders:ord_1042"), the same on every attempt and replay
 * of the event: dedupe on it, or use it as an effect's key. $key is the event's key within its $source
 * ("ord_1042"). $type is the event's type (URL-escaped by the gateway when it holds characters a header
 * cannot); $attempt counts this destination's attempts (1 on the first); $deliveryId is this destination's
 * delivery; $id and $timestamp are the signature's webhook-id and webhook-timestamp. $stale marks an event
 * older than what the destination already has for its entity, with $currentVersion the version it has.
 */
final class Delivery
{
    /** Seconds a signature's timestamp may be off from now, both ways (the spec's 5 minutes). */
    public const DEFAULT_TOLERANCE = 300;

    private const BODY_HINT = "pass the body's raw bytes (Laravel: \$request->getContent(); plain PHP: file_get_contents('php://input')): "
        . 'a decoded or re-encoded body need not be the bytes that were signed';

    public function __construct(
        public readonly string $idempotencyKey,
        public readonly string $source,
        public readonly string $key,
        public readonly ?string $type,
        public readonly ?int $attempt,
        public readonly ?string $deliveryId,
        public readonly ?string $id,
        public readonly ?\DateTimeImmutable $timestamp,
        public readonly bool $stale = false,
        public readonly ?string $currentVersion = null,
    ) {
    }

    /**
     * Read a delivery's headers without checking a signature (for a destination configured without
     * secret:). $headers: name => value or name => list of values (getallheaders(), PSR-7's getHeaders(),
     * Laravel's $request->headers->all()), or any iterable of them; names in any case.
     *
     * @param iterable<string, string|list<string>> $headers
     */
    public static function read(iterable $headers): self
    {
        $h = self::headers($headers);
        $ikey = $h['idempotency-key'][0] ?? '';
        $source = $h['x-oncehook-source'][0] ?? '';
        $key = $source !== '' && str_starts_with($ikey, $source . ':') ? substr($ikey, strlen($source) + 1) : $ikey;
        $attempt = $h['x-oncehook-attempt'][0] ?? '';
        $ts = $h['webhook-timestamp'][0] ?? '';
        return new self(
            $ikey, $source, $key, $h['x-oncehook-type'][0] ?? null,
            $attempt !== '' && ctype_digit($attempt) ? (int) $attempt : null,
            $h['x-oncehook-delivery-id'][0] ?? null, $h['webhook-id'][0] ?? null,
            $ts !== '' && ctype_digit($ts) ? new \DateTimeImmutable('@' . $ts) : null,
            strtolower($h['x-oncehook-stale'][0] ?? '') === 'true', $h['x-oncehook-current-version'][0] ?? null,
        );
    }

    /**
     * Check that oncehook signed this delivery with $secret (the destination's whsec_...; a list of them
     * while rotating), over $body's raw bytes, whatever their encoding, within $tolerance seconds; then
     * read it. SignatureException, whose getErrorCode() says why, when it does not hold.
     *
     * @param iterable<string, string|list<string>> $headers
     * @param string|list<string> $secret
     */
    public static function verify(string $body, iterable $headers, string|array $secret, int $tolerance = self::DEFAULT_TOLERANCE, ?int $now = null): self
    {
        $keys = array_map([self::class, 'secretKey'], is_array($secret) ? array_values($secret) : [$secret]);
        if (!$keys) {
            throw new InvalidException('no secret given', field: 'secret');
        }
        $h = self::headers($headers);
        foreach (['webhook-id', 'webhook-timestamp', 'webhook-signature'] as $name) {
            if (($h[$name][0] ?? '') === '') {
                throw new SignatureException("no {$name} header: not a signed delivery", 'missing_header');
            }
        }
        $msgId = $h['webhook-id'][0];
        $ts = $h['webhook-timestamp'][0];
        if (!ctype_digit($ts)) {
            throw new SignatureException('webhook-timestamp ' . json_encode($ts) . ' is not Unix seconds', 'bad_timestamp');
        }
        $signed = $msgId . '.' . $ts . '.' . $body;
        $given = [];
        foreach (preg_split('/\s+/', implode(' ', $h['webhook-signature']), -1, PREG_SPLIT_NO_EMPTY) as $entry) {
            [$version, $b64] = array_pad(explode(',', $entry, 2), 2, '');
            $sig = base64_decode($b64, true);
            if ($version === 'v1' && $sig !== false) {
                $given[] = $sig;
            }
        }
        $match = false;
        foreach ($keys as $k) {
            $want = hash_hmac('sha256', $signed, $k, true);
            foreach ($given as $g) {
                $match = hash_equals($want, $g) || $match;
            }
        }
        if (!$match) {
            throw new SignatureException('the signature does not match the body (altered, or another secret); ' . self::BODY_HINT, 'no_match');
        }
        $age = ($now ?? time()) - (int) $ts;
        if (abs($age) > $tolerance) {
            throw new SignatureException(sprintf('the signature was made %ds %s, over the %ds tolerance', abs($age), $age > 0 ? 'ago' : 'ahead', $tolerance),
                'timestamp_out_of_tolerance');
        }
        return self::read($headers);
    }

    private static function secretKey(string $secret): string
    {
        $raw = str_starts_with($secret, 'whsec_') ? substr($secret, 6) : $secret;
        $key = base64_decode($raw, true);
        if ($key === false) {
            throw new InvalidException('the secret is not whsec_<base64>', field: 'secret');
        }
        if ($key === '') {
            throw new InvalidException('the secret is empty after whsec_: anybody could sign with it', field: 'secret');
        }
        return $key;
    }

    /**
     * @param iterable<string, string|list<string>> $headers
     * @return array<string, list<string>> names in lower case, values trimmed
     */
    private static function headers(iterable $headers): array
    {
        $out = [];
        foreach ($headers as $name => $values) {
            foreach (is_array($values) ? $values : [$values] as $v) {
                $out[strtolower((string) $name)][] = trim((string) $v);
            }
        }
        return $out;
    }
}
