<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * The key was claimed before with another fingerprint: the key is too coarse for the requests it stands for.
 */
class FingerprintException extends OncehookException
{
    protected const CODE = 'fingerprint_mismatch';
}
