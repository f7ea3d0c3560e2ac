<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * The record is not in a state the operation applies to.
 */
class ConflictException extends OncehookException
{
    protected const CODE = 'conflict';
}
