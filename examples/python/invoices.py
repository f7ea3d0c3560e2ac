"""The founding story in Python: a Stripe invoice.paid webhook reaches a web
app through oncehook, the app hands the work to a Celery-like queue, and a
worker summarizes the invoice with a model API that bills per token. A
provider's resend, a task the queue hands to two workers at once, or a worker
killed midway must never pay for the same summary twice.

oncehook answers the resends (the same Stripe event id is one event); the
effects ledger answers the rest: the worker's task is decorated with
``@ledger.once("llm-summary:{event_id}")``, so whichever worker claims the
key first calls the model, the other waits and gets the stored summary, and
the model is called with the same key as its Idempotency-Key.

Two roles, each its own process (as Django and Celery would be), both with
the gateway's API in ``ONCEHOOK_API`` and a token in ``ONCEHOOK_API_TOKEN``::

    pip install ./clients/python   # or PYTHONPATH=clients/python/src
    # the web app, a destination of the gateway (secret: whsec_... in its config)
    WEBHOOK_SECRET=whsec_... QUEUE_DIR=./queue LISTEN=127.0.0.1:9000 python3 invoices.py web
    # the workers (run two)
    MODEL_URL=http://127.0.0.1:9200 QUEUE_DIR=./queue python3 invoices.py worker

The queue is a folder of task files, delivered at least once, as Celery's
``acks_late`` delivers: every worker that sees a task runs it, and a task is
removed only once it ran. Only ``oncehook`` (clients/python) is imported
beyond the standard library.
"""

import http.server
import json
import os
import sys
import time
import urllib.request
import uuid

from oncehook import Ledger, SignatureError, verify_delivery

QUEUE = os.environ.get("QUEUE_DIR", "./queue")


# -- the web app: a Django view's work, on the standard library ------------------------------------

class Webhook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            # Over the raw bytes, before anything in the body is trusted.
            delivery = verify_delivery(raw, dict(self.headers.items()), os.environ["WEBHOOK_SECRET"])
        except SignatureError as e:
            self.send_error(401, e.code)
            return
        event = json.loads(raw)
        if event.get("type") != "invoice.paid":
            self.send_response(204)
            self.end_headers()
            return
        invoice = event["data"]["object"]
        enqueue({"event_id": event["id"], "customer": invoice["customer"], "amount": invoice["amount_paid"],
                 "delivery": delivery.idempotency_key})
        self.send_response(202)  # handed to the queue: oncehook's delivery is done
        self.end_headers()

    def log_message(self, *args):
        pass


def enqueue(task):
    """summarize.delay(...): a task file, written whole before it appears."""
    os.makedirs(QUEUE, exist_ok=True)
    name = f"{task['event_id']}-{uuid.uuid4().hex}"
    tmp = os.path.join(QUEUE, "." + name)
    with open(tmp, "w") as f:
        json.dump(task, f)
    os.rename(tmp, os.path.join(QUEUE, name + ".json"))


def web():
    host, port = os.environ.get("LISTEN", "127.0.0.1:9000").rsplit(":", 1)
    srv = http.server.ThreadingHTTPServer((host, int(port)), Webhook)
    print(f"web: listening on http://{srv.server_address[0]}:{srv.server_address[1]}", flush=True)
    srv.serve_forever()


# -- the worker: the task, once per invoice -------------------------------------------------------

ledger = Ledger(lease=10, wait=60)  # $ONCEHOOK_API, $ONCEHOOK_API_TOKEN


@ledger.once("llm-summary:{event_id}")
def summarize(event_id, customer, amount):
    """Runs at most once per event id, whichever worker gets there first; a
    second caller waits for it and gets the stored summary."""
    prompt = f"invoice {event_id} paid by {customer}: {amount}"
    req = urllib.request.Request(os.environ["MODEL_URL"] + "/v1/complete", json.dumps({"prompt": prompt}).encode(),
                                 {"Content-Type": "application/json",
                                  "Idempotency-Key": f"llm-summary:{event_id}"})  # a repeat is answered, not billed
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def worker():
    me = os.getpid()
    print(f"worker {me}: ready", flush=True)
    while True:
        try:
            names = sorted(n for n in os.listdir(QUEUE) if n.endswith(".json"))
        except FileNotFoundError:
            names = []
        for name in names:
            path = os.path.join(QUEUE, name)
            try:
                with open(path) as f:
                    task = json.load(f)
            except FileNotFoundError:
                continue  # another worker finished it
            summary = summarize(task["event_id"], task["customer"], task["amount"])
            print(json.dumps({"worker": me, "event_id": task["event_id"], "summary": summary}), flush=True)
            try:
                os.remove(path)  # acked late: only once it ran
            except FileNotFoundError:
                pass
        time.sleep(0.05)


if __name__ == "__main__":
    {"web": web, "worker": worker}[sys.argv[1]]()
