<?php

declare(strict_types=1);

namespace Oncehook;

use Oncehook\Internal\Api;

/**
 * A successful claim: either owned ($token, $attempt, $reclaimed, $leaseExpiresAt) or $alreadyDone, with
 * the stored result's JSON bytes in $rawResult, exactly as they were completed.
 */
final class Claim
{
    public function __construct(
        public readonly string $key,
        public readonly string $token = '',
        public readonly int $attempt = 0,
        public readonly bool $reclaimed = false,
        public readonly ?\DateTimeImmutable $leaseExpiresAt = null,
        public readonly bool $alreadyDone = false,
        public readonly ?string $rawResult = null,
    ) {
    }

    /** The stored result decoded (JSON objects as arrays); null while not done. */
    public function result(): mixed
    {
        return $this->rawResult === null ? null : json_decode($this->rawResult, true, 512, JSON_THROW_ON_ERROR);
    }
}
