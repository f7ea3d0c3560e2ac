"""A real SMTP server for the email channel's tests: Debian's aiosmtpd,
with STARTTLS required before anything and AUTH PLAIN/LOGIN required
(over TLS) when --user is given. Each message it accepts is written to
--out as one JSON file; each AUTH tried, as a line of --out/auth.log.

  python3 smtpd.py --port P --out DIR [--cert C --key K] [--user U --password W]
"""
import argparse, json, os, signal, ssl, sys, threading, time, warnings

warnings.simplefilter("ignore")

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, required=True)
p.add_argument("--out", required=True)
p.add_argument("--cert")
p.add_argument("--key")
p.add_argument("--user")
p.add_argument("--password")
a = p.parse_args()

count = 0
lock = threading.Lock()


class Handler:
    async def handle_DATA(self, server, session, envelope):
        global count
        with lock:
            count += 1
            n = count
        rec = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "data": envelope.content.decode("utf-8", "replace"),
            "tls": session.ssl is not None,
            "authenticated": bool(session.authenticated),
            "login": (session.auth_data.login.decode() if getattr(session.auth_data, "login", None) else None),
        }
        tmp = os.path.join(a.out, "%d.tmp" % n)
        with open(tmp, "w") as f:
            json.dump(rec, f)
        os.rename(tmp, os.path.join(a.out, "%d.json" % n))
        return "250 OK"


def authenticator(server, session, envelope, mechanism, auth_data):
    ok = auth_data.login.decode() == a.user and auth_data.password.decode() == a.password
    with open(os.path.join(a.out, "auth.log"), "a") as f:
        f.write("%s %s tls=%s ok=%s\n" % (mechanism, auth_data.login.decode(), session.ssl is not None, ok))
    return AuthResult(success=ok, handled=False, auth_data=auth_data)


kw = {}
if a.cert:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(a.cert, a.key)
    kw.update(tls_context=ctx, require_starttls=True)
if a.user:
    kw.update(auth_required=True, auth_require_tls=bool(a.cert), authenticator=authenticator)

c = Controller(Handler(), hostname="127.0.0.1", port=a.port, **kw)
c.start()
print("ready", flush=True)
signal.signal(signal.SIGTERM, lambda *_: (c.stop(), sys.exit(0)))
while True:
    time.sleep(3600)
