<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * The function ran, but its result could not be stored (not JSON, or over the gateway's
 * effects.max_result): the key is failed for good with that reason, so that nobody runs the work again.
 */
class ResultRefusedException extends OncehookException
{
    protected const CODE = 'result_refused';
}
