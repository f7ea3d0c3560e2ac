<?php

declare(strict_types=1);

namespace Oncehook\Internal;

use Oncehook\BusyException;
use Oncehook\Claim;
use Oncehook\Effect;
use Oncehook\InvalidException;
use Oncehook\LeaseLostException;
use Oncehook\Ledger;
use Oncehook\OncehookException;
use Oncehook\Permanent;
use Oncehook\RawJson;
use Oncehook\ResultRefusedException;
use Oncehook\UnreachableException;

/**
 * One call of Ledger::once: claim (waiting while busy), renew while the function runs, then record its
 * outcome. The semantics of Go's effect.Do and of the Python client; PHP has no threads, so renewals run
 * on SIGALRM (ext-pcntl) and whenever the function calls Effect::heartbeat().
 *
 * @internal
 */
final class Run
{
    /** Seconds, at most, an outcome is tried again while the ledger cannot be reached. */
    public const RECORD_FOR = 30.0;

    public ?Effect $effect = null;
    public ?LeaseLostException $lost = null;
    public ?\DateTimeImmutable $leaseExpiresAt = null;
    public string $renewal;

    private float $until = 0.0;     // the lease's end by the local monotonic clock, as last known
    private float $lastTry = 0.0;   // the last renewal sent
    private bool $renewing = false; // a renewal in flight: an alarm during heartbeat() waits its turn
    private bool $stopped = false;
    private int $period = 1;        // seconds between alarms
    private mixed $prevHandler = null;
    private ?bool $prevAsync = null;
    private ?float $foreignDue = null; // an alarm set before ours (a queue worker's timeout), by the monotonic clock

    /** @param list<class-string<\Throwable>> $permanent */
    public function __construct(
        private readonly Ledger $ledger,
        private readonly string $key,
        private readonly float $lease,
        private readonly float $wait,
        private readonly ?\DateTimeImmutable $deadline,
        private readonly ?string $fingerprint,
        private readonly array $permanent,
        string $renew,
    ) {
        $this->renewal = self::renewal($renew, $lease);
    }

    public static function now(): float
    {
        return hrtime(true) / 1e9;
    }

    /** "alarm" or "manual", from "auto", "alarm" or "manual". */
    private static function renewal(string $renew, float $lease): string
    {
        $can = PHP_SAPI === 'cli' && function_exists('pcntl_alarm') && function_exists('pcntl_async_signals')
            && function_exists('pcntl_signal_get_handler');
        switch ($renew) {
            case 'manual':
                return 'manual';
            case 'auto':
            case 'alarm':
                if (!$can) {
                    if ($renew === 'alarm') {
                        throw new InvalidException('renew: alarm needs ext-pcntl in the CLI (Debian: php-cli has it)', field: 'renew');
                    }
                    return 'manual';
                }
                if ($lease < 2) {
                    throw new InvalidException("a lease of {$lease}s is too short to renew on SIGALRM, which counts whole seconds: "
                        . "take a lease of 2 s or more, or renew: 'manual' and call \$effect->heartbeat()", field: 'lease');
                }
                return 'alarm';
        }
        throw new InvalidException("renew is auto, alarm or manual, not " . json_encode($renew), field: 'renew');
    }

    /**
     * Claim the key, waiting as Retry-After says (checking sooner, since an owner that completes early frees
     * it) until $wait runs out. An owned claim starts the renewals.
     */
    public function start(): Claim
    {
        $giveUp = self::now() + max($this->wait, 0.0);
        $pause = 0.05;
        while (true) {
            $sent = self::now();
            try {
                $c = $this->ledger->claim($this->key, lease: $this->lease, deadline: $this->deadline, fingerprint: $this->fingerprint);
            } catch (BusyException $e) {
                $left = $giveUp - self::now();
                if ($left <= 0) {
                    throw $e->afterWaiting(json_encode($this->key, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE)
                        . ' is busy: another owner holds its lease' . ($this->wait > 0 ? " (waited {$this->wait}s)" : ''));
                }
                $nap = $pause * (0.5 + mt_rand() / mt_getrandmax() / 2);
                if ($e->getRetryAfter() !== null) {
                    $until = (float) $e->getRetryAfter()->format('U.u') - microtime(true);
                    $nap = min($nap, max($until, 0.01));
                }
                usleep((int) (min($nap, $left) * 1e6));
                $pause = min($pause * 2, 1.0);
                continue;
            }
            if (!$c->alreadyDone) {
                $this->until = $sent + $this->lease;
                $this->lastTry = $sent;
                $this->leaseExpiresAt = $c->leaseExpiresAt;
                $this->effect = new Effect($this->key, $c->token, $c->attempt, $c->reclaimed, $this->lease, $this);
                if ($this->renewal === 'alarm') {
                    $this->arm();
                }
            }
            return $c;
        }
    }

