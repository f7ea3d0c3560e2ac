<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * The key was failed for good (a permanent error); getReason() is what its owner said. Only an operator's
 * reset reopens it (the dashboard's effects page, or POST /v1/effects/{key}/reset).
 */
class FailedException extends OncehookException
{
    protected const CODE = 'failed';

    public function __construct(
        string $detail,
        private readonly string $reason = '',
        ?int $httpStatus = 409,
        ?string $field = null,
        ?\Throwable $previous = null,
    ) {
        parent::__construct($detail, 'failed', $httpStatus, $field, $previous);
    }

    public function getReason(): string
    {
        return $this->reason;
    }
}
