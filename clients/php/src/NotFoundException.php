<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * No such key, source or endpoint (`not_found`, `unknown_source`).
 */
class NotFoundException extends OncehookException
{
    protected const CODE = 'not_found';
}
