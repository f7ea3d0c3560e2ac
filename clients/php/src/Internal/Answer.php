<?php

declare(strict_types=1);

namespace Oncehook\Internal;

/**
 * One HTTP answer: its status, its headers (names in lower case) and its body's bytes.
 *
 * @internal
 */
final class Answer
{
    /** @param array<string, string> $headers */
    public function __construct(
        public readonly int $status,
        public readonly array $headers,
        public readonly string $body,
    ) {
    }

    /** The body as a JSON object's members; [] when it is not one. @return array<string, mixed> */
    public function json(): array
    {
        try {
            $v = json_decode($this->body === '' ? '{}' : $this->body, true, 512, JSON_THROW_ON_ERROR | JSON_INVALID_UTF8_SUBSTITUTE);
        } catch (\JsonException) {
            return [];
        }
        return is_array($v) && !array_is_list($v) ? $v : [];
    }
}
