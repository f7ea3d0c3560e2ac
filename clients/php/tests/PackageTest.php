<?php

declare(strict_types=1);

namespace Oncehook\Tests;

/**
 * The package as Composer (and Packagist) will read it, without Composer: composer.json's PSR-4 map finds
 * every class where src/autoload.php does, and the package asks for nothing beyond PHP's own extensions.
 */
final class PackageTest
{
    public function testComposerJsonsPsr4MapNamesEveryClassFile(): void
    {
        $composer = json_decode(file_get_contents(__DIR__ . '/../composer.json'), true, 512, JSON_THROW_ON_ERROR);
        Check::same('oncehook/oncehook', $composer['name']);
        Check::same(['Oncehook\\' => 'src/'], $composer['autoload']['psr-4']);
        Check::same(['php', 'ext-curl', 'ext-json'], array_keys($composer['require']), 'no dependency beyond PHP\'s own extensions');
        $root = realpath(__DIR__ . '/../src');
        $files = new \RecursiveIteratorIterator(new \RecursiveDirectoryIterator($root, \FilesystemIterator::SKIP_DOTS));
        $n = 0;
        foreach ($files as $file) {
            $rel = substr($file->getPathname(), strlen($root) + 1);
            if ($rel === 'autoload.php') {
                continue;
            }
            $class = 'Oncehook\\' . str_replace('/', '\\', substr($rel, 0, -4));
            Check::true(class_exists($class), "{$rel}: no class {$class} where PSR-4 looks for it");
            Check::same($file->getRealPath(), (new \ReflectionClass($class))->getFileName(), $class);
            $n++;
        }
        Check::true($n > 20, "found {$n} classes");
    }
}
