<?php

declare(strict_types=1);

namespace Oncehook\Tests;

/**
 * A real oncehook gateway for the tests: the binary, started on a SQLite store in a temporary folder, on
 * ports it picks itself (read back from its banner).
 *
 * The binary is $ONCEHOOK_BIN, else built once from the checkout with go. Without either the tests skip,
 * unless $CI is set, where they fail.
 */
final class Gateway
{
    public const TOKEN = 'tok_clients_php_0123456789';
    /** A consumer's token: pull: [laptop], and nothing else. */
    public const PULL_TOKEN = 'tok_clients_php_pull_0123456789';
    public const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    public const CHECKOUT = __DIR__ . '/../../..';

    private static ?string $built = null;

    public string $dir;
    public string $api = '';
    public string $intake = '';
    /** @var resource|null */
    private $proc = null;

    /** The gateway's binary: $ONCEHOOK_BIN, or one built from the checkout. */
    public static function binary(): string
    {
        $bin = getenv('ONCEHOOK_BIN');
        if (is_string($bin) && $bin !== '') {
            return $bin;
        }
        if (self::$built !== null) {
            return self::$built;
        }
        $go = trim((string) shell_exec('command -v go 2>/dev/null'));
        if ($go === '' || !is_file(self::CHECKOUT . '/go.mod')) {
            if (getenv('CI')) {
                throw new \RuntimeException('no gateway binary: set ONCEHOOK_BIN, or run from the checkout with go installed');
            }
            throw new Skip('no gateway binary ($ONCEHOOK_BIN) and no go to build one');
        }
        $dir = Files::tempDir('oncehook-bin-');
        register_shutdown_function([Files::class, 'remove'], $dir);
        $out = "{$dir}/oncehook";
        $p = proc_open([$go, 'build', '-o', $out, './cmd/oncehook'], [1 => STDOUT, 2 => STDERR], $pipes, self::CHECKOUT);
        if (proc_close($p) !== 0) {
            throw new \RuntimeException('go build ./cmd/oncehook failed');
        }
        return self::$built = $out;
    }

    public function __construct(string $sinkUrl = 'http://127.0.0.1:9/')
    {
        $this->dir = Files::tempDir('oncehook-gw-');
        register_shutdown_function([$this, 'close']); // even when the runner dies: no gateway left behind
        $token = self::TOKEN;
        $pullToken = self::PULL_TOKEN;
        $secret = self::SECRET;
        file_put_contents("{$this->dir}/oncehook.yaml", <<<YAML
            listen: 127.0.0.1:0
            store: sqlite://{$this->dir}/oncehook.db
            api:
              listen: 127.0.0.1:0
              tokens:
                - {name: ops, token: "{$token}"}
                - {name: dev, token: "{$pullToken}", pull: [laptop]}
            sources:
              - name: orders
                outbox: true
                type: ["header:X-Event-Type"]
                destinations: [app]
              - name: jobs
                outbox: true
                type: ["header:X-Event-Type"]
                destinations: [laptop, other, routed]
            destinations:
              - name: routed
                pull: {}
                transform:
                  inline: 'addHandler("transform", (request) => { request.path = "/jobs/" + request.body.job; request.query = "v=2"; return request; })'
              - name: laptop
                pull: {}
                secret: "{$secret}"
                retry: {max_attempts: 5, base_delay: 100ms, max_delay: 200ms}
              - name: other
                pull: {}
              - name: app
                url: "{$sinkUrl}"
                secret: "{$secret}"
                timeout: 5s
                retry: {max_attempts: 5, base_delay: 100ms, max_delay: 200ms}

            YAML);
        $this->start();
    }

    /** Start it; again on the same addresses after a stop. */
    public function start(): void
    {
        $args = [self::binary(), 'serve', '--config', "{$this->dir}/oncehook.yaml"];
        if ($this->api !== '') {
            array_push($args, '--listen', substr($this->intake, 7), '--api-listen', substr($this->api, 7));
        }
        $out = "{$this->dir}/stdout.txt";
        file_put_contents($out, '');
        $this->proc = proc_open($args, [0 => ['file', '/dev/null', 'r'], 1 => ['file', $out, 'w'], 2 => ['file', "{$this->dir}/stderr.txt", 'a']],
            $pipes, $this->dir);
        $giveUp = microtime(true) + 30;
        while (microtime(true) < $giveUp) {
            $text = (string) file_get_contents($out);
            if (preg_match('#api:\s+(http://[0-9.:]+)#', $text, $api) && preg_match('#listening on (http://[0-9.:]+)#', $text, $intake)) {
                [$this->api, $this->intake] = [$api[1], $intake[1]];
                return;
            }
            if (!proc_get_status($this->proc)['running']) {
                break;
            }
            usleep(50_000);
        }
        throw new \RuntimeException('the gateway did not start: ' . $this->log());
    }

