<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * Another owner holds the key's lease, past the wait once() was given. getRetryAfter() is when that lease
 * expires (UTC), unless it is renewed or completed first.
 */
class BusyException extends OncehookException
{
    protected const CODE = 'busy';

    public function __construct(
        string $detail,
        private readonly ?\DateTimeImmutable $retryAfter = null,
        ?int $httpStatus = 409,
        ?string $field = null,
        ?\Throwable $previous = null,
    ) {
        parent::__construct($detail, 'busy', $httpStatus, $field, $previous);
    }

    public function getRetryAfter(): ?\DateTimeImmutable
    {
        return $this->retryAfter;
    }

    /** The same refusal, said again after waiting for it (once()'s own message). */
    public function afterWaiting(string $detail): self
    {
        return new self($detail, $this->retryAfter, $this->getHttpStatus(), $this->getField(), $this->getPrevious());
    }
}
