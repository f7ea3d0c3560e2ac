"""A pull destination's consumer against a real gateway: events published to
the outbox, pulled, handled once each, a handler's exception retried under the
same Idempotency-Key, and a consumer's token refused everywhere else."""

import threading
import time
import unittest

from gateway import PULL_TOKEN, SECRET, TOKEN, Gateway

from oncehook import ApiError, ConflictError, Consumer, Ledger, Outbox, Outcome, Permanent

gw: Gateway


def setUpModule():
    global gw
    gw = Gateway()


def tearDownModule():
    gw.close()


class PullTest(unittest.TestCase):
    def setUp(self):
        self.outbox = Outbox(gw.api, TOKEN)
        self.consumer = Consumer(gw.api, PULL_TOKEN, name="py-test")

    def publish(self, key, body):
        self.assertEqual(self.outbox.publish("jobs", key, body, headers={"X-Event-Type": "job.done"}).status,
                         "accepted")

    def test_consume_handles_each_once_and_retries_an_exception_under_the_same_key(self):
        keys = [f"once-{i}" for i in range(4)]
        for k in keys:
            self.publish(k, {"job": k, "note": "caf\u00e9 \u2603"})
        seen, done, stop = [], set(), threading.Event()

        def handle(d):
            d.verify(SECRET)  # signed as a push delivery is, over the same bytes
            seen.append((d.idempotency_key, d.attempt, d.body))
            if d.key == "once-2" and d.attempt == 1:
                raise RuntimeError("the database was down")
            done.add(d.key)
            if done == set(keys):
                stop.set()

        t = threading.Thread(target=self.consumer.consume, args=("laptop", handle),
                             kwargs={"max": 8, "lease": 10, "wait": 1, "stop": stop})
        t.start()
        t.join(20)
        stop.set()
        t.join(5)
        self.assertEqual(done, set(keys), f"handled {seen}")
        for k in keys:
            got = [(a, b) for ik, a, b in seen if ik == "jobs:" + k]
            body = ('{"job":"%s","note":"caf\u00e9 \u2603"}' % k).encode()
            want = [(1, body), (2, body)] if k == "once-2" else [(1, body)]
            self.assertEqual(got, want, k)
        # Acked: nothing is handed out again.
        self.assertEqual(self.consumer.pull("laptop", max=10, wait=1.5), [])

    def test_ack_outcomes_as_the_gateway_classifies_them(self):
        self.publish("outcome-1", "one")
        [d] = self.pull_n(1)
        self.assertEqual((d.attempt, d.body, d.headers["idempotency-key"]), (1, b"one", "jobs:outcome-1"))
        self.assertEqual(self.consumer.ack(d, Outcome.retry("busy", after=1)), "retry")
        with self.assertRaises(ConflictError) as e:  # acked: its lease is over
            self.consumer.ack(d)
        self.assertEqual((e.exception.status, e.exception.code), (409, "lease_unknown"))
        [again] = self.pull_n(1)  # after the backoff (Retry-After is bounded by retry.max_delay, 200ms here)
        self.assertEqual((again.id, again.attempt, again.idempotency_key), (d.id, 2, "jobs:outcome-1"))
        self.assertEqual(self.consumer.ack(again, Outcome.permanent("no such customer")), "permanent")
        self.publish("outcome-2", "two")
        [d2] = self.pull_n(1)
        self.assertEqual(self.consumer.ack(d2, Outcome.delivered(204, latency=0.012)), "delivered")

    def test_permanent_from_a_handler_is_not_retried(self):
        self.publish("perm-1", "x")
        got, stop = [], threading.Event()

        def handle(d):
            got.append(d.attempt)
            stop.set()
            raise Permanent("invalid phone number")

        self.consumer.consume("laptop", handle, wait=1, stop=stop)
        self.assertEqual(got, [1])
        # A long poll outlasts the client's timeout: it waits its wait, then answers none.
        self.assertEqual(Consumer(gw.api, PULL_TOKEN, timeout=0.5).pull("laptop", wait=1.5), [])

    def test_a_consumers_token_is_refused_elsewhere(self):
        with self.assertRaises(ApiError) as e:
            self.consumer.pull("other", wait=0)
        self.assertEqual((e.exception.status, e.exception.code), (403, "not_consumer"))
        with self.assertRaises(ApiError) as e:
            self.consumer.consume("other", lambda d: None)
        self.assertEqual(e.exception.status, 403)
        with self.assertRaises(ApiError) as e:
            Outbox(gw.api, PULL_TOKEN).publish("jobs", "nope", "x")
        self.assertEqual(e.exception.status, 403)
        with self.assertRaises(ApiError) as e:
            Ledger(gw.api, PULL_TOKEN).claim("pull-token-claims")
        self.assertEqual((e.exception.status, e.exception.code), (403, "pull_only"))

    def test_a_transformations_path_and_query_come_with_the_delivery(self):
        self.publish("routed-1", {"job": "resize"})
        # Every jobs event goes to routed too: the others are acked on the way.
        ops, got, give_up = Consumer(gw.api, TOKEN), None, time.monotonic() + 15  # a token that may change anything pulls too
        while got is None and time.monotonic() < give_up:
            for d in ops.pull("routed", max=100, wait=2):
                got = d if d.key == "routed-1" else got
                ops.ack(d)
        self.assertEqual((got.path, got.query) if got else None, ("/jobs/resize", "v=2"))
        [plain] = self.pull_n(1)  # the same event through laptop, which has no transformation
        self.assertEqual((plain.key, plain.path, plain.query), ("routed-1", "", ""))
        self.consumer.ack(plain)

    def pull_n(self, n):
        out, give_up = [], time.monotonic() + 15
        while len(out) < n and time.monotonic() < give_up:
            out += self.consumer.pull("laptop", max=n - len(out), lease=10, wait=2)
        return out


if __name__ == "__main__":
    unittest.main()
