<?php

declare(strict_types=1);

namespace Oncehook;

/**
 * JSON already encoded, completed as it is: the ledger stores these bytes and gives them back to every
 * later claim byte for byte (Claim::$rawResult). Return it from an effect's function to choose the bytes.
 */
final class RawJson
{
    public function __construct(public readonly string $json)
    {
    }
}
