"""A real oncehook gateway for the tests: the binary, started on a SQLite store
in a temporary folder, on ports it picks itself (read back from its banner).

The binary is $ONCEHOOK_BIN, else built once from the checkout with go. Without
either the tests skip, unless $CI is set, where they fail."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from typing import Optional

TOKEN = "tok_clients_python_0123456789"
PULL_TOKEN = "tok_clients_python_pull_0123456789"  # pull: [laptop], and nothing else
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")
CHECKOUT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
# The tests are of this checkout's package (src/), or, with
# $ONCEHOOK_TEST_INSTALLED set, of the one installed where they run (CI
# installs it with pip first, as a user would).
INSTALLED = bool(os.environ.get("ONCEHOOK_TEST_INSTALLED"))
if not INSTALLED:
    sys.path.insert(0, SRC)

_built: Optional[str] = None


def binary() -> str:
    """The gateway's binary: $ONCEHOOK_BIN, or one built from the checkout."""
    global _built
    if os.environ.get("ONCEHOOK_BIN"):
        return os.environ["ONCEHOOK_BIN"]
    if _built:
        return _built
    go = shutil.which("go")
    if go is None or not os.path.exists(os.path.join(CHECKOUT, "go.mod")):
        if os.environ.get("CI"):
            raise RuntimeError("no gateway binary: set ONCEHOOK_BIN, or run from the checkout with go installed")
        raise unittest.SkipTest("no gateway binary ($ONCEHOOK_BIN) and no go to build one")
    folder = tempfile.mkdtemp(prefix="oncehook-bin-")
    atexit.register(shutil.rmtree, folder, True)
    out = os.path.join(folder, "oncehook")
    subprocess.run([go, "build", "-o", out, "./cmd/oncehook"], cwd=CHECKOUT, check=True)
    _built = out
    return out


class Gateway:
    """One gateway process. ``api`` is its API listener's URL, ``intake`` its
    intake's."""

    def __init__(self, sink_url: str = "http://127.0.0.1:9/") -> None:
        self.dir = tempfile.mkdtemp(prefix="oncehook-gw-")
        self.config = os.path.join(self.dir, "oncehook.yaml")
        with open(self.config, "w") as f:
            f.write(f"""listen: 127.0.0.1:0
store: sqlite://{self.dir}/oncehook.db
api:
  listen: 127.0.0.1:0
  tokens:
    - {{name: ops, token: "{TOKEN}"}}
    - {{name: dev, token: "{PULL_TOKEN}", pull: [laptop]}}
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
    pull: {{}}
    transform:
      inline: 'addHandler("transform", (request) => {{ request.path = "/jobs/" + request.body.job; request.query = "v=2"; return request; }})'
  - name: laptop
    pull: {{}}
    secret: "{SECRET}"
    retry: {{max_attempts: 5, base_delay: 100ms, max_delay: 200ms}}
  - name: other
    pull: {{}}
  - name: app
    url: "{sink_url}"
    secret: "{SECRET}"
    timeout: 5s
    retry: {{max_attempts: 5, base_delay: 100ms, max_delay: 200ms}}
""")
        self.proc: Optional[subprocess.Popen] = None
        self.api = ""
        self.intake = ""
        self.start()

    def start(self) -> None:
        """Start it; again on the same addresses after a stop."""
        args = [binary(), "serve", "--config", self.config]
        if self.api:
            args += ["--listen", self.intake.split("//", 1)[1], "--api-listen", self.api.split("//", 1)[1]]
        out_path = os.path.join(self.dir, "stdout.txt")
        with open(out_path, "w") as out, open(os.path.join(self.dir, "stderr.txt"), "a") as err:
            self.proc = subprocess.Popen(args, stdout=out, stderr=err, cwd=self.dir, start_new_session=True)
        give_up = time.monotonic() + 30
        while time.monotonic() < give_up:
            with open(out_path) as f:
                text = f.read()
            api = re.search(r"api:\s+(http://[0-9.:]+)", text)
            intake = re.search(r"listening on (http://[0-9.:]+)", text)
            if api and intake:
                self.api, self.intake = api.group(1), intake.group(1)
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"the gateway did not start: {self.log()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self) -> str:
        parts = []
        for name in ("stdout.txt", "stderr.txt"):
            try:
                with open(os.path.join(self.dir, name)) as f:
                    parts.append(f.read()[-4000:])
            except OSError:
                pass
        return "\n".join(parts)

    def env(self) -> dict:
        """The environment a client process reads its config from."""
        env = dict(os.environ)
        env.update({"ONCEHOOK_API": self.api, "ONCEHOOK_API_TOKEN": TOKEN})
        if not INSTALLED:
            env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def worker(self, *args: str) -> subprocess.Popen:
        """tests/worker.py in a process of its own, configured from the environment."""
        return subprocess.Popen([sys.executable, os.path.join(HERE, "worker.py"), *args], env=self.env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