    /**
     * Renew when a third of the lease has passed since the last renewal. A renewal the ledger refuses
     * loses the lease at once; one that gets no answer (a gateway restarting) is tried at the next due
     * time, until the lease as last renewed has run out.
     */
    public function renewIfDue(float $every = 0.0): void
    {
        if ($this->lost !== null || $this->stopped || $this->renewing || $this->effect === null) {
            return;
        }
        $sent = self::now();
        if ($sent - $this->lastTry < ($every > 0 ? $every : $this->lease / 3)) {
            return;
        }
        $this->renewing = true;
        $this->lastTry = $sent;
        try {
            $exp = $this->ledger->renew($this->key, $this->effect->token, $this->lease, timeout: max($this->until - $sent, 0.05));
            $this->until = $sent + $this->lease;
            $this->leaseExpiresAt = $exp;
        } catch (\Throwable $e) {
            if ($e instanceof OncehookException && self::answered($e)) {
                $this->lost = new LeaseLostException(json_encode($this->key, JSON_UNESCAPED_UNICODE) . ': lease lost: ' . $e->getDetail(), previous: $e);
            } elseif (!$e instanceof OncehookException || self::now() >= $this->until) {
                $this->lost = new LeaseLostException(json_encode($this->key, JSON_UNESCAPED_UNICODE)
                    . ': lease lost: no renewal got through before it ran out (' . $e->getMessage() . ')', previous: $e);
            }
        } finally {
            $this->renewing = false;
        }
    }

    // -- SIGALRM ------------------------------------------------------------------------------------

    /**
     * Renew on SIGALRM every third of the lease (in whole seconds, at least 1), with async signals on, so
     * the handler runs between the function's statements and cuts a sleep() short. An alarm set before
     * (a queue worker's job timeout) is kept: its handler is called when it comes due, and it is set again
     * when the function ends.
     */
    private function arm(): void
    {
        $this->period = max(1, (int) floor($this->lease / 3));
        $this->prevAsync = pcntl_async_signals(true);
        $this->prevHandler = pcntl_signal_get_handler(SIGALRM);
        $left = pcntl_alarm(0);
        $this->foreignDue = $left > 0 ? self::now() + $left : null;
        pcntl_signal(SIGALRM, function (): void {
            $this->onAlarm();
        });
        pcntl_alarm($this->nextAlarm());
    }

    private function nextAlarm(): int
    {
        if ($this->foreignDue === null) {
            return $this->period;
        }
        return max(1, min($this->period, (int) ceil($this->foreignDue - self::now())));
    }

    private function onAlarm(): void
    {
        if ($this->stopped) {
            return;
        }
        if ($this->foreignDue !== null && self::now() >= $this->foreignDue - 0.5) {
            $this->foreignDue = null;
            $prev = $this->prevHandler;
            if (is_callable($prev)) {
                $prev(SIGALRM, []);
                $left = pcntl_alarm(0); // the handler may have set its alarm again
                $this->foreignDue = $left > 0 ? self::now() + $left : null;
            } elseif ($prev === SIG_DFL) {
                // What the alarm was set for: the default action ends the process.
                $this->disarm();
                pcntl_alarm(1);
                return;
            }
        }
        $this->renewIfDue($this->period - 0.05);
        if ($this->lost === null && !$this->stopped) {
            pcntl_alarm($this->nextAlarm());
        }
    }

