<?php
// Orders and their outbox rows from PHP, through PDO on MariaDB (or MySQL):
// the same program as writer.py (read its docstring), for the table
// `oncehook outbox ddl --db mysql` prints.
//
//   WRITER_DSN='mysql:host=127.0.0.1;port=3306;dbname=test' WRITER_USER=root WRITER_PREFIX=php WRITER_N=1000 php writer.php
declare(strict_types=1);

$dsn = getenv('WRITER_DSN');
$user = getenv('WRITER_USER') ?: 'root';
$password = getenv('WRITER_PASSWORD') ?: '';
$prefix = getenv('WRITER_PREFIX') ?: 'php';
$n = (int) (getenv('WRITER_N') ?: 1000);
$delay = (int) (getenv('WRITER_DELAY_MS') ?: 0);

// One order and its event in one transaction. Both inserts are idempotent
// (a retry of a committed order changes nothing; its event is the same key).
function write(PDO $db, string $id, int $amount, bool $commit): void
{
    $payload = json_encode(['order' => $id, 'amount' => $amount, 'lang' => 'php']);
    $db->beginTransaction();
    try {
        $db->prepare('INSERT INTO orders (id, amount) VALUES (?, ?) ON DUPLICATE KEY UPDATE id = id')
            ->execute([$id, $amount]);
        $st = $db->prepare("INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
            . "VALUES (?, 'order', ?, 'order.created', ?) ON DUPLICATE KEY UPDATE id = id");
        $st->bindValue(1, $id);
        $st->bindValue(2, $id);
        $st->bindValue(3, $payload, PDO::PARAM_LOB);
        $st->execute();
    } catch (Throwable $e) {
        try { $db->rollBack(); } catch (Throwable) {}
        throw $e;
    }
    $commit ? $db->commit() : $db->rollBack();
}

$db = null;
for ($i = 0; $i < $n; $i++) {
    $id = sprintf('%s-%05d', $prefix, $i);
    $commit = $i % 5 !== 0;
    $times = $i % 10 === 1 ? 2 : 1; // the second: the commit's answer was "lost"
    $deadline = microtime(true) + 60;
    for ($done = 0; $done < $times;) {
        try {
            $db ??= new PDO($dsn, $user, $password, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION, PDO::ATTR_TIMEOUT => 5]);
            write($db, $id, 100 + $i, $commit);
            $done++;
        } catch (PDOException $e) {
            // The database went away: reconnect, retry the order whole.
            if (microtime(true) > $deadline) {
                throw $e;
            }
            fwrite(STDERR, "writer $prefix: $id: {$e->getMessage()}\n");
            $db = null;
            usleep(200_000);
        }
    }
    echo ($commit ? 'committed ' : 'rolledback '), $id, "\n";
    if ($delay) {
        usleep($delay * 1000);
    }
}
echo "done\n";
