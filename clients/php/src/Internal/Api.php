<?php

declare(strict_types=1);

namespace Oncehook\Internal;

use Oncehook\BusyException;
use Oncehook\ConflictException;
use Oncehook\ExpiredException;
use Oncehook\FailedException;
use Oncehook\FingerprintException;
use Oncehook\InvalidException;
use Oncehook\NotFoundException;
use Oncehook\OncehookException;
use Oncehook\ApiException;
use Oncehook\StaleTokenException;
use Oncehook\UnreachableException;

/**
 * What every call shares: where the API is, its token, one HTTP request with a timeout (curl), and the
 * API's one error shape turned into this package's exceptions.
 *
 * @internal
 */
final class Api
{
    public const API_ENV = 'ONCEHOOK_API';
    public const TOKEN_ENV = 'ONCEHOOK_API_TOKEN';
    public const DEFAULT_API = 'http://127.0.0.1:8081'; // api.listen's default
    public const DEFAULT_TIMEOUT = 10.0;
    public const VERSION = '0.1.0';
    /** A result may be 16 MiB (effects.max_result's bound), and an answer holds it and more. */
    private const MAX_ANSWER = 32 << 20;

    public readonly string $url;
    public readonly float $timeout;
    private readonly string $token;

    public function __construct(?string $url, ?string $token, float $timeout)
    {
        $url = self::orEnv($url, self::API_ENV) ?? self::DEFAULT_API;
        $token = self::orEnv($token, self::TOKEN_ENV);
        if ($token === null) {
            throw new InvalidException('no API token: pass $token, or set $' . self::TOKEN_ENV
                . " (a token from the gateway's api.tokens)", field: 'token');
        }
        $parts = parse_url($url);
        if ($parts === false || !in_array($parts['scheme'] ?? '', ['http', 'https'], true) || ($parts['host'] ?? '') === '') {
            throw new InvalidException(json_encode($url) . ' is not an http(s) URL such as ' . self::DEFAULT_API, field: 'url');
        }
        if (!($timeout > 0)) {
            throw new InvalidException('want a timeout of more than 0 seconds', field: 'timeout');
        }
        if (!extension_loaded('curl')) {
            throw new InvalidException("PHP's curl extension is not loaded (Debian: php-curl)", field: 'curl');
        }
        $this->url = rtrim($url, '/');
        $this->token = $token;
        $this->timeout = $timeout;
    }

    private static function orEnv(?string $v, string $env): ?string
    {
        if ($v !== null && $v !== '') {
            return $v;
        }
        $e = getenv($env);
        return is_string($e) && $e !== '' ? $e : null;
    }

    public function __debugInfo(): array // never the token
    {
        return ['url' => $this->url, 'timeout' => $this->timeout];
    }

    /**
     * Send one request and return its answer, whatever its status; UnreachableException when no answer
     * came within the timeout (the smaller of $timeout and the client's, at least 50 ms; $timeout itself
     * when $longPoll, for a pull that holds its answer up to its wait).
     *
     * @param array<string, string> $headers
     */
    public function request(string $method, string $path, ?string $body = null, array $headers = [], ?float $timeout = null, bool $longPoll = false): Answer
    {
        $t = $timeout === null ? $this->timeout : max($longPoll ? $timeout : min($timeout, $this->timeout), 0.05);
        $h = ['authorization' => 'Bearer ' . $this->token, 'user-agent' => 'oncehook-php/' . self::VERSION,
            'accept' => 'application/json', 'expect' => ''];
        if ($body !== null) {
            $h['content-type'] = 'application/json';
        }
        foreach ($headers as $name => $value) {
            $h[strtolower($name)] = $value;
        }
        $lines = [];
        foreach ($h as $name => $value) {
            $lines[] = $value === '' ? "{$name}:" : "{$name}: {$value}";
        }
        $got = '';
        $over = false;
        $answerHeaders = [];
        $ch = curl_init($this->url . $path);
        curl_setopt_array($ch, [
            CURLOPT_CUSTOMREQUEST => $method,
            CURLOPT_HTTPHEADER => $lines,
            CURLOPT_FOLLOWLOCATION => false,
            CURLOPT_PROXY => '', // no proxy from the environment: the API listener itself
            CURLOPT_PROTOCOLS => CURLPROTO_HTTP | CURLPROTO_HTTPS,
            CURLOPT_TIMEOUT_MS => (int) ceil($t * 1000),
            CURLOPT_CONNECTTIMEOUT_MS => (int) ceil($t * 1000),
            CURLOPT_NOSIGNAL => true,
            CURLOPT_HEADERFUNCTION => static function ($ch, string $line) use (&$answerHeaders): int {
                $i = strpos($line, ':');
                if ($i !== false) {
                    $answerHeaders[strtolower(trim(substr($line, 0, $i)))] = trim(substr($line, $i + 1));
                }
                return strlen($line);
            },
            CURLOPT_WRITEFUNCTION => static function ($ch, string $chunk) use (&$got, &$over): int {
                if (strlen($got) + strlen($chunk) > self::MAX_ANSWER) {
                    $over = true;
                    return 0; // aborts the transfer
                }
                $got .= $chunk;
                return strlen($chunk);
            },
        ]);
        if ($body !== null) {
            curl_setopt($ch, CURLOPT_POSTFIELDS, $body);
        }
        $ok = curl_exec($ch);
        $status = (int) curl_getinfo($ch, CURLINFO_RESPONSE_CODE);
        $err = curl_error($ch);
        unset($ch); // frees the handle and its connection (curl_close() does nothing since PHP 8, and is deprecated in 8.5)
        if ($over) {
            throw new UnreachableException("{$method} {$path}: the answer is over " . self::MAX_ANSWER . ' bytes, more than this client reads');
        }
        if ($ok === false || $status === 0) {
            throw new UnreachableException("{$method} {$this->url}{$path}: " . ($err !== '' ? $err : 'no answer'));
        }
        return new Answer($status, $answerHeaders, $got);
    }

