<?php

declare(strict_types=1);

// The package's classes without Composer: `require 'path/to/clients/php/src/autoload.php';`.
// With Composer, its PSR-4 autoload (composer.json) does the same and this file is unused.

spl_autoload_register(static function (string $class): void {
    if (strncmp($class, 'Oncehook\\', 9) !== 0) {
        return;
    }
    $file = __DIR__ . '/' . str_replace('\\', '/', substr($class, 9)) . '.php';
    if (is_file($file)) {
        require $file;
    }
});
