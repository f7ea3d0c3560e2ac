<?php

declare(strict_types=1);

/*
 * The suite's runner: plain PHP, no PHPUnit to install. `php tests/run.php [filter]` runs every public
 * test* method of the classes in tests/*Test.php (those whose name holds filter), each in a fresh
 * instance, and exits 1 if any failed. A class's static setUpClass()/tearDownClass() run around its tests.
 */

namespace Oncehook\Tests;

require __DIR__ . '/../src/autoload.php';
require __DIR__ . '/Gateway.php';
require __DIR__ . '/Check.php';

error_reporting(E_ALL);
set_error_handler(static function (int $no, string $msg, string $file, int $line): bool {
    if (!(error_reporting() & $no)) {
        return false; // silenced with @
    }
    throw new \ErrorException($msg, 0, $no, $file, $line);
});

$filter = $argv[1] ?? '';
$files = glob(__DIR__ . '/*Test.php');
$start = microtime(true);
$counts = ['ok' => 0, 'FAIL' => 0, 'skip' => 0];
foreach ($files as $file) {
    require $file;
    $class = __NAMESPACE__ . '\\' . basename($file, '.php');
    $methods = array_values(array_filter(get_class_methods($class),
        static fn (string $m) => str_starts_with($m, 'test') && ($filter === '' || stripos("{$class}::{$m}", $filter) !== false)));
    if (!$methods) {
        continue;
    }
    echo basename($file, '.php'), "\n";
    try {
        if (method_exists($class, 'setUpClass')) {
            $class::setUpClass();
        }
    } catch (Skip $s) {
        foreach ($methods as $m) {
            printf("  skip %s: %s\n", $m, $s->getMessage());
            $counts['skip']++;
        }
        continue;
    } catch (\Throwable $e) {
        printf("  FAIL %s: %s\n", 'setUpClass', Check::describe($e));
        $counts['FAIL'] += count($methods);
        continue;
    }
    foreach ($methods as $m) {
        $t0 = microtime(true);
        $note = '';
        try {
            $t = new $class();
            try {
                $note = (string) $t->$m();
            } finally {
                Worker::killAll();
                if (method_exists($t, 'tearDown')) {
                    $t->tearDown();
                }
            }
            $outcome = 'ok';
        } catch (Skip $s) {
            $outcome = 'skip';
            $note = $s->getMessage();
        } catch (\Throwable $e) {
            $outcome = 'FAIL';
            $note = "\n" . Check::describe($e);
        }
        $counts[$outcome]++;
        printf("  %-4s %s (%.1fs)%s\n", $outcome, $m, microtime(true) - $t0, $note !== '' ? " {$note}" : '');
    }
    if (method_exists($class, 'tearDownClass')) {
        $class::tearDownClass();
    }
}
printf("%d ok, %d failed, %d skipped in %.1fs\n", $counts['ok'], $counts['FAIL'], $counts['skip'], microtime(true) - $start);
if ($counts['ok'] + $counts['FAIL'] === 0 && getenv('CI')) {
    echo "nothing ran, under CI\n";
    exit(1);
}
exit($counts['FAIL'] > 0 ? 1 : 0);
