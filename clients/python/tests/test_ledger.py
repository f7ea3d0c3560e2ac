"""The effects ledger through ``once``, against a real gateway: several OS
processes, a kill -9, a stopped owner, a gateway restarted mid-effect."""

import asyncio
import collections
import json
import os
import shutil
import signal
import tempfile
import threading
import time
import unittest
from datetime import timedelta

from gateway import INSTALLED, SRC, TOKEN, Gateway

import oncehook
from oncehook import (AlreadyDone, BusyError, ExpiredError, FailedError, InvalidError, Ledger, Permanent, RawJSON,
                      ResultRefusedError, UnreachableError)

gw: Gateway


def setUpModule():
    global gw
    under_src = os.path.abspath(oncehook.__file__).startswith(SRC + os.sep)
    if INSTALLED == under_src:
        raise AssertionError(f"testing {oncehook.__file__}: want {'an installed' if INSTALLED else 'the src/'} package")
    gw = Gateway()


def tearDownModule():
    gw.close()


def wait_for(cond, timeout=20.0, what="the condition"):
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"{what} did not happen within {timeout:g}s")


def read(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def finish(proc, timeout=60):
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"worker exited {proc.returncode}: {err}")
    return json.loads(out)


class Once(unittest.TestCase):
    def setUp(self):
        self.ledger = Ledger(gw.api, TOKEN, lease=2, wait=10)
        self.dir = tempfile.mkdtemp(prefix="oncehook-py-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.marks = os.path.join(self.dir, "marks")

    def key(self, name):
        return f"{self.id().rsplit('.', 1)[-1]}:{name}"

    def test_two_processes_racing_for_the_same_keys_run_each_effect_once(self):
        go = os.path.join(self.dir, "go")
        a = gw.worker("race", "100", self.marks, go)
        b = gw.worker("race", "100", self.marks, go)
        wait_for(lambda: len(read(self.marks)) == 2, what="both processes' start")
        open(go, "w").close()
        ra, rb = finish(a), finish(b)
        runs = collections.Counter(line.split()[0] for line in read(self.marks)[2:])
        self.assertEqual(len(runs), 100, "every key's effect ran")
        self.assertEqual(max(runs.values()), 1, f"an effect ran twice: {runs.most_common(3)}")
        # Each process got the one result: its own, or the other's, stored.
        self.assertEqual(ra, rb)
        by = collections.Counter(r["pid"] for r in ra.values())
        self.assertEqual(sum(by.values()), 100)
        print(f"\n  race: 100 keys, runs split {sorted(by.values())} between the two processes", end=" ")

    def test_an_owner_killed_mid_effect_is_reclaimed_once_its_lease_expires(self):
        key = self.key("k")
        owner = gw.worker("hold", key, self.marks)
        wait_for(lambda: read(self.marks), what="the owner's claim")
        owner.send_signal(signal.SIGKILL)
        owner.communicate()
        seen = {}

        @self.ledger.once(key)
        def survivor(effect):
            seen.update(attempt=effect.attempt, reclaimed=effect.reclaimed)
            return "sent once"

        start = time.monotonic()
        self.assertEqual(survivor(), "sent once")
        waited = time.monotonic() - start
        self.assertEqual(seen, {"attempt": 2, "reclaimed": True})
        rec = self.ledger.get(key)
        self.assertEqual(rec["state"], "done")
        self.assertEqual([a["outcome"] for a in rec["attempts"]], ["lease_expired", "done"])
        print(f"\n  killed owner: taken over after {waited:.1f}s (lease 2s)", end=" ")

    def test_a_function_longer_than_its_lease_is_renewed_and_never_taken_over(self):
        key = self.key("k")
        owner = gw.worker("long", key, "4", self.marks)
        wait_for(lambda: read(self.marks), what="the long function's start")
        other = gw.worker("poll", key, self.marks)
        done, polled = finish(owner), finish(other)
        lines = read(self.marks)
        self.assertFalse([ln for ln in lines if ln.startswith("poll")], f"the other process ran it: {lines}")
        self.assertIn("lost=False", lines[-1])
        self.assertEqual(done["attempt"], 1)
        self.assertGreater(polled["busy"], 5, "the other process tried while it ran")
        self.assertEqual(polled["result"], done, "and then got the owner's result")
        self.assertEqual(len(self.ledger.get(key)["attempts"]), 1)

    def test_a_dead_owners_late_complete_is_refused_with_stale_token(self):
        key = self.key("k")
        go = os.path.join(self.dir, "go")
        owner = gw.worker("late", key, self.marks, go)
        wait_for(lambda: read(self.marks), what="the owner's claim")
        owner.send_signal(signal.SIGSTOP)  # hung: no renewal, as a stalled VM or a long GC
        try:
            seen = {}

            @self.ledger.once(key)
            def survivor(effect):
                seen.update(attempt=effect.attempt, reclaimed=effect.reclaimed)
                return {"by": "survivor"}

            self.assertEqual(survivor(), {"by": "survivor"})
            self.assertEqual(seen, {"attempt": 2, "reclaimed": True})
        finally:
            open(go, "w").close()
            owner.send_signal(signal.SIGCONT)
        late = finish(owner)
        self.assertEqual((late["error"], late["code"]), ("StaleTokenError", "stale_token"), late)
        self.assertEqual(self.ledger.get(key)["result"], {"by": "survivor"}, "the survivor's result stands")

    def test_a_key_busy_past_the_wait_bound_raises_busy_error(self):
        key = self.key("k")
        held = self.ledger.claim(key, lease=30)
        ran = []
        start = time.monotonic()
        with self.assertRaises(BusyError) as cm:
            self.ledger.once(key, wait=0.5)(lambda: ran.append(1))()
        waited = time.monotonic() - start
        self.assertEqual(ran, [])
        self.assertGreaterEqual(waited, 0.5)
        self.assertLess(waited, 10)
        e = cm.exception
        self.assertEqual((e.code, e.status), ("busy", 409))
        self.assertIsNotNone(e.retry_after)
        self.assertIn("(busy 409)", str(e))
        self.ledger.release(key, held.token, "test over")

    def test_a_stored_result_comes_back_byte_for_byte(self):
        key = self.key("raw")
        raw = '{"z": 1,  "a": [1.50, "\\u00e9", "é", 1e2],\n "": null}'.encode("utf-8")

        @self.ledger.once(key)
        def produce():
            return RawJSON(raw)

        produce()
        with self.assertRaises(AlreadyDone) as cm:
            with self.ledger.once(key):
                self.fail("the block ran for a key done before")
        self.assertEqual(cm.exception.raw, raw)
        self.assertEqual(cm.exception.result, json.loads(raw))
        self.assertEqual(self.ledger.claim(key).raw_result, raw)
        self.assertEqual(produce(), json.loads(raw), "the decorator gives the stored result, decoded")
        # A Python value is stored as compact UTF-8 JSON, and comes back equal.
        key = self.key("value")
        value = {"b": "ação", "a": [1, 2.5, None, True]}
        self.assertEqual(self.ledger.once(key)(lambda: value)(), value)
        self.assertEqual(self.ledger.claim(key).raw_result, '{"b":"ação","a":[1,2.5,null,true]}'.encode())
        self.assertEqual(self.ledger.once(key)(lambda: self.fail("ran again"))(), value)

    def test_the_context_manager_completes_with_its_result_and_releases_on_an_error(self):
        key = self.key("k")
        with self.assertRaises(ValueError):
            with self.ledger.once(key) as effect:
                self.assertEqual((effect.attempt, effect.reclaimed), (1, False))
                raise ValueError("the SMS gateway timed out")
        rec = self.ledger.get(key)
        self.assertEqual(rec["attempts"][0]["outcome"], "released")
        self.assertIn("ValueError: the SMS gateway timed out", rec["attempts"][0]["error"])
        with self.ledger.once(key) as effect:
            self.assertEqual((effect.attempt, effect.reclaimed), (2, False), "a release is no crash")
            effect.result = {"sms": "sent"}
        with self.assertRaises(AlreadyDone) as cm:
            with self.ledger.once(key):
                pass
        self.assertEqual(cm.exception.result, {"sms": "sent"})

    def test_a_permanent_error_fails_the_key_for_good(self):
        key = self.key("marked")

        @self.ledger.once(key)
        def send():
            raise Permanent("invalid phone number")

        with self.assertRaises(Permanent):
            send()
        with self.assertRaises(FailedError) as cm:
            send()
        self.assertIn("invalid phone number", cm.exception.reason)
        self.assertEqual(cm.exception.code, "failed")
        # Or by the exception's class.
        key = self.key("by-class")
        with self.assertRaises(KeyError):
            with self.ledger.once(key, permanent=(KeyError,)):
                raise KeyError("no such customer")
        with self.assertRaises(FailedError):
            with self.ledger.once(key):
                self.fail("ran a failed key")

    def test_a_result_that_is_not_json_fails_the_key_for_good(self):
        key = self.key("k")
        with self.assertRaises(ResultRefusedError) as cm:
            self.ledger.once(key)(lambda: {"at": object()})()
        self.assertEqual(cm.exception.code, "result_refused")
        with self.assertRaises(FailedError) as cm:
            self.ledger.once(key)(lambda: self.fail("ran again"))()
        self.assertIn("could not be stored", cm.exception.reason)

    def test_a_deadline_passed_raises_expired_error(self):
        key = self.key("k")
        with self.assertRaises(ExpiredError) as cm:
            self.ledger.once(key, deadline=timedelta(seconds=-1))(lambda: self.fail("ran past its deadline"))()
        self.assertEqual((cm.exception.code, cm.exception.status), ("expired", 410))
        # Inside its deadline, it runs.
        self.assertEqual(self.ledger.once(self.key("later"), deadline=timedelta(hours=48))(lambda: 1)(), 1)

    def test_the_key_is_a_format_string_over_the_arguments_or_a_callable(self):
        calls = []

        @self.ledger.once("reminder:{appointment}:{step}")
        def remind(appointment, step="24h", *, effect):
            calls.append((appointment, step, effect.key))
            return step

        self.assertEqual(remind.key_for("HP123"), "reminder:HP123:24h")
        remind("HP123")
        remind(appointment="HP123")
        remind("HP123", "1h")
        self.assertEqual(calls, [("HP123", "24h", "reminder:HP123:24h"), ("HP123", "1h", "reminder:HP123:1h")])
        by = self.ledger.once(lambda order: f"capi:Purchase:{order['id']}")(lambda order: order["id"])
        self.assertEqual(by.key_for({"id": 987}), "capi:Purchase:987")

    def test_async_functions_and_async_with(self):
        key = self.key("k")

        @self.ledger.once(key)
        async def summarize(effect):
            await asyncio.sleep(0.01)
            return {"attempt": effect.attempt}

        async def main():
            first = await summarize()
            again = await summarize()
            try:
                async with self.ledger.once(key):
                    return first, again, "ran"
            except AlreadyDone as done:
                return first, again, done.result

        self.assertEqual(asyncio.run(main()), ({"attempt": 1}, {"attempt": 1}, {"attempt": 1}))

    def test_a_ledger_out_of_reach_raises_unreachable_error_and_runs_nothing(self):
        ledger = Ledger("http://127.0.0.1:1", TOKEN, timeout=2)
        with self.assertRaises(UnreachableError) as cm:
            ledger.once("k")(lambda: self.fail("ran without a claim"))()
        self.assertEqual(cm.exception.code, "unreachable")
        self.assertIsNone(cm.exception.status)

    def test_errors_name_the_apis_code(self):
        with self.assertRaises(oncehook.ApiError) as cm:
            Ledger(gw.api, "not_the_token_0123456789").claim("k")
        self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorized"))
        self.assertIn("(unauthorized 401)", str(cm.exception))
        with self.assertRaises(InvalidError) as cm:
            self.ledger.claim("a\u202ekey")
        self.assertEqual((cm.exception.code, cm.exception.field), ("invalid", "key"))

    def test_config_comes_from_the_environment(self):
        env = {k: os.environ.get(k) for k in ("ONCEHOOK_API", "ONCEHOOK_API_TOKEN")}
        try:
            os.environ["ONCEHOOK_API"], os.environ["ONCEHOOK_API_TOKEN"] = gw.api, TOKEN
            self.assertEqual(Ledger().once(self.key("k"))(lambda: "ok")(), "ok")
            self.assertEqual(Ledger().url, gw.api)
            del os.environ["ONCEHOOK_API_TOKEN"]
            with self.assertRaises(InvalidError) as cm:
                Ledger()
            self.assertIn("ONCEHOOK_API_TOKEN", str(cm.exception))
        finally:
            for k, v in env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class Restart(unittest.TestCase):
    def test_the_gateway_restarted_while_the_function_runs_loses_no_result(self):
        g = Gateway()
        try:
            ledger = Ledger(g.api, TOKEN, lease=10)
            started, finish_now = threading.Event(), threading.Event()
            out = {}

            @ledger.once("restart:k")
            def work():
                started.set()
                finish_now.wait(10)
                return {"summary": "paid"}

            def run():
                try:
                    out["result"] = work()
                except Exception as e:  # noqa: BLE001 - reported below
                    out["error"] = e

            t = threading.Thread(target=run)
            t.start()
            self.assertTrue(started.wait(10))
            g.stop()
            finish_now.set()  # the function ends while the ledger is gone
            time.sleep(0.5)
            g.start()
            t.join(40)
            self.assertEqual(out, {"result": {"summary": "paid"}})
            self.assertEqual(ledger.get("restart:k")["state"], "done")
        finally:
            g.close()


if __name__ == "__main__":
    unittest.main()
