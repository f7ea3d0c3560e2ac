<?php

declare(strict_types=1);

namespace Oncehook;

use Oncehook\Internal\Answer;
use Oncehook\Internal\Api;
use Oncehook\Internal\RawMember;
use Oncehook\Internal\Run;

/**
 * oncehook's effects ledger on a running gateway's API listener: every side effect once, however many
 * processes, retries and replays ask for it.
 *
 *     $ledger = new Oncehook\Ledger();   // $ONCEHOOK_API, $ONCEHOOK_API_TOKEN
 *     $summary = $ledger->once("llm-summary:{$eventId}", fn (Oncehook\Effect $effect) =>
 *         callTheModel($invoice, idempotencyKey: $effect->key));
 *
 * $url defaults to $ONCEHOOK_API (else http://127.0.0.1:8081), $token to $ONCEHOOK_API_TOKEN; $timeout
 * bounds each HTTP call; $lease, $wait and $renew are the defaults of once(). A Ledger holds no connection.
 */
final class Ledger
{
    /** Seconds a claim is the caller's, renewed every third of it while the function runs. */
    public const DEFAULT_LEASE = 30.0;
    /** Seconds once() waits, at most, while another owner holds the key. */
    public const DEFAULT_WAIT = 30.0;
    public const MAX_KEY = 512;
    public const MAX_REASON = 4096;

    private readonly Api $api;
    public readonly float $lease;
    public readonly float $wait;

    /** @param string $renew "auto" (SIGALRM when ext-pcntl is there in the CLI, else manual), "alarm" or "manual" */
    public function __construct(
        ?string $url = null,
        ?string $token = null,
        float $timeout = Api::DEFAULT_TIMEOUT,
        float $lease = self::DEFAULT_LEASE,
        float $wait = self::DEFAULT_WAIT,
        public readonly string $renew = 'auto',
    ) {
        $this->api = new Api($url, $token, $timeout);
        $this->lease = self::positive($lease, 'lease');
        $this->wait = $wait;
    }

    public function url(): string
    {
        return $this->api->url;
    }

    public function __debugInfo(): array // never the token
    {
        return ['url' => $this->api->url, 'lease' => $this->lease, 'wait' => $this->wait, 'renew' => $this->renew];
    }

    // -- the one call -----------------------------------------------------------------------------------

    /**
     * Run $fn at most once for $key, and return its result; when the key was done before, return the
     * stored result (decoded: JSON objects as arrays) without running $fn.
     *
     * $fn gets the Effect. Its return value is completed as the key's result (JSON; a RawJson as it is).
     * It threw: the key is released for the next attempt, and the exception goes on to you; a Permanent
     * (or an instance of a class in $permanent) fails the key for good instead. Another owner holds the
     * key: once() claims again as Retry-After says, for at most $wait seconds, then BusyException.
     * $lease (seconds) is renewed while $fn runs ($renew says how: see Effect); $deadline (a time, or
     * seconds from now) is when the effect stops being worth doing (ExpiredException after it);
     * $fingerprint catches a key too coarse for its requests.
     *
     * @template T
     * @param callable(Effect): T $fn
     * @param list<class-string<\Throwable>> $permanent
     * @return T|mixed
     */
    public function once(
        string $key,
        callable $fn,
        float|int|null $lease = null,
        float|int|null $wait = null,
        \DateTimeInterface|float|int|null $deadline = null,
        ?string $fingerprint = null,
        array $permanent = [],
        ?string $renew = null,
    ): mixed {
        self::checkKey($key);
        $run = new Run($this, $key,
            $lease === null ? $this->lease : self::positive((float) $lease, 'lease'),
            $wait === null ? $this->wait : (float) $wait,
            $deadline === null ? null : self::deadline($deadline),
            $fingerprint, $permanent, $renew ?? $this->renew);
        $claim = $run->start();
        if ($claim->alreadyDone) {
            return $claim->result();
        }
        try {
            $result = $fn($run->effect);
        } catch (\Throwable $err) {
            throw $run->failed($err) ?? $err;
        }
        $run->succeeded($result);
        return $result;
    }

    // -- the steps, for work that does not fit one call ---------------------------------------------------

    /**
     * Take $key's lease once, without waiting: a Claim, owned or already done; or BusyException,
     * FailedException, ExpiredException, FingerprintException, InvalidException, UnreachableException.
     */
    public function claim(
        string $key,
        float|int|null $lease = null,
        \DateTimeInterface|float|int|null $deadline = null,
        ?string $fingerprint = null,
        ?float $timeout = null,
    ): Claim {
        self::checkKey($key);
        $body = ['lease' => self::positive((float) ($lease ?? $this->lease), 'lease')];
        if ($fingerprint !== null && $fingerprint !== '') {
            $body['fingerprint'] = $fingerprint;
        }
        if ($deadline !== null) {
            $body['deadline'] = Api::rfc3339(self::deadline($deadline));
        }
        $a = $this->api->request('POST', '/v1/effects/' . Api::pathEscape($key) . '/claim', Api::encode($body), timeout: $timeout);
        if ($a->status === 201) {
            $b = $a->json();
            return new Claim($key, (string) ($b['token'] ?? ''), (int) ($b['attempt'] ?? 0), (bool) ($b['reclaimed'] ?? false),
                Api::parseTime($b['lease_expires_at'] ?? null));
        }
        if ($a->status === 200) {
            $raw = RawMember::of($a->body, 'result');
            if ($raw === null) {
                throw new ApiException('claim ' . self::quote($key) . ': a done answer without its result', 'malformed', $a->status);
            }
            return new Claim($key, alreadyDone: true, rawResult: $raw);
        }
        throw Api::errorFor($a, 'claim ' . self::quote($key));
    }

