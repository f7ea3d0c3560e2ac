<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * An answer of the API that no narrower class stands for: its code is the API's own
 * (`unauthorized` 401, `read_only` and `not_publisher` 403, `missing_key` 422, `unavailable` 503, ...).
 */
class ApiException extends OncehookException
{
    protected const CODE = 'error';
}