    public function stop(): void
    {
        if ($this->proc === null) {
            return;
        }
        $pid = proc_get_status($this->proc)['pid'];
        if (proc_get_status($this->proc)['running']) {
            posix_kill($pid, SIGTERM);
            $giveUp = microtime(true) + 20;
            while (proc_get_status($this->proc)['running'] && microtime(true) < $giveUp) {
                usleep(20_000);
            }
            if (proc_get_status($this->proc)['running']) {
                posix_kill($pid, SIGKILL);
            }
        }
        proc_close($this->proc);
        $this->proc = null;
    }

    public function close(): void
    {
        $this->stop();
        Files::remove($this->dir);
    }

    public function log(): string
    {
        $parts = [];
        foreach (['stdout.txt', 'stderr.txt'] as $name) {
            $parts[] = substr((string) @file_get_contents("{$this->dir}/{$name}"), -4000);
        }
        return implode("\n", $parts);
    }

    /** tests/worker.php in a process of its own, configured from the environment as a user's worker would be. */
    public function worker(string ...$args): Worker
    {
        $env = getenv();
        $env['ONCEHOOK_API'] = $this->api;
        $env['ONCEHOOK_API_TOKEN'] = self::TOKEN;
        return new Worker([PHP_BINARY, __DIR__ . '/worker.php', ...$args], $env);
    }
}

/** A worker process: its stdout (one JSON line at the end) and stderr go to files, read when it exits. */
final class Worker
{
    /** @var array<int, self> the workers still running, for the runner to end after a test that failed */
    private static array $running = [];
    /** @var resource|null */
    private $proc;
    private string $out;
    public readonly int $pid;

    /** @param list<string> $args @param array<string, string> $env */
    public function __construct(array $args, array $env)
    {
        $this->out = tempnam(sys_get_temp_dir(), 'oncehook-worker-');
        $this->proc = proc_open($args, [0 => ['file', '/dev/null', 'r'], 1 => ['file', $this->out, 'w'], 2 => ['file', $this->out . '.err', 'w']],
            $pipes, null, $env);
        $this->pid = proc_get_status($this->proc)['pid'];
        self::$running[$this->pid] = $this;
    }

    /** End every worker a test left running (it failed before finishing them): SIGKILL, then reap. */
    public static function killAll(): void
    {
        foreach (self::$running as $w) {
            posix_kill($w->pid, SIGKILL);
            posix_kill($w->pid, SIGCONT);
            $w->finish(10, mayDie: true);
        }
    }

    public function signal(int $sig): void
    {
        posix_kill($this->pid, $sig);
    }

    /** Wait for it to exit (killed is fine when $mayDie), and return what it printed, decoded. */
    public function finish(float $timeout = 60, bool $mayDie = false): mixed
    {
        $giveUp = microtime(true) + $timeout;
        while (($st = proc_get_status($this->proc))['running']) {
            if (microtime(true) > $giveUp) {
                posix_kill($this->pid, SIGKILL);
                throw new \RuntimeException("the worker did not exit within {$timeout}s: " . @file_get_contents($this->out . '.err'));
            }
            usleep(20_000);
        }
        proc_close($this->proc);
        $this->proc = null;
        unset(self::$running[$this->pid]);
        $out = (string) file_get_contents($this->out);
        $err = (string) @file_get_contents($this->out . '.err');
        @unlink($this->out);
        @unlink($this->out . '.err');
        if (!$mayDie && ($st['exitcode'] !== 0 || $st['signaled'])) {
            throw new \RuntimeException("the worker exited {$st['exitcode']}: {$err}{$out}");
        }
        return $mayDie ? null : json_decode($out, true, 512, JSON_THROW_ON_ERROR);
    }
}

final class Files
{
    public static function tempDir(string $prefix): string
    {
        $dir = sys_get_temp_dir() . '/' . $prefix . bin2hex(random_bytes(6));
        mkdir($dir, 0700);
        return $dir;
    }

    public static function remove(string $path): void
    {
        if (is_dir($path) && !is_link($path)) {
            foreach (scandir($path) as $name) {
                if ($name !== '.' && $name !== '..') {
                    self::remove("{$path}/{$name}");
                }
            }
            @rmdir($path);
        } else {
            @unlink($path);
        }
    }

    /** @return list<string> the lines of a marks file */
    public static function lines(string $path): array
    {
        $text = @file_get_contents($path);
        return $text === false || $text === '' ? [] : explode("\n", rtrim($text, "\n"));
    }

    /** Append one line (O_APPEND with a lock: lines of several processes never mix). */
    public static function mark(string $path, string $line): void
    {
        file_put_contents($path, $line . "\n", FILE_APPEND | LOCK_EX);
    }
}
