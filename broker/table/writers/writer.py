"""Orders and their outbox rows from Python, through psycopg2 on PostgreSQL.

Each order is one transaction: the order's row in the application's own
`orders` table and its event in `outbox` (the table `oncehook outbox ddl`
prints), committed together or not at all. The order id is the outbox row's
id, so the event's key (orders:<id>) is the order's: an order written twice
is one event to oncehook.

    WRITER_DSN=postgresql://... WRITER_PREFIX=py WRITER_N=1000 python3 writer.py

Every fifth order (i % 5 == 0) is rolled back after its inserts; every tenth
(i % 10 == 1) is committed, then retried whole in a new transaction, as an
application does when the commit's answer was lost. A database that goes
away is reconnected to and the order retried whole, so both inserts are
idempotent (ON CONFLICT DO NOTHING). Prints "committed <id>" or
"rolledback <id>" per order, then "done".
"""

import os
import sys
import time

import psycopg2

dsn = os.environ["WRITER_DSN"]
prefix = os.environ.get("WRITER_PREFIX", "py")
n = int(os.environ.get("WRITER_N", "1000"))
delay = float(os.environ.get("WRITER_DELAY_MS", "0")) / 1000


def write(conn, order_id, amount, commit):
    """One order and its event in one transaction."""
    payload = ('{"order":"%s","amount":%d,"lang":"python"}' % (order_id, amount)).encode()
    with conn.cursor() as cur:
        cur.execute("INSERT INTO orders (id, amount) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
                    (order_id, amount))
        cur.execute("INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                    "VALUES (%s, 'order', %s, 'order.created', %s) ON CONFLICT (id) DO NOTHING",
                    (order_id, order_id, psycopg2.Binary(payload)))
    if commit:
        conn.commit()
    else:
        conn.rollback()


def main():
    conn = None
    for i in range(n):
        order_id = "%s-%05d" % (prefix, i)
        commit = i % 5 != 0
        times = 2 if i % 10 == 1 else 1  # the second: the commit's answer was "lost"
        done = 0
        deadline = time.monotonic() + 60
        while done < times:
            try:
                if conn is None or conn.closed:
                    conn = psycopg2.connect(dsn, connect_timeout=5)
                write(conn, order_id, 100 + i, commit)
                done += 1
            except psycopg2.Error as e:  # the database went away: reconnect, retry the order whole
                if time.monotonic() > deadline:
                    raise
                print("writer %s: %s: %s" % (prefix, order_id, str(e).strip()), file=sys.stderr)
                try:
                    conn.close()
                except Exception:
                    pass
                conn = None
                time.sleep(0.2)
        print("%s %s" % ("committed" if commit else "rolledback", order_id), flush=True)
        if delay:
            time.sleep(delay)
    print("done", flush=True)


main()
