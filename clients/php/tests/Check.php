<?php

declare(strict_types=1);

namespace Oncehook\Tests;

/** A test that cannot run here (no gateway binary, outside CI). */
final class Skip extends \RuntimeException
{
}

/** Assertions: each throws an AssertionFailed that says what was wanted and what came. */
final class AssertionFailed extends \RuntimeException
{
}

final class Check
{
    public static function same(mixed $want, mixed $got, string $what = ''): void
    {
        if ($want !== $got) {
            throw new AssertionFailed(($what !== '' ? "{$what}: " : '') . 'want ' . self::show($want) . ', got ' . self::show($got));
        }
    }

    public static function true(bool $cond, string $what): void
    {
        if (!$cond) {
            throw new AssertionFailed($what);
        }
    }

    public static function contains(string $needle, string $haystack, string $what = ''): void
    {
        if (!str_contains($haystack, $needle)) {
            throw new AssertionFailed(($what !== '' ? "{$what}: " : '') . self::show($haystack) . ' does not hold ' . self::show($needle));
        }
    }

    /**
     * Run $fn and return what it threw, which must be a $class.
     *
     * @template T of \Throwable
     * @param class-string<T> $class
     * @return T
     */
    public static function throws(string $class, callable $fn, string $what = ''): \Throwable
    {
        try {
            $fn();
        } catch (AssertionFailed $e) {
            throw $e;
        } catch (\Throwable $e) {
            if ($e instanceof $class) {
                return $e;
            }
            throw new AssertionFailed(($what !== '' ? "{$what}: " : '') . "want a {$class}, got " . self::describe($e), 0, $e);
        }
        throw new AssertionFailed(($what !== '' ? "{$what}: " : '') . "want a {$class}, nothing was thrown");
    }

    /** Call $cond until it holds, for at most $timeout seconds. */
    public static function eventually(callable $cond, float $timeout = 20, string $what = 'the condition'): void
    {
        $giveUp = microtime(true) + $timeout;
        while (microtime(true) < $giveUp) {
            if ($cond()) {
                return;
            }
            usleep(20_000);
        }
        throw new AssertionFailed("{$what} did not happen within {$timeout}s");
    }

    public static function show(mixed $v): string
    {
        return is_string($v) ? json_encode($v, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE)
            : var_export($v, true);
    }

    public static function describe(\Throwable $e): string
    {
        $s = get_class($e) . ': ' . $e->getMessage() . ' at ' . basename($e->getFile()) . ':' . $e->getLine();
        foreach ($e->getTrace() as $i => $f) {
            if ($i >= 6) {
                break;
            }
            $s .= "\n      " . basename($f['file'] ?? '?') . ':' . ($f['line'] ?? '?') . ' ' . ($f['class'] ?? '') . ($f['type'] ?? '') . $f['function'];
        }
        return $s;
    }
}
