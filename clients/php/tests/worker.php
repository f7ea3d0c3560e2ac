<?php

declare(strict_types=1);

/*
 * A client process for the tests, as a user's worker would be: it reads its config from $ONCEHOOK_API and
 * $ONCEHOOK_API_TOKEN, and runs effects through once(). Every run of an effect's function appends a line to
 * a marks file, so the test counts runs. It prints one JSON line at the end.
 *
 *     worker.php race N MARKS GO          every key race:0..N-1, in an order of its own, once GO exists
 *     worker.php hold KEY MARKS           claims KEY, says so, then runs until killed
 *     worker.php long KEY SECS MARKS HOW  a function of SECS seconds under a 4 s lease, renewed on SIGALRM
 *                                         (HOW alarm: it never calls the ledger) or by heartbeat() (manual)
 *     worker.php poll KEY MARKS           claims KEY without waiting, again and again, until it is done
 *     worker.php late KEY MARKS GO LEASE  claims KEY, says so, waits for the file GO, then completes
 */

require __DIR__ . '/../src/autoload.php';
require __DIR__ . '/Gateway.php';

use Oncehook\BusyException;
use Oncehook\Effect;
use Oncehook\Ledger;
use Oncehook\OncehookException;
use Oncehook\Tests\Files;

$args = array_slice($argv, 1);
$cmd = array_shift($args);
$pid = getmypid();
$ledger = new Ledger(lease: 2, wait: 20);

/** Wait for $seconds without a word to the ledger (a signal may cut usleep short: loop on the clock). */
function busy(float $seconds): void
{
    $until = microtime(true) + $seconds;
    while (microtime(true) < $until) {
        usleep(50_000);
    }
}

switch ($cmd) {
    case 'race':
        [$n, $marks, $go] = $args;
        Files::mark($marks, "ready {$pid}");
        while (!file_exists($go)) { // both processes start together
            usleep(5_000);
        }
        $out = [];
        $order = range(0, (int) $n - 1);
        shuffle($order); // each process its own order: they meet on many keys, not only on the first
        foreach ($order as $i) {
            $out[(string) $i] = $ledger->once("race:{$i}", function () use ($marks, $i, $pid) {
                Files::mark($marks, "race:{$i} {$pid}");
                usleep(5_000);
                return ['i' => $i, 'pid' => $pid];
            });
        }
        ksort($out);
        echo json_encode($out, JSON_FORCE_OBJECT), "\n";
        break;
    case 'hold':
        [$key, $marks] = $args;
        $ledger->once($key, function (Effect $effect) use ($marks, $pid) {
            Files::mark($marks, "started {$pid} attempt={$effect->attempt}");
            busy(120);
        });
        break;
    case 'long':
        [$key, $secs, $marks, $how] = $args;
        $result = $ledger->once($key, function (Effect $effect) use ($marks, $pid, $secs, $how) {
            Files::mark($marks, "long {$pid} start renewal={$effect->renewal()}");
            if ($how === 'manual') {
                $effect->sleep((float) $secs); // heartbeat() between slices
            } else {
                busy((float) $secs);
            }
            Files::mark($marks, "long {$pid} end lost=" . var_export($effect->isLost(), true));
            return ['pid' => $pid, 'attempt' => $effect->attempt];
        }, lease: 4, renew: $how);
        echo json_encode($result), "\n";
        break;
    case 'poll':
        [$key, $marks] = $args;
        $busy = 0;
        while (true) {
            try {
                $result = $ledger->once($key, function () use ($marks, $pid) {
                    Files::mark($marks, "poll {$pid} ran");
                    return ['pid' => $pid];
                }, wait: 0);
                break;
            } catch (BusyException) {
                $busy++;
                usleep(100_000);
            }
        }
        echo json_encode(['busy' => $busy, 'result' => $result]), "\n";
        break;
    case 'late':
        [$key, $marks, $go, $lease] = $args;
        try {
            $result = $ledger->once($key, function () use ($marks, $go, $pid) {
                Files::mark($marks, "started {$pid}");
                while (!file_exists($go)) {
                    usleep(20_000);
                }
                return ['late' => $pid];
            }, lease: (float) $lease);
            echo json_encode(['error' => null, 'result' => $result]), "\n";
        } catch (OncehookException $e) {
            echo json_encode(['error' => (new ReflectionClass($e))->getShortName(), 'code' => $e->getErrorCode(), 'message' => $e->getMessage()]), "\n";
        }
        break;
    default:
        fwrite(STDERR, "worker.php: no command {$cmd}\n");
        exit(2);
}
