<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * The API refused the request's input (400), or this client did before sending: getField() names what.
 */
class InvalidException extends OncehookException
{
    protected const CODE = 'invalid';
}
