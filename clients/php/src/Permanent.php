<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * Throw it from an effect's function when no retry can fix the failure (an invalid phone number, a refused
 * card): the key is failed for good instead of released for the next attempt.
 *
 *     throw new Permanent('invalid phone number', previous: $e);
 *
 * It is not an OncehookException: it is how your code marks a failure, and once() throws it on to you.
 */
class Permanent extends \RuntimeException
{
}
