<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * What a consumer says of one pulled delivery, classified by the gateway as an HTTP destination's answer
 * is: a 2xx $status is delivered; 400, 401, 403, 404, 410, 422 or a 3xx is permanent (a dead letter);
 * anything else, or an $error without a status, is retried with the destination's backoff ($retryAfter
 * seconds honoured with a 429 or a 503). Outcome::delivered(), ::retry() and ::permanent() build one.
 */
final class Outcome
{
    public function __construct(
        public readonly int $status = 0,
        public readonly string $error = '',
        public readonly ?float $retryAfter = null,
        public readonly ?float $latency = null, // seconds
        public readonly string $response = '',
    ) {
    }

    public static function delivered(int $status = 200, ?float $latency = null, string $response = ''): self
    {
        return new self($status, '', null, $latency, $response);
    }

    /** Retried: with $after (seconds), not before then (sent as a 503 with Retry-After unless $status says 429). */
    public static function retry(string $error = '', ?float $after = null, int $status = 0, ?float $latency = null, string $response = ''): self
    {
        if ($after !== null && $status === 0) {
            $status = 503;
        }
        return new self($status, $error === '' && $status === 0 ? 'retry' : $error, $after, $latency, $response);
    }

    /** Never retried: a dead letter (status 422 unless given). */
    public static function permanent(string $error = '', int $status = 422, ?float $latency = null, string $response = ''): self
    {
        return new self($status, $error, null, $latency, $response);
    }

    public function withLatency(float $seconds): self
    {
        return new self($this->status, $this->error, $this->retryAfter, $seconds, $this->response);
    }

    /** @return array<string, mixed> the ack's body */
    public function wire(string $token): array
    {
        $b = ['token' => $token];
        if ($this->status !== 0) {
            $b['status'] = $this->status;
        }
        if ($this->error !== '') {
            $b['error'] = substr($this->error, 0, 4096);
        }
        if ($this->retryAfter !== null) {
            $b['retry_after'] = self::ms($this->retryAfter);
        }
        if ($this->latency !== null) {
            $b['latency'] = self::ms($this->latency);
        }
        if ($this->response !== '') {
            $b['response'] = substr($this->response, 0, 512);
        }
        return $b;
    }

    /** Seconds as the API's duration: whole milliseconds. */
    public static function ms(float $seconds): string
    {
        return max((int) round($seconds * 1000), 0) . 'ms';
    }
}
