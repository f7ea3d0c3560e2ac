<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * The token is not the owner's any more: the lease expired and another process took the key over (or
 * it was released). Its work is not recorded: the new owner's is. This is a dead owner's late complete.
 */
class StaleTokenException extends OncehookException
{
    protected const CODE = 'stale_token';
}
