<?php

// What Ledger::once costs over the raw HTTP calls it makes: against a real gateway (the tests' one:
// $ONCEHOOK_BIN, or built from the checkout), N keys a round through $ledger->once($key, fn) and N
// through the same two calls made by hand with curl (claim, complete), alternating which goes first.
// Prints each round and the median ratio.
//
//   ONCEHOOK_BIN=./oncehook php clients/php/bench/once.php [N] [ROUNDS]

declare(strict_types=1);

require __DIR__ . '/../src/autoload.php';
require __DIR__ . '/../tests/Gateway.php';

use Oncehook\Ledger;
use Oncehook\Tests\Gateway;

$n = (int) ($argv[1] ?? 200);
$rounds = (int) ($argv[2] ?? 6);
$gw = new Gateway();
$ledger = new Ledger($gw->api, Gateway::TOKEN);

$post = function (string $path, array $body) use ($gw): array {
    $c = curl_init($gw->api . $path);
    curl_setopt_array($c, [
        CURLOPT_POST => true,
        CURLOPT_POSTFIELDS => json_encode($body),
        CURLOPT_RETURNTRANSFER => true,
        CURLOPT_HTTPHEADER => ['Authorization: Bearer ' . Gateway::TOKEN, 'Content-Type: application/json'],
        CURLOPT_TIMEOUT => 10,
    ]);
    $text = curl_exec($c);
    return [curl_getinfo($c, CURLINFO_RESPONSE_CODE), (string) $text];
};
$byHand = function (string $key) use ($post): void {
    [$s, $t] = $post("/v1/effects/$key/claim", ['lease' => '30s']);
    if ($s !== 201) {
        throw new RuntimeException("claim $s $t");
    }
    [$s, $t] = $post("/v1/effects/$key/complete", ['token' => json_decode($t, true)['token'], 'result' => ['ok' => true]]);
    if ($s !== 200) {
        throw new RuntimeException("complete $s $t");
    }
};
$time = function (callable $f) use ($n): float {
    $t0 = hrtime(true);
    for ($i = 0; $i < $n; $i++) {
        $f($i);
    }
    return (hrtime(true) - $t0) / 1e6 / $n;
};
$ratios = [];
for ($r = 0; $r < $rounds; $r++) {
    $client = fn () => $time(fn (int $i) => $ledger->once("bench:once:$r:$i", fn ($effect) => ['ok' => true]));
    $hand = fn () => $time(fn (int $i) => $byHand("bench:raw:$r:$i"));
    if ($r % 2) {
        $h = $hand();
        $c = $client();
    } else {
        $c = $client();
        $h = $hand();
    }
    $ratios[] = $c / $h;
    printf("round %d: once() %.2f ms, raw claim+complete %.2f ms: %.2fx\n", $r + 1, $c, $h, $c / $h);
}
sort($ratios);
printf("median ratio over %d rounds: %.2fx\n", $rounds, $ratios[intdiv($rounds, 2)]);
$gw->close();
