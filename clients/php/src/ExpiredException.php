<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * The claim's deadline passed before the key was done: the effect is not worth doing any more, and
 * never will be under this key.
 */
class ExpiredException extends OncehookException
{
    protected const CODE = 'expired';
}
