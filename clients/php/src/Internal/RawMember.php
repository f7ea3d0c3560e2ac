<?php

declare(strict_types=1);

namespace Oncehook\Internal;

/**
 * The bytes of a top-level member's value in a JSON object, exactly as they stand: a stored result comes
 * back byte for byte, which decoding and encoding it again would not keep (spacing, key order, number
 * spelling, an empty object that PHP would make an empty array).
 *
 * @internal
 */
final class RawMember
{
    public static function of(string $json, string $name): ?string
    {
        $n = strlen($json);
        $i = self::skip($json, 0);
        if ($i >= $n || $json[$i] !== '{') {
            return null;
        }
        $i = self::skip($json, $i + 1);
        while ($i < $n && $json[$i] !== '}') {
            $keyEnd = self::value($json, $i);
            if ($keyEnd === null || $json[$i] !== '"') {
                return null;
            }
            $key = json_decode(substr($json, $i, $keyEnd - $i));
            $i = self::skip($json, $keyEnd);
            if ($i >= $n || $json[$i] !== ':') {
                return null;
            }
            $start = self::skip($json, $i + 1);
            $end = self::value($json, $start);
            if ($end === null) {
                return null;
            }
            if ($key === $name) {
                return substr($json, $start, $end - $start);
            }
            $i = self::skip($json, $end);
            if ($i < $n && $json[$i] === ',') {
                $i = self::skip($json, $i + 1);
            }
        }
        return null;
    }

    private static function skip(string $s, int $i): int
    {
        return $i + strspn($s, " \t\r\n", $i);
    }

    /** Where the JSON value starting at $i ends; null when it is cut short. */
    private static function value(string $s, int $i): ?int
    {
        $n = strlen($s);
        if ($i >= $n) {
            return null;
        }
        $c = $s[$i];
        if ($c === '"') {
            for ($j = $i + 1; $j < $n; $j++) {
                if ($s[$j] === '\\') {
                    $j++;
                } elseif ($s[$j] === '"') {
                    return $j + 1;
                }
            }
            return null;
        }
        if ($c === '{' || $c === '[') {
            $depth = 0;
            for ($j = $i; $j < $n; $j++) {
                $d = $s[$j];
                if ($d === '"') {
                    $end = self::value($s, $j);
                    if ($end === null) {
                        return null;
                    }
                    $j = $end - 1;
                } elseif ($d === '{' || $d === '[') {
                    $depth++;
                } elseif ($d === '}' || $d === ']') {
                    if (--$depth === 0) {
                        return $j + 1;
                    }
                }
            }
            return null;
        }
        $end = $i + strcspn($s, ",}] \t\r\n", $i);
        return $end > $i ? $end : null;
    }
}
