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

    public function testTheReadmesSnippetsParse(): string
    {
        $n = 0;
        foreach ([__DIR__ . '/../README.md', __DIR__ . '/../../../README.md'] as $readme) {
            preg_match_all('/^```(php|json)\n(.*?)^```/ms', file_get_contents($readme), $blocks, PREG_SET_ORDER);
            foreach ($blocks as [, $lang, $code]) {
                if ($lang === 'json') {
                    json_decode($code, flags: JSON_THROW_ON_ERROR);
                    continue;
                }
                $file = tempnam(sys_get_temp_dir(), 'oncehook-readme-');
                file_put_contents($file, "<?php\n" . $code);
                exec(escapeshellarg(PHP_BINARY) . ' -l ' . escapeshellarg($file) . ' 2>&1', $out, $rc);
                unlink($file);
                Check::same(0, $rc, basename(dirname($readme)) . "/README.md's snippet:\n{$code}\n" . implode("\n", $out));
                $n++;
            }
        }
        Check::true($n >= 6, "found {$n} PHP snippets");
        return "{$n} PHP snippets";
    }
}
