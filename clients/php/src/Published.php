<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * The gateway's answer to a publish, given once the event was durable: $status is "accepted" (new: it will
 * be delivered) or "duplicate" (published before: nothing written, no second delivery), or what a newer
 * gateway says. $key is the key as the gateway keeps it and deliveries carry it (a space or a byte that a
 * header cannot hold percent-encoded).
 */
final class Published
{
    /** @param list<array<string, mixed>> $events */
    public function __construct(
        public readonly string $status,
        public readonly string $key,
        public readonly array $events = [],
    ) {
    }

    public function isDuplicate(): bool
    {
        return $this->status === 'duplicate';
    }
}
