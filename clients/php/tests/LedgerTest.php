<?php

declare(strict_types=1);

namespace Oncehook\Tests;

use Oncehook\ApiException;
use Oncehook\BusyException;
use Oncehook\Effect;
use Oncehook\ExpiredException;
use Oncehook\FailedException;
use Oncehook\InvalidException;
use Oncehook\LeaseLostException;
use Oncehook\Ledger;
use Oncehook\Permanent;
use Oncehook\RawJson;
use Oncehook\ResultRefusedException;
use Oncehook\UnreachableException;

/** The effects ledger through once(), against a real gateway: several OS processes, a kill -9, a stopped owner, a restart. */
final class LedgerTest
{
    private static Gateway $gw;
    private Ledger $ledger;
    private string $dir;
    private string $marks;

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
        $this->ledger = new Ledger(self::$gw->api, Gateway::TOKEN, lease: 2, wait: 10);
        $this->dir = Files::tempDir('oncehook-php-');
        $this->marks = "{$this->dir}/marks";
    }

    public function tearDown(): void
    {
        Files::remove($this->dir);
    }

    private function key(string $name): string
    {
        return debug_backtrace(DEBUG_BACKTRACE_IGNORE_ARGS, 2)[1]['function'] . ":{$name}";
    }

    public function testTwoProcessesRacingForTheSameKeysRunEachEffectOnce(): string
    {
        $go = "{$this->dir}/go";
        $a = self::$gw->worker('race', '100', $this->marks, $go);
        $b = self::$gw->worker('race', '100', $this->marks, $go);
        Check::eventually(fn () => count(Files::lines($this->marks)) === 2, what: "both processes' start");
        touch($go);
        [$ra, $rb] = [$a->finish(), $b->finish()];
        $runs = array_count_values(array_map(fn ($l) => explode(' ', $l)[0], array_slice(Files::lines($this->marks), 2)));
        Check::same(100, count($runs), "every key's effect ran");
        Check::same(1, max($runs), 'an effect ran twice');
        // Each process got the one result: its own, or the other's, stored.
        Check::same($ra, $rb, 'both processes got the same results');
        $by = array_count_values(array_map(fn ($r) => $r['pid'], $ra));
        Check::same(100, array_sum($by));
        sort($by);
        return 'runs split ' . json_encode($by) . ' between the two processes';
    }

    public function testAnOwnerKilledMidEffectIsReclaimedOnceItsLeaseExpires(): string
    {
        $key = $this->key('k');
        $owner = self::$gw->worker('hold', $key, $this->marks);
        Check::eventually(fn () => Files::lines($this->marks) !== [], what: "the owner's claim");
        $owner->signal(SIGKILL);
        $owner->finish(mayDie: true);
        $seen = [];
        $start = microtime(true);
        $got = $this->ledger->once($key, function (Effect $effect) use (&$seen) {
            $seen = ['attempt' => $effect->attempt, 'reclaimed' => $effect->reclaimed];
            return 'sent once';
        });
        $waited = microtime(true) - $start;
        Check::same('sent once', $got);
        Check::same(['attempt' => 2, 'reclaimed' => true], $seen);
        $rec = $this->ledger->get($key);
        Check::same('done', $rec['state']);
        Check::same(['lease_expired', 'done'], array_column($rec['attempts'], 'outcome'));
        return sprintf('taken over after %.1fs (lease 2s)', $waited);
    }

    public function testAFunctionLongerThanItsLeaseIsRenewedAndNeverTakenOver(): string
    {
        // 12 s under a 4 s lease, twice at once: renewed on SIGALRM while the function never calls the
        // ledger, and by the heartbeats of $effect->sleep(). Another process polls each key throughout.
        $owners = $pollers = [];
        foreach (['alarm', 'manual'] as $how) {
            $owners[$how] = self::$gw->worker('long', $this->key($how), '12', $this->marks, $how);
        }
        Check::eventually(fn () => count(Files::lines($this->marks)) === 2, what: "the long functions' start");
        foreach (['alarm', 'manual'] as $how) {
            $pollers[$how] = self::$gw->worker('poll', $this->key($how), $this->marks);
        }
        $lines = Files::lines($this->marks);
        foreach (['alarm', 'manual'] as $how) {
            $done = $owners[$how]->finish();
            $polled = $pollers[$how]->finish();
            Check::same(1, $done['attempt'], $how);
            Check::true($polled['busy'] > 20, "{$how}: the other process tried while it ran ({$polled['busy']} times)");
            Check::same($done, $polled['result'], "{$how}: the other process got the owner's result");
            Check::same(1, count($this->ledger->get($this->key($how))['attempts']), "{$how}: one attempt");
        }
        $lines = Files::lines($this->marks);
        Check::same([], array_values(array_filter($lines, fn ($l) => str_starts_with($l, 'poll'))), 'the other process ran it');
        Check::same(2, count(array_filter($lines, fn ($l) => str_ends_with($l, 'lost=false'))), 'neither lost its lease: ' . implode(' | ', $lines));
        Check::true(count(array_filter($lines, fn ($l) => str_contains($l, 'renewal=alarm'))) === 1, 'one renewed on SIGALRM');
        return '';
    }

    public function testADeadOwnersLateCompleteIsRefusedWithStaleToken(): void
    {
        $key = $this->key('k');
        $go = "{$this->dir}/go";
        $owner = self::$gw->worker('late', $key, $this->marks, $go, '2');
        Check::eventually(fn () => Files::lines($this->marks) !== [], what: "the owner's claim");
        $owner->signal(SIGSTOP); // hung: no renewal, as a stalled VM or a long pause
        try {
            $seen = [];
            $got = $this->ledger->once($key, function (Effect $effect) use (&$seen) {
                $seen = ['attempt' => $effect->attempt, 'reclaimed' => $effect->reclaimed];
                return ['by' => 'survivor'];
            });
            Check::same(['by' => 'survivor'], $got);
            Check::same(['attempt' => 2, 'reclaimed' => true], $seen);
        } finally {
            touch($go);
            $owner->signal(SIGCONT);
        }
        $late = $owner->finish();
        Check::same(['StaleTokenException', 'stale_token'], [$late['error'], $late['code'] ?? null], json_encode($late));
        Check::same(['by' => 'survivor'], $this->ledger->get($key)['result'], "the survivor's result stands");
    }

    public function testAKeyBusyPastTheWaitBoundThrowsBusyException(): void
    {
        $key = $this->key('k');
        $held = $this->ledger->claim($key, lease: 30);
        $ran = false;
        $start = microtime(true);
        $e = Check::throws(BusyException::class, fn () => $this->ledger->once($key, function () use (&$ran) {
            $ran = true;
        }, wait: 0.5));
        $waited = microtime(true) - $start;
        Check::same(false, $ran, 'the function ran');
        Check::true($waited >= 0.5 && $waited < 10, "waited {$waited}s");
        Check::same(['busy', 409], [$e->getErrorCode(), $e->getHttpStatus()]);
        Check::true($e->getRetryAfter() !== null, 'a retry-after');
        Check::contains('(busy 409)', $e->getMessage());
        $this->ledger->release($key, $held->token, 'test over');
    }

    public function testAStoredResultComesBackByteForByte(): void
    {
        $key = $this->key('raw');
        $raw = "{\"z\": 1,  \"a\": [1.50, \"\\u00e9\", \"é\", 1e2, {}],\n \"\": null}";
        $produce = fn () => $this->ledger->once($key, fn () => new RawJson($raw));
        Check::same($raw, $produce()->json, 'the first run returns its own result');
        Check::same($raw, $this->ledger->claim($key)->rawResult, 'the stored bytes');
        Check::same(json_decode($raw, true), $produce(), 'once() gives the stored result, decoded');
        Check::same(json_decode($raw, true), $this->ledger->claim($key)->result());
        // A PHP value is stored as compact UTF-8 JSON, and comes back equal.
        $key = $this->key('value');
        $value = ['b' => 'ação', 'a' => [1, 2.5, null, true, 3.0], 'u' => 'https://x/y'];
        Check::same($value, $this->ledger->once($key, fn () => $value));
        Check::same('{"b":"ação","a":[1,2.5,null,true,3.0],"u":"https://x/y"}', $this->ledger->claim($key)->rawResult);
        Check::same($value, $this->ledger->once($key, fn () => throw new \LogicException('ran again')));
    }

    public function testAnExceptionReleasesTheKeyForTheNextAttempt(): void
    {
        $key = $this->key('k');
        $e = Check::throws(\DomainException::class, fn () => $this->ledger->once($key, function (Effect $effect) {
            Check::same([1, false], [$effect->attempt, $effect->reclaimed]);
            throw new \DomainException('the SMS gateway timed out');
        }));
        Check::same('the SMS gateway timed out', $e->getMessage(), 'the function\'s own exception goes on');
        $rec = $this->ledger->get($key);
        Check::same('released', $rec['attempts'][0]['outcome']);
        Check::contains('DomainException: the SMS gateway timed out', $rec['attempts'][0]['error']);
        $got = $this->ledger->once($key, function (Effect $effect) {
            Check::same([2, false], [$effect->attempt, $effect->reclaimed], 'a release is no crash');
            return ['sms' => 'sent'];
        });
        Check::same(['sms' => 'sent'], $got);
    }

    public function testHostileKeysAndReasonsReachTheLedgerAsTheyAre(): void
    {
        // Keys a path would mangle (".", "..", a slash, a query, a percent), and UTF-8 beyond ASCII: each is
        // one key, run once, read back as it was given.
        foreach ([".", "..", "a/../b", "q?x=1#f", "100%2F", "ação 🚀 \"'<>", str_repeat('k', Ledger::MAX_KEY)] as $key) {
            Check::same(['ran' => $key], $this->ledger->once($key, fn () => ['ran' => $key]), $key);
            Check::same(['ran' => $key], $this->ledger->once($key, fn () => throw new \LogicException("ran {$key} again")), $key);
            Check::same($key, $this->ledger->get($key)['key'], 'the key as stored');
        }
        Check::same('key', Check::throws(InvalidException::class, fn () => $this->ledger->once(str_repeat('k', Ledger::MAX_KEY + 1), fn () => 1))->getField());
        // An exception whose message is not UTF-8, holds a NUL and is long is still a reason the ledger
        // takes (one it refused would leave the key pending): cut, and its bad bytes replaced.
        $key = $this->key('reason');
        Check::throws(\RuntimeException::class, fn () => $this->ledger->once($key,
            fn () => throw new \RuntimeException("Concei\xe7\xe3o\0 " . str_repeat('é', 3000))));
        $attempt = $this->ledger->get($key)['attempts'][0];
        Check::same('released', $attempt['outcome']);
        Check::true(str_starts_with($attempt['error'], "RuntimeException: Concei\u{FFFD}\u{FFFD}o\u{FFFD} éé"), $attempt['error']);
        Check::true(strlen($attempt['error']) <= Ledger::MAX_REASON && preg_match('//u', $attempt['error']) === 1, 'cut at a character');
    }

    public function testAPermanentErrorFailsTheKeyForGood(): void
    {
        $key = $this->key('marked');
        $send = fn () => $this->ledger->once($key, fn () => throw new Permanent('invalid phone number'));
        Check::throws(Permanent::class, $send);
        $e = Check::throws(FailedException::class, $send);
        Check::contains('invalid phone number', $e->getReason());
        Check::same('failed', $e->getErrorCode());
        // Or by the exception's class.
        $key = $this->key('by-class');
        Check::throws(\OutOfBoundsException::class, fn () => $this->ledger->once($key,
            fn () => throw new \OutOfBoundsException('no such customer'), permanent: [\OutOfBoundsException::class]));
        Check::throws(FailedException::class, fn () => $this->ledger->once($key, fn () => throw new \LogicException('ran a failed key')));
    }

    public function testAResultThatIsNotJsonFailsTheKeyForGood(): void
    {
        foreach (['nan' => NAN, 'latin1' => "Concei\xe7\xe3o"] as $name => $bad) {
            $key = $this->key($name);
            $e = Check::throws(ResultRefusedException::class, fn () => $this->ledger->once($key, fn () => ['at' => $bad]));
            Check::same('result_refused', $e->getErrorCode());
            $e = Check::throws(FailedException::class, fn () => $this->ledger->once($key, fn () => throw new \LogicException('ran again')));
            Check::contains('could not be stored', $e->getReason());
        }
    }

    public function testADeadlinePassedThrowsExpiredException(): void
    {
        $e = Check::throws(ExpiredException::class, fn () => $this->ledger->once($this->key('k'),
            fn () => throw new \LogicException('ran past its deadline'), deadline: -1));
        Check::same(['expired', 410], [$e->getErrorCode(), $e->getHttpStatus()]);
        // Inside its deadline, it runs.
        Check::same(1, $this->ledger->once($this->key('later'), fn () => 1, deadline: new \DateTimeImmutable('+48 hours')));
    }

    public function testALostLeaseIsSeenByHeartbeatAndReleasesNothing(): void
    {
        $key = $this->key('k');
        $other = new Ledger(self::$gw->api, Gateway::TOKEN);
        $e = Check::throws(LeaseLostException::class, fn () => $this->ledger->once($key, function (Effect $effect) use ($key, $other) {
            // Stalled past the lease without a heartbeat (renew: manual), and taken over meanwhile.
            usleep(2_300_000);
            $taken = $other->claim($key);
            Check::same([2, true], [$taken->attempt, $taken->reclaimed]);
            $effect->heartbeat(); // the renewal is refused
            throw new \LogicException('not reached');
        }, renew: 'manual'));
        Check::same('lease_lost', $e->getErrorCode());
        Check::true($e->getPrevious() instanceof LeaseLostException, 'the function threw the heartbeat\'s exception: ' . get_class($e->getPrevious()));
        Check::same('pending', $this->ledger->get($key)['state'], 'the new owner still holds it');
    }

    public function testAnAlarmSetBeforeIsKeptAndRestored(): void
    {
        // A queue worker's job timeout (Laravel's is pcntl_alarm): its handler still runs when due, and
        // is the handler again once the function ends.
        $fired = 0;
        $handler = function () use (&$fired) {
            $fired++;
        };
        pcntl_signal(SIGALRM, $handler);
        pcntl_async_signals(true);
        pcntl_alarm(2);
        try {
            $key = $this->key('k');
            $this->ledger->once($key, function (Effect $effect) use (&$expiries) {
                Check::same('alarm', $effect->renewal());
                $first = $effect->leaseExpiresAt();
                $until = microtime(true) + 4.5;
                while (microtime(true) < $until) {
                    usleep(50_000);
                }
                Check::true($effect->leaseExpiresAt() > $first, 'renewed meanwhile');
                Check::same(false, $effect->isLost());
            }, lease: 3);
            Check::same(1, $fired, "the earlier alarm's handler ran once");
            Check::true(pcntl_signal_get_handler(SIGALRM) === $handler, 'the handler is back');
            Check::same(0, pcntl_alarm(0), 'no alarm left pending');
        } finally {
            pcntl_alarm(0);
            pcntl_signal(SIGALRM, SIG_DFL);
        }
    }

    public function testALedgerOutOfReachThrowsUnreachableAndRunsNothing(): void
    {
        $ledger = new Ledger('http://127.0.0.1:1', Gateway::TOKEN, timeout: 2);
        $e = Check::throws(UnreachableException::class, fn () => $ledger->once('k', fn () => throw new \LogicException('ran without a claim')));
        Check::same(['unreachable', null], [$e->getErrorCode(), $e->getHttpStatus()]);
    }

    public function testErrorsNameTheApisCode(): void
    {
        $e = Check::throws(ApiException::class, fn () => (new Ledger(self::$gw->api, 'not_the_token_0123456789'))->claim('k'));
        Check::same([401, 'unauthorized'], [$e->getHttpStatus(), $e->getErrorCode()]);
        Check::contains('(unauthorized 401)', $e->getMessage());
        $e = Check::throws(InvalidException::class, fn () => $this->ledger->claim("a\u{202E}key"));
        Check::same(['invalid', 'key'], [$e->getErrorCode(), $e->getField()]);
    }

    public function testConfigComesFromTheEnvironment(): void
    {
        $saved = [getenv('ONCEHOOK_API'), getenv('ONCEHOOK_API_TOKEN')];
        try {
            putenv('ONCEHOOK_API=' . self::$gw->api);
            putenv('ONCEHOOK_API_TOKEN=' . Gateway::TOKEN);
            Check::same('ok', (new Ledger())->once($this->key('k'), fn () => 'ok'));
            Check::same(self::$gw->api, (new Ledger())->url());
            putenv('ONCEHOOK_API_TOKEN');
            $e = Check::throws(InvalidException::class, fn () => new Ledger());
            Check::contains('ONCEHOOK_API_TOKEN', $e->getMessage());
        } finally {
            putenv($saved[0] === false ? 'ONCEHOOK_API' : "ONCEHOOK_API={$saved[0]}");
            putenv($saved[1] === false ? 'ONCEHOOK_API_TOKEN' : "ONCEHOOK_API_TOKEN={$saved[1]}");
        }
    }

    public function testTheGatewayRestartedWhileTheFunctionRunsLosesNoResult(): void
    {
        $g = new Gateway();
        try {
            $go = "{$this->dir}/go";
            $env = ['ONCEHOOK_API' => $g->api];
            $owner = new Worker([PHP_BINARY, __DIR__ . '/worker.php', 'late', 'restart:k', $this->marks, $go, '10'],
                ['ONCEHOOK_API' => $g->api, 'ONCEHOOK_API_TOKEN' => Gateway::TOKEN] + getenv());
            Check::eventually(fn () => Files::lines($this->marks) !== [], what: "the function's start");
            $g->stop();
            touch($go); // the function ends while the ledger is gone
            usleep(500_000);
            $g->start();
            $late = $owner->finish();
            Check::same(['error' => null, 'result' => ['late' => $owner->pid]], $late);
            Check::same('done', (new Ledger($g->api, Gateway::TOKEN))->get('restart:k')['state']);
        } finally {
            $g->close();
        }
    }
}
