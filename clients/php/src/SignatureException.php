<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * A delivery's signature does not hold: getErrorCode() says why (`missing_header`, `bad_timestamp`,
 * `timestamp_out_of_tolerance`, `no_match`).
 */
class SignatureException extends OncehookException
{
    protected const CODE = 'no_match';
}
