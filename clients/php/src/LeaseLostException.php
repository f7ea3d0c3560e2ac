<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * The lease could not be kept while the function ran: a renewal was refused (the key was taken over),
 * or none got through before the lease ran out. Thrown by $effect->check() and heartbeat(), and by once()
 * when the function threw after losing it (its own exception is the previous one).
 */
class LeaseLostException extends OncehookException
{
    protected const CODE = 'lease_lost';
}