    private function disarm(): void
    {
        if ($this->prevAsync === null) {
            return;
        }
        pcntl_alarm(0);
        pcntl_signal(SIGALRM, $this->prevHandler ?? SIG_DFL);
        if ($this->foreignDue !== null) {
            pcntl_alarm(max(1, (int) ceil($this->foreignDue - self::now())));
        }
        pcntl_async_signals($this->prevAsync);
        $this->prevAsync = null;
    }

    private function halt(): void
    {
        $this->stopped = true;
        if ($this->renewal === 'alarm') {
            $this->disarm();
        }
    }

    // -- the outcome --------------------------------------------------------------------------------

    /**
     * Complete with the result, trying again while the ledger cannot be reached (until the lease runs out,
     * 30 s at most). A result the ledger (or JSON) refuses fails the key for good: the work ran, and a
     * pending key would be handed to the next claimer to run again.
     */
    public function succeeded(mixed $result): void
    {
        $this->halt();
        $token = $this->effect->token;
        try {
            $raw = Ledger::encodeResult($result);
        } catch (InvalidException $e) {
            $this->refused($e);
        }
        try {
            $this->record(fn () => $this->ledger->complete($this->key, $token, new RawJson($raw)));
        } catch (InvalidException $e) {
            $this->refused($e);
        }
    }

    private function refused(InvalidException $e): never
    {
        $token = $this->effect->token;
        $reason = Ledger::reason('done, but its result could not be stored: ' . $e->getDetail());
        $this->record(fn () => $this->ledger->fail($this->key, $token, $reason));
        throw new ResultRefusedException(json_encode($this->key, JSON_UNESCAPED_UNICODE) . ': the work was done, but its result was refused ('
            . $e->getDetail() . '), so the key is failed for good', previous: $e);
    }

    /**
     * Release the key for a later attempt, or fail it for good when $err is permanent; the caller throws
     * $err on (or, when the lease was lost, a LeaseLostException: the key is not this owner's to release).
     */
    public function failed(\Throwable $err): ?\Throwable
    {
        $this->halt();
        if ($this->lost !== null) {
            return new LeaseLostException($this->lost->getDetail(), previous: $err);
        }
        $permanent = $err instanceof Permanent;
        foreach ($this->permanent as $class) {
            $permanent = $permanent || $err instanceof $class;
        }
        $message = $err->getMessage();
        $reason = Ledger::reason(get_class($err) . ($message !== '' ? ': ' . $message : ''));
        $token = $this->effect->token;
        try {
            $this->record(fn () => $permanent
                ? $this->ledger->fail($this->key, $token, $reason)
                : $this->ledger->release($this->key, $token, $reason));
        } catch (OncehookException $e) {
            // The function's own exception is what the caller sees; the key stays pending until its
            // lease expires, then goes to the next claimer.
            error_log(sprintf('oncehook: %s: could not %s the key after %s: %s', json_encode($this->key, JSON_UNESCAPED_UNICODE),
                $permanent ? 'fail' : 'release', get_class($err), $e->getMessage()));
        }
        return null;
    }

    /** @param callable(): void $call */
    private function record(callable $call): void
    {
        $until = min($this->until, self::now() + self::RECORD_FOR);
        $pause = 0.05;
        while (true) {
            try {
                $call();
                return;
            } catch (OncehookException $e) {
                if (self::answered($e) || self::now() + $pause >= $until) {
                    throw $e;
                }
            }
            usleep((int) ($pause * 1e6));
            $pause = min($pause * 2, 2.0);
        }
    }

    /**
     * Whether $e is the ledger's answer, rather than a failure to reach it (no answer, or a 5xx: the
     * gateway could not commit, and says to retry).
     */
    public static function answered(OncehookException $e): bool
    {
        if ($e instanceof UnreachableException) {
            return false;
        }
        return !($e->getHttpStatus() !== null && $e->getHttpStatus() >= 500);
    }
}
