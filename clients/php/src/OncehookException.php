<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * Anything the API refused, or could not be asked. Every exception of this package is one.
 *
 * getErrorCode() is the API's own `reason` (`busy`, `stale_token`, `invalid`, ...), or this client's word
 * for what happened here (`unreachable`), so that a log line names what the gateway said; getHttpStatus()
 * is the HTTP status, null when no answer came (getCode() is the same status, 0 then); getField() the
 * request field at fault, when the API named one. The message reads
 * `oncehook: another owner holds the lease (busy 409)`.
 */
class OncehookException extends \RuntimeException
{
    protected const CODE = 'error';

    private readonly string $errorCode;

    public function __construct(
        private readonly string $detail,
        ?string $errorCode = null,
        private readonly ?int $httpStatus = null,
        private readonly ?string $field = null,
        ?\Throwable $previous = null,
    ) {
        $this->errorCode = $errorCode ?? static::CODE;
        $where = $field !== null && $field !== '' ? ", field {$field}" : '';
        $status = $httpStatus ? " {$httpStatus}" : '';
        parent::__construct("oncehook: {$detail} ({$this->errorCode}{$status}{$where})", $httpStatus ?? 0, $previous);
    }

    /** The API's reason (`busy`, `unauthorized`, ...) or this client's (`unreachable`, `lease_lost`). */
    public function getErrorCode(): string
    {
        return $this->errorCode;
    }

    /** The HTTP status of the answer; null when no answer came (or this client refused before sending). */
    public function getHttpStatus(): ?int
    {
        return $this->httpStatus;
    }

    /** The request field at fault (`key`, `lease`, `Idempotency-Key`), when one was named. */
    public function getField(): ?string
    {
        return $this->field;
    }

    /** The message without the `oncehook:` prefix and the code in brackets. */
    public function getDetail(): string
    {
        return $this->detail;
    }
}
