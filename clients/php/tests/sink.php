<?php

declare(strict_types=1);

/*
 * An app's webhook endpoint for the delivery tests, served by `php -S`: it keeps each request's headers and
 * raw body in $ONCEHOOK_SINK_DIR (one JSON file per request, the body base64), and answers 500 to an
 * event's first attempt, so that a second comes.
 */

$dir = getenv('ONCEHOOK_SINK_DIR');
$body = file_get_contents('php://input');
$headers = getallheaders();
$ikey = '';
foreach ($headers as $name => $value) {
    if (strtolower($name) === 'idempotency-key') {
        $ikey = $value;
    }
}
$first = @mkdir($dir . '/seen-' . bin2hex($ikey)); // atomic: one first attempt per key
file_put_contents(sprintf('%s/req-%.6f-%s.json', $dir, microtime(true), bin2hex(random_bytes(4))),
    json_encode(['headers' => $headers, 'body' => base64_encode($body)]));
http_response_code($first ? 500 : 200);
