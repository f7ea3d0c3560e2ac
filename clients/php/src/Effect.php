<?php

declare(strict_types=1);

namespace Oncehook;

use Oncehook\Internal\Run;

/**
 * The claim a running effect's function holds, given to it as its argument.
 *
 * $attempt counts the claims that took the key (1, then 2 after a release or a takeover); $reclaimed says
 * a previous owner stopped halfway (it crashed, or hung until its lease expired), so check whether the
 * side effect already happened (look it up by the same key downstream) before doing it again.
 *
 * PHP runs one thing at a time, so the lease is renewed where the function lets it be: on SIGALRM when
 * ext-pcntl is there (the default in the CLI), and whenever the function calls heartbeat() or sleep().
 */
final class Effect
{
    /** @internal */
    public function __construct(
        public readonly string $key,
        public readonly string $token,
        public readonly int $attempt,
        public readonly bool $reclaimed,
        /** Seconds the lease runs from each renewal. */
        public readonly float $lease,
        private readonly Run $run,
    ) {
    }

    /** When the lease, as last renewed, expires (UTC, the gateway's clock). */
    public function leaseExpiresAt(): ?\DateTimeImmutable
    {
        return $this->run->leaseExpiresAt;
    }

    /** Whether the lease is renewed on SIGALRM while the function runs ("alarm"), or only by heartbeat() ("manual"). */
    public function renewal(): string
    {
        return $this->run->renewal;
    }

    /** True once the lease could not be kept: stop acting as the owner. */
    public function isLost(): bool
    {
        return $this->run->lost !== null;
    }

    /** Throw LeaseLostException if the lease was lost: call it before each step that acts on the outside world. */
    public function check(): void
    {
        if ($this->run->lost !== null) {
            throw $this->run->lost;
        }
    }

    /**
     * Renew the lease if a third of it has passed since the last renewal (else nothing: it is cheap to call
     * in every turn of a loop), then check(). A renewal without an answer is tried again at the next due
     * heartbeat, until the lease as last renewed has run out.
     */
    public function heartbeat(): void
    {
        $this->run->renewIfDue();
        $this->check();
    }

    /** Sleep $seconds, renewing the lease on schedule meanwhile; LeaseLostException once it is lost. */
    public function sleep(float $seconds): void
    {
        $until = hrtime(true) / 1e9 + $seconds;
        $slice = min(max($this->lease / 6, 0.01), 0.5);
        while (true) {
            $this->heartbeat();
            $left = $until - hrtime(true) / 1e9;
            if ($left <= 0) {
                return;
            }
            usleep((int) (min($left, $slice) * 1e6)); // a signal may cut it short: the loop goes on
        }
    }
}
