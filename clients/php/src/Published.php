<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * The gateway's answer to a publish, given once the event was durable: $status is "accepted" (new: it will
 * be delivered), "duplicate" (published before: nothing written, no second delivery), "republished" (the
 * same, for a publish marked reconcile: counted apart from duplicates), or what a newer gateway says. $key is the key as the gateway keeps it and deliveries carry it (a space or a byte that a
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

    /** Published before: nothing written, no second delivery (a reconciliation's republished included). */
    public function isDuplicate(): bool
    {
        return $this->status === 'duplicate' || $this->status === 'republished';
    }

    /** A reconciliation publish (reconcile: true) of a key published before: counted as republished. */
    public function isRepublished(): bool
    {
        return $this->status === 'republished';
    }
}
