"""What Ledger.once costs over the raw HTTP calls it makes.

Against a real gateway (the tests' one: $ONCEHOOK_BIN, or built from the
checkout), alternating in rounds: N keys through ``with ledger.once(key) as effect``,
then N keys through the same two calls made by hand with http.client, a fresh
connection each, as the client makes them (claim, then complete). Prints the mean round trip of each and their ratio.

    ONCEHOOK_BIN=./oncehook python3 clients/python/bench/once.py [N] [ROUNDS]
"""

import http.client
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import gateway  # noqa: E402  (puts src/ on the path)
from oncehook import Ledger  # noqa: E402


def raw_once(host, port, key):
    def call(path, body):
        c = http.client.HTTPConnection(host, port, timeout=10)
        c.request("POST", path, body=json.dumps(body).encode(),
                  headers={"Authorization": "Bearer " + gateway.TOKEN, "Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data
    status, data = call(f"/v1/effects/{key}/claim", {"lease": "30s"})
    assert status == 201, (status, data)
    token = json.loads(data)["token"]
    status, data = call(f"/v1/effects/{key}/complete", {"token": token, "result": {"ok": True}})
    assert status == 200, (status, data)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    gw = gateway.Gateway()

    try:
        host, port = gw.api.split("//", 1)[1].split(":")
        ledger = Ledger(gw.api, gateway.TOKEN)
        ratios = []
        for r in range(rounds):
            # Alternating, each side first in turn: the machine's drift
            # falls on both alike.
            def by_client():
                t0 = time.perf_counter()
                for i in range(n):
                    with ledger.once(f"bench:once:{r}:{i}") as effect:
                        effect.result = {"ok": True}
                return (time.perf_counter() - t0) / n

            def by_hand():
                t0 = time.perf_counter()
                for i in range(n):
                    raw_once(host, int(port), f"bench:raw:{r}:{i}")
                return (time.perf_counter() - t0) / n
            if r % 2:
                raw, client = by_hand(), by_client()
            else:
                client, raw = by_client(), by_hand()
            ratios.append(client / raw)
            print(f"round {r + 1}: once() {client * 1e3:.2f} ms, raw claim+complete {raw * 1e3:.2f} ms: {client / raw:.2f}x")
        ratios.sort()
        print(f"median ratio over {rounds} rounds: {ratios[len(ratios) // 2]:.2f}x")
    finally:
        gw.close()


if __name__ == "__main__":
    main()
