<?php

declare(strict_types=1);

namespace Oncehook\Tests;

use Oncehook\Delivery;
use Oncehook\InvalidException;
use Oncehook\NotFoundException;
use Oncehook\OncehookException;
use Oncehook\Outbox;
use Oncehook\SignatureException;

/**
 * Publishing through the outbox, and the deliveries it makes checked as an app would check them: a real
 * gateway delivering to a real HTTP server (tests/sink.php under `php -S`).
 */
final class DeliveryTest
{
    private static Gateway $gw;
    /** @var resource */
    private static $sink;
    private static string $sinkDir;
    private Outbox $outbox;

    public static function setUpClass(): void
    {
        Gateway::binary(); // skip before starting anything
        self::$sinkDir = Files::tempDir('oncehook-sink-');
        $log = self::$sinkDir . '/server.log';
        self::$sink = proc_open([PHP_BINARY, '-S', '127.0.0.1:0', __DIR__ . '/sink.php'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'w'], 2 => ['file', $log, 'w']], $pipes, null,
            ['ONCEHOOK_SINK_DIR' => self::$sinkDir] + getenv());
        $url = null;
        Check::eventually(function () use ($log, &$url) {
            return (bool) preg_match('#\((http://127\.0\.0\.1:\d+)\) started#', (string) file_get_contents($log), $m) && ($url = $m[1]);
        }, 10, 'the sink\'s start');
        self::$gw = new Gateway("{$url}/hooks");
    }

    public static function tearDownClass(): void
    {
        self::$gw->close();
        proc_terminate(self::$sink);
        proc_close(self::$sink);
        Files::remove(self::$sinkDir);
    }

    public function __construct()
    {
        $this->outbox = new Outbox(self::$gw->api, Gateway::TOKEN);
    }

    /** @return list<array{headers: array<string, string>, body: string}> what the sink got for an Idempotency-Key, in order */
    private static function requestsFor(string $ikey): array
    {
        $got = [];
        foreach (glob(self::$sinkDir . '/req-*.json') as $file) {
            $r = json_decode(file_get_contents($file), true);
            if (array_change_key_case($r['headers'])['idempotency-key'] === $ikey) {
                $got[] = ['headers' => $r['headers'], 'body' => base64_decode($r['body'])];
            }
        }
        return $got;
    }

    public function testALatin1BodyIsVerifiedOverItsRawBytes(): void
    {
        $body = "Pagamento aprovado: Concei\xe7\xe3o, R$ 9,90 - a\xe7\xe3o"; // Latin-1, as Hotmart sends it
        Check::same(false, preg_match('//u', $body) === 1, 'not UTF-8: a library that decodes first cannot check it');
        $pub = $this->outbox->publish('orders', 'ord-latin1', $body, contentType: 'text/plain; charset=iso-8859-1',
            headers: ['X-Event-Type' => 'sale.approved']);
        Check::same(['accepted', 'ord-latin1', false], [$pub->status, $pub->key, $pub->isDuplicate()]);
        Check::eventually(fn () => count(self::requestsFor('orders:ord-latin1')) >= 2, what: 'two attempts');
        $got = self::requestsFor('orders:ord-latin1');
        Check::same(2, count($got), 'a first attempt answered 500, then a second');
        foreach ($got as $n => ['headers' => $headers, 'body' => $raw]) {
            Check::same($body, $raw, 'delivered byte for byte');
            $d = Delivery::verify($raw, $headers, Gateway::SECRET);
            Check::same(['orders:ord-latin1', 'orders', 'ord-latin1', 'sale.approved', $n + 1],
                [$d->idempotencyKey, $d->source, $d->key, $d->type, $d->attempt]);
            Check::true(str_starts_with((string) $d->deliveryId, 'dlv_'), "a delivery id: {$d->deliveryId}");
            Check::true(str_starts_with((string) $d->id, 'msg_'), "a webhook-id: {$d->id}");
            Check::true(abs($d->timestamp->getTimestamp() - time()) < 60, 'a timestamp of now');
            Check::true(Delivery::read($headers) == $d, 'read() reads what verify() does');
        }
        ['headers' => $headers, 'body' => $raw] = $got[1];
        // Headers as any framework hands them: names in any case, values as lists (PSR-7, Symfony), an iterator.
        Check::same(2, Delivery::verify($raw, array_change_key_case($headers, CASE_UPPER), Gateway::SECRET)->attempt);
        Check::same('ord-latin1', Delivery::verify($raw, new \ArrayIterator(array_map(fn ($v) => [$v], $headers)), Gateway::SECRET)->key);
        // During a rotation, any of the secrets.
        $other = 'whsec_' . base64_encode('ABCDEFGHIJKLMNOPQRSTUVWXYZ');
        Check::same(2, Delivery::verify($raw, $headers, [$other, Gateway::SECRET])->attempt);

        $tampered = $raw;
        $tampered[-1] = chr(ord($tampered[-1]) ^ 0x01);
        foreach (['tampered body' => fn () => Delivery::verify($tampered, $headers, Gateway::SECRET),
            'another secret' => fn () => Delivery::verify($raw, $headers, $other),
            'the body re-encoded as UTF-8' => fn () => Delivery::verify(self::latin1ToUtf8($raw), $headers, Gateway::SECRET)] as $name => $call) {
            Check::same('no_match', Check::throws(SignatureException::class, $call, $name)->getErrorCode(), $name);
        }
        $e = Check::throws(SignatureException::class, fn () => Delivery::verify($raw, $headers, Gateway::SECRET, now: time() + 3600));
        Check::same('timestamp_out_of_tolerance', $e->getErrorCode());
        $unsigned = array_filter($headers, fn ($name) => strtolower($name) !== 'webhook-signature', ARRAY_FILTER_USE_KEY);
        Check::same('missing_header', Check::throws(SignatureException::class, fn () => Delivery::verify($raw, $unsigned, Gateway::SECRET))->getErrorCode());
        Check::throws(InvalidException::class, fn () => Delivery::verify($raw, $headers, 'whsec_'));
    }

    /** What a framework that decodes the body and encodes it again would hand over (no iconv or mbstring needed). */
    private static function latin1ToUtf8(string $s): string
    {
        return preg_replace_callback('/[\x80-\xff]/', fn ($m) => chr(0xC0 | (ord($m[0]) >> 6)) . chr(0x80 | (ord($m[0]) & 0x3F)), $s);
    }

    public function testAKeyPublishedAgainIsADuplicate(): void
    {
        $first = $this->outbox->publish('orders', 'ord_1042', ['event_name' => 'Purchase', 'value' => 99.9]);
        $again = $this->outbox->publish('orders', 'ord_1042', ['event_name' => 'Purchase', 'value' => 99.9]);
        Check::same(['accepted', 'duplicate', true], [$first->status, $again->status, $again->isDuplicate()]);
    }

    public function testAReconciliationPublishSetsItsFlagAndIsStillOnce(): void
    {
        // What a reconciliation pass sends for a row whose publish may have been lost: ?reconcile=true.
        $first = $this->outbox->publish('orders', 'ord_reconciled', ['event_name' => 'Purchase'], reconcile: true);
        Check::same(false, $first->isDuplicate(), "a key the gateway had not seen: {$first->status}");
        $again = $this->outbox->publish('orders', 'ord_reconciled', ['event_name' => 'Purchase'], reconcile: true);
        Check::same(['republished', true, true], [$again->status, $again->isDuplicate(), $again->isRepublished()]);
        $plain = $this->outbox->publish('orders', 'ord_reconciled', ['event_name' => 'Purchase']);
        Check::same(['duplicate', true, false], [$plain->status, $plain->isDuplicate(), $plain->isRepublished()]);
    }

    public function testAKeyThatIsNotATokenIsSentQuotedAndReadAsTheSameKey(): void
    {
        Check::same('"ord 7"', Outbox::formatKey('ord 7'));
        Check::same('"say \"hi\"\\\\"', Outbox::formatKey('say "hi"\\'));
        Check::same('stripe:evt_1/a', Outbox::formatKey('stripe:evt_1/a'));
        // The gateway keeps a key's space percent-encoded, as deliveries and the dashboard show it.
        Check::same('ord%207', $this->outbox->publish('orders', 'ord 7', '{}')->key);
        Check::same(true, $this->outbox->publish('orders', 'ord 7', '{}')->isDuplicate());
        $e = Check::throws(InvalidException::class, fn () => $this->outbox->publish('orders', 'pedido-ação', '{}'));
        Check::same('Idempotency-Key', $e->getField());
    }

    public function testRefusalsNameTheApisCode(): void
    {
        $e = Check::throws(NotFoundException::class, fn () => $this->outbox->publish('nope', 'k', '{}'));
        Check::same(['unknown_source', 404], [$e->getErrorCode(), $e->getHttpStatus()]);
        $e = Check::throws(OncehookException::class, fn () => $this->outbox->publish('orders', null, '{}'));
        Check::same(['missing_key', 422], [$e->getErrorCode(), $e->getHttpStatus()]);
        Check::contains('(missing_key 422)', $e->getMessage());
    }
}
