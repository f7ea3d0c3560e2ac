<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * No answer came: the gateway is down or restarting, the network cut, or the call's timeout passed.
 * Safe to try again: every call is fenced (the ledger's token) or keyed (a publish's Idempotency-Key).
 */
class UnreachableException extends OncehookException
{
    protected const CODE = 'unreachable';
}
