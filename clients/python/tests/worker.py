"""A client process for the tests, as a user's worker would be: it reads its
config from $ONCEHOOK_API and $ONCEHOOK_API_TOKEN, and runs effects through
``once``. Every run of an effect's function appends a line to a marks file
(O_APPEND: lines of several processes never mix), so the test counts runs.

    worker.py race N MARKS GO    every key race:0..N-1, in order, once GO exists
    worker.py hold KEY MARKS     claims KEY, says so, then runs until killed
    worker.py long KEY SECS MARKS  a function of SECS seconds under a 2 s lease
    worker.py poll KEY MARKS     claims KEY without waiting until it is done
    worker.py late KEY MARKS GO  claims KEY, says so, waits for the file GO
"""

import json
import os
import sys
import time

from oncehook import BusyError, Ledger, OncehookError


def mark(path, line):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def main(cmd, *args):
    ledger = Ledger(lease=2, wait=20)
    if cmd == "race":
        n, marks, go = int(args[0]), args[1], args[2]
        mark(marks, f"ready {os.getpid()}")
        while not os.path.exists(go):  # both processes start together
            time.sleep(0.005)

        @ledger.once("race:{i}")
        def work(i):
            mark(marks, f"race:{i} {os.getpid()}")
            time.sleep(0.005)
            return {"i": i, "pid": os.getpid()}

        print(json.dumps({str(i): work(i) for i in range(n)}))
    elif cmd == "hold":
        key, marks = args

        @ledger.once(key)
        def hold(effect):
            mark(marks, f"started {os.getpid()} attempt={effect.attempt}")
            time.sleep(120)

        hold()
    elif cmd == "long":
        key, secs, marks = args[0], float(args[1]), args[2]

        @ledger.once(key)
        def long(effect):
            mark(marks, f"long {os.getpid()} start")
            time.sleep(secs)
            mark(marks, f"long {os.getpid()} end lost={effect.lost}")
            return {"pid": os.getpid(), "attempt": effect.attempt}

        print(json.dumps(long()))
    elif cmd == "poll":
        key, marks = args
        busy = 0

        @ledger.once(key, wait=0)
        def poll():
            mark(marks, f"poll {os.getpid()} ran")
            return {"pid": os.getpid()}

        while True:
            try:
                result = poll()
                break
            except BusyError:
                busy += 1
                time.sleep(0.1)
        print(json.dumps({"busy": busy, "result": result}))
    elif cmd == "late":
        key, marks, go = args

        @ledger.once(key)
        def late(effect):
            mark(marks, f"started {os.getpid()}")
            while not os.path.exists(go):
                time.sleep(0.02)
            return {"late": os.getpid()}

        try:
            late()
            print(json.dumps({"error": None}))
        except OncehookError as e:
            print(json.dumps({"error": type(e).__name__, "code": e.code, "message": str(e)}))
    else:
        sys.exit(f"worker.py: no command {cmd!r}")


if __name__ == "__main__":
    main(*sys.argv[1:])