    /** Mark $key done with $result (JSON values, or RawJson stored as it is). StaleTokenException when the token is not the owner's. */
    public function complete(string $key, string $token, mixed $result = null, ?float $timeout = null): void
    {
        $raw = self::encodeResult($result);
        // Built by hand: the result is sent, stored and given back as these bytes.
        $this->call($key, 'complete', '{"token":' . json_encode($token, JSON_THROW_ON_ERROR) . ',"result":' . $raw . '}', $timeout);
    }

    /** Give the lease back after a retryable failure: claimable at once, as the next attempt. */
    public function release(string $key, string $token, string $reason = '', ?float $timeout = null): void
    {
        $this->call($key, 'release', Api::encode(['token' => $token, 'error' => self::reason($reason)]), $timeout);
    }

    /** Mark $key failed for good; only an operator's reset reopens it. */
    public function fail(string $key, string $token, string $reason = '', ?float $timeout = null): void
    {
        $this->call($key, 'fail', Api::encode(['token' => $token, 'error' => self::reason($reason)]), $timeout);
    }

    /** Extend the lease by $lease seconds from now; returns its new expiry. */
    public function renew(string $key, string $token, float|int|null $lease = null, ?float $timeout = null): ?\DateTimeImmutable
    {
        $body = ['token' => $token, 'lease' => self::positive((float) ($lease ?? $this->lease), 'lease')];
        return Api::parseTime($this->call($key, 'renew', Api::encode($body), $timeout)->json()['lease_expires_at'] ?? null);
    }

    /**
     * The key's record, with its attempts (never its token), as the API answers it; NotFoundException when
     * there is none. @return array<string, mixed>
     */
    public function get(string $key, ?float $timeout = null): array
    {
        self::checkKey($key);
        $a = $this->api->request('GET', '/v1/effects/' . Api::pathEscape($key), timeout: $timeout);
        if ($a->status !== 200) {
            throw Api::errorFor($a, 'get ' . self::quote($key));
        }
        return $a->json();
    }

    private function call(string $key, string $op, string $body, ?float $timeout): Answer
    {
        self::checkKey($key);
        $a = $this->api->request('POST', '/v1/effects/' . Api::pathEscape($key) . '/' . $op, $body, timeout: $timeout);
        if ($a->status !== 200) {
            throw Api::errorFor($a, "{$op} " . self::quote($key));
        }
        return $a;
    }

    // -- shared rules --------------------------------------------------------------------------------------

    /** @internal A result as the JSON bytes completed: compact UTF-8, or a RawJson's own bytes. */
    public static function encodeResult(mixed $result): string
    {
        if ($result instanceof RawJson) {
            try {
                json_decode($result->json, false, 512, JSON_THROW_ON_ERROR);
            } catch (\JsonException $e) {
                throw new InvalidException('not JSON: ' . $e->getMessage(), field: 'result', previous: $e);
            }
            return $result->json;
        }
        try {
            return json_encode($result, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION | JSON_THROW_ON_ERROR);
        } catch (\JsonException $e) {
            throw new InvalidException('not JSON: ' . $e->getMessage(), field: 'result', previous: $e);
        }
    }

    /**
     * @internal A reason the ledger takes: valid UTF-8 without NUL, at most 4,096 bytes cut at a
     * character's boundary. One it refused would leave the key pending.
     */
    public static function reason(string $s): string
    {
        $s = json_decode(json_encode(str_replace("\0", "\u{FFFD}", $s), JSON_INVALID_UTF8_SUBSTITUTE));
        if (strlen($s) <= self::MAX_REASON) {
            return $s;
        }
        $i = self::MAX_REASON;
        while ($i > 0 && (ord($s[$i]) & 0xC0) === 0x80) {
            $i--;
        }
        return substr($s, 0, $i);
    }

    private static function checkKey(string $key): void
    {
        if ($key === '') {
            throw new InvalidException('the key is empty', field: 'key');
        }
        if (strlen($key) > self::MAX_KEY) {
            throw new InvalidException('the key is over ' . self::MAX_KEY . ' bytes', field: 'key');
        }
    }

    private static function positive(float $v, string $field): float
    {
        if (!($v > 0)) {
            throw new InvalidException("want more than 0 seconds, not {$v}", field: $field);
        }
        return $v;
    }

    private static function deadline(\DateTimeInterface|float|int $d): \DateTimeImmutable
    {
        if ($d instanceof \DateTimeInterface) {
            return \DateTimeImmutable::createFromInterface($d);
        }
        $at = microtime(true) + $d;
        return \DateTimeImmutable::createFromFormat('U.u', sprintf('%.6F', $at)) ?: new \DateTimeImmutable('@' . (int) $at);
    }

    private static function quote(string $key): string
    {
        return json_encode($key, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE);
    }
}
