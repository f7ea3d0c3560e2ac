"""Publishing through the outbox, and the deliveries it makes checked as an
app would check them: a real gateway delivering to a real HTTP server."""

import http.server
import json
import re
import threading
import time
import unittest
import urllib.request

from gateway import SECRET, TOKEN, Gateway

from oncehook import (InvalidError, NotFoundError, OncehookError, Outbox, SignatureError, format_key, read_delivery,
                      verify_delivery)

gw: Gateway
sink: "Sink"


class Sink(http.server.ThreadingHTTPServer):
    """An app's webhook endpoint: keeps each request's headers and raw body,
    and answers 500 to an event's first attempt (so that a second comes)."""

    daemon_threads = True

    def __init__(self):
        self.got = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), Handler)

    def requests_for(self, idempotency_key):
        with self.lock:
            return [r for r in self.got if r[0].get("Idempotency-Key") == idempotency_key]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:
            first = not any(h.get("Idempotency-Key") == self.headers.get("Idempotency-Key") for h, _ in self.server.got)
            self.server.got.append((self.headers, body))
        self.send_response(500 if first else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def setUpModule():
    global gw, sink
    sink = Sink()
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    gw = Gateway(sink_url=f"http://127.0.0.1:{sink.server_address[1]}/hooks")


def tearDownModule():
    gw.close()
    sink.shutdown()
    sink.server_close()


class Delivery(unittest.TestCase):
    def test_a_latin1_body_is_verified_over_its_raw_bytes(self):
        body = "Pagamento aprovado: Conceição, R$ 9,90 — ação".replace("—", "-").encode("latin-1")
        with self.assertRaises(UnicodeDecodeError):
            body.decode("utf-8")  # not UTF-8: a library that decodes first cannot check it
        pub = Outbox(gw.api, TOKEN).publish("orders", "ord-latin1", body, content_type="text/plain; charset=iso-8859-1",
                                            headers={"X-Event-Type": "sale.approved"})
        self.assertEqual((pub.status, pub.key, pub.duplicate), ("accepted", "ord-latin1", False))
        give_up = time.monotonic() + 20
        while len(sink.requests_for("orders:ord-latin1")) < 2 and time.monotonic() < give_up:
            time.sleep(0.02)
        got = sink.requests_for("orders:ord-latin1")
        self.assertEqual(len(got), 2, "a first attempt answered 500, then a second")
        for n, (headers, raw) in enumerate(got, 1):
            self.assertEqual(raw, body, "delivered byte for byte")
            d = verify_delivery(raw, headers, SECRET)
            self.assertEqual((d.idempotency_key, d.source, d.key, d.type, d.attempt),
                             ("orders:ord-latin1", "orders", "ord-latin1", "sale.approved", n))
            self.assertTrue(d.delivery_id.startswith("dlv_"))
            self.assertTrue(d.id.startswith("msg_"))
            self.assertLess(abs(d.timestamp.timestamp() - time.time()), 60)
            self.assertEqual(read_delivery(headers), d)
        headers, raw = got[-1]
        # Headers as any framework hands them: a dict in any case, ASGI's raw byte pairs.
        self.assertEqual(verify_delivery(raw, {k.upper(): v for k, v in headers.items()}, SECRET).attempt, 2)
        self.assertEqual(verify_delivery(memoryview(raw), [(k.lower().encode(), v.encode("latin-1"))
                                                           for k, v in headers.items()], SECRET).key, "ord-latin1")
        # During a rotation, any of the secrets.
        other = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="
        self.assertEqual(verify_delivery(raw, headers, [other, SECRET]).attempt, 2)

        tampered = bytearray(raw)
        tampered[-1] ^= 0x01
        for name, call in {
            "tampered body": lambda: verify_delivery(bytes(tampered), headers, SECRET),
            "another secret": lambda: verify_delivery(raw, headers, other),
        }.items():
            with self.subTest(name):
                with self.assertRaises(SignatureError) as cm:
                    call()
                self.assertEqual(cm.exception.code, "no_match")
        with self.assertRaises(SignatureError) as cm:
            verify_delivery(raw, headers, SECRET, now=time.time() + 3600)
        self.assertEqual(cm.exception.code, "timestamp_out_of_tolerance")
        with self.assertRaises(SignatureError) as cm:
            verify_delivery(raw, {k: v for k, v in headers.items() if k.lower() != "webhook-signature"}, SECRET)
        self.assertEqual(cm.exception.code, "missing_header")
        with self.assertRaises(TypeError) as cm:
            verify_delivery(raw.decode("latin-1"), headers, SECRET)
        self.assertIn("raw bytes", str(cm.exception))
        with self.assertRaises(InvalidError):
            verify_delivery(raw, headers, "whsec_")


class Publish(unittest.TestCase):
    def setUp(self):
        self.outbox = Outbox(gw.api, TOKEN)

    def test_a_key_published_again_is_a_duplicate(self):
        first = self.outbox.publish("orders", "ord_1042", {"event_name": "Purchase", "value": 99.9})
        again = self.outbox.publish("orders", "ord_1042", {"event_name": "Purchase", "value": 99.9})
        self.assertEqual((first.status, again.status, again.duplicate), ("accepted", "duplicate", True))

    def test_a_reconciliation_pass_is_republished_not_duplicates(self):
        def counted(verdict):
            # oncehook_events_total, which the gateway counts as it answers.
            with urllib.request.urlopen(gw.intake + "/metrics", timeout=10) as r:
                text = r.read().decode()
            m = re.search(r'^oncehook_events_total\{source="orders",verdict="%s"\} (\d+)$' % verdict, text, re.M)
            return int(m.group(1)) if m else 0

        keys = [f"ord_rec_{i}" for i in range(5)]
        for k in keys:
            self.assertEqual(self.outbox.publish("orders", k, {"order": k}).status, "accepted")
        before = counted("republished"), counted("duplicate")
        for k in keys:
            again = self.outbox.publish("orders", k, {"order": k}, reconcile=True)
            self.assertEqual((again.status, again.duplicate, again.republished), ("republished", True, True))
        self.assertEqual((counted("republished") - before[0], counted("duplicate") - before[1]), (len(keys), 0))
        # A row whose publish was lost: new, so stored (and delivered).
        lost = self.outbox.publish("orders", "ord_rec_lost", {"order": "lost"}, reconcile=True)
        self.assertEqual((lost.status, lost.duplicate, lost.republished), ("accepted", False, False))
        # /v1/stats reads the hourly rollups, which the gateway writes within 10 s.
        req = urllib.request.Request(gw.api + "/v1/stats?source=orders", headers={"Authorization": "Bearer " + TOKEN})
        give_up = time.monotonic() + 30
        while True:
            with urllib.request.urlopen(req, timeout=10) as r:
                total = json.load(r)["sources"][0]["total"]
            if total["republished"] >= len(keys) or time.monotonic() > give_up:
                break
            time.sleep(0.5)
        self.assertGreaterEqual(total["republished"], len(keys))

    def test_a_key_that_is_not_a_token_is_sent_quoted_and_read_as_the_same_key(self):
        self.assertEqual(format_key("ord 7"), '"ord 7"')
        self.assertEqual(format_key('say "hi"\\'), '"say \\"hi\\"\\\\"')
        self.assertEqual(format_key("stripe:evt_1/a"), "stripe:evt_1/a")
        # The gateway keeps a key's space percent-encoded, as deliveries and the dashboard show it.
        self.assertEqual(self.outbox.publish("orders", "ord 7", b"{}").key, "ord%207")
        self.assertTrue(self.outbox.publish("orders", "ord 7", b"{}").duplicate)
        with self.assertRaises(InvalidError) as cm:
            self.outbox.publish("orders", "pedido-ação", b"{}")
        self.assertEqual(cm.exception.field, "Idempotency-Key")

    def test_a_header_with_a_line_break_is_the_clients_own_error(self):
        # Found from outside: http.client's bare ValueError came through.
        with self.assertRaises(InvalidError) as cm:
            self.outbox.publish("orders", "ord_crlf", b"{}", headers={"X-Event-Type": "a\r\nX-Evil: 1"})
        self.assertEqual(cm.exception.field, "headers")

    def test_refusals_name_the_apis_code(self):
        with self.assertRaises(NotFoundError) as cm:
            self.outbox.publish("nope", "k", b"{}")
        self.assertEqual((cm.exception.code, cm.exception.status), ("unknown_source", 404))
        with self.assertRaises(OncehookError) as cm:
            self.outbox.publish("orders", None, b"{}")
        self.assertEqual((cm.exception.code, cm.exception.status), ("missing_key", 422))
        self.assertIn("(missing_key 422)", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