    /** The exception an answer that is not a success stands for. */
    public static function errorFor(Answer $a, string $what): OncehookException
    {
        $b = $a->json();
        $reason = is_string($b['reason'] ?? null) ? $b['reason'] : '';
        $message = is_string($b['error'] ?? null) && $b['error'] !== '' ? $b['error'] : "{$what}: the API answered {$a->status}";
        $field = is_string($b['field'] ?? null) && $b['field'] !== '' ? $b['field'] : null;
        $s = $a->status;
        if ($s === 400) {
            return new InvalidException($message, $reason ?: 'invalid', $s, $field);
        }
        if ($s === 409) {
            return match ($reason) {
                'busy' => new BusyException($message, self::busyUntil($a, $b), $s, $field),
                'failed' => new FailedException("failed for good: {$message}", $message, $s, $field),
                'stale_token' => new StaleTokenException($message, null, $s, $field),
                default => new ConflictException($message, $reason ?: 'conflict', $s, $field),
            };
        }
        if ($s === 422 && $reason === 'fingerprint_mismatch') {
            return new FingerprintException($message, null, $s, $field);
        }
        if ($s === 410) {
            return new ExpiredException($message, $reason ?: 'expired', $s, $field);
        }
        if ($s === 404) {
            return new NotFoundException($message, $reason ?: 'not_found', $s, $field);
        }
        return new ApiException($message, $reason ?: "http_{$s}", $s, $field);
    }

    /** @param array<string, mixed> $b */
    private static function busyUntil(Answer $a, array $b): ?\DateTimeImmutable
    {
        $t = self::parseTime($b['retry_after'] ?? null);
        $after = $a->headers['retry-after'] ?? '';
        if ($t === null && $after !== '' && ctype_digit($after)) {
            $t = (new \DateTimeImmutable('now', new \DateTimeZone('UTC')))->modify("+{$after} seconds");
        }
        return $t;
    }

    /** A key as one path segment, as the Go client escapes it: "." and ".." escaped too, or a server would clean them away. */
    public static function pathEscape(string $segment): string
    {
        if ($segment === '.' || $segment === '..') {
            return str_replace('.', '%2E', $segment);
        }
        return rawurlencode($segment);
    }

    /** An RFC 3339 time as the gateway writes it (nanoseconds and Z included), in UTC. */
    public static function parseTime(mixed $s): ?\DateTimeImmutable
    {
        if (!is_string($s) || $s === '') {
            return null;
        }
        // PHP reads at most 6 fraction digits.
        $s = preg_replace('/(\.\d{6})\d+/', '$1', trim($s));
        try {
            return (new \DateTimeImmutable($s))->setTimezone(new \DateTimeZone('UTC'));
        } catch (\Exception) {
            return null;
        }
    }

    public static function rfc3339(\DateTimeInterface $t): string
    {
        return \DateTimeImmutable::createFromInterface($t)->setTimezone(new \DateTimeZone('UTC'))->format('Y-m-d\TH:i:s.u\Z');
    }

    /** @param array<string, mixed> $body */
    public static function encode(array $body): string
    {
        return json_encode($body, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION | JSON_THROW_ON_ERROR);
    }
}
