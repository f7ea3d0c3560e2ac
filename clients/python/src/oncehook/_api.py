"""What every call shares: where the API is, its token, one HTTP request with a
timeout, and the API's one error shape turned into this package's errors."""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, Mapping, Optional
from urllib.parse import quote, urlsplit

from . import errors

API_ENV = "ONCEHOOK_API"
TOKEN_ENV = "ONCEHOOK_API_TOKEN"
DEFAULT_API = "http://127.0.0.1:8081"  # api.listen's default
DEFAULT_TIMEOUT = 10.0
# A result may be 16 MiB (effects.max_result's bound), and an answer holds it and more.
MAX_ANSWER = 32 << 20


def user_agent() -> str:
    from . import __version__

    return f"oncehook-python/{__version__}"


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Dict[str, Any]:
        try:
            v = json.loads(self.body.decode("utf-8", "surrogateescape") or "{}")
        except ValueError:
            return {}
        return v if isinstance(v, dict) else {}


class Api:
    """A gateway's API listener, reached with a bearer token."""

    def __init__(self, url: Optional[str], token: Optional[str], timeout: float) -> None:
        url = url or os.environ.get(API_ENV) or DEFAULT_API
        token = token or os.environ.get(TOKEN_ENV)
        if not token:
            raise errors.InvalidError(
                f"no API token: pass token=, or set ${TOKEN_ENV} (a token from the gateway's api.tokens)",
                field="token")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise errors.InvalidError(f"{url!r} is not an http(s) URL such as {DEFAULT_API}", field="url")
        if timeout is None or timeout <= 0:
            raise errors.InvalidError("want a timeout of more than 0 seconds", field="timeout")
        self.url = url.rstrip("/")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._token = token
        self.timeout = float(timeout)

    def __repr__(self) -> str:  # never the token
        return f"Api({self.url!r})"

    def request(self, method: str, path: str, body: Optional[bytes] = None,
                headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
                wait: float = 0.0) -> Answer:
        """Send one request and return its answer, whatever its status; raise
        UnreachableError when no answer came within the timeout (and ``wait``
        more seconds, for a long poll that holds its answer that long)."""
        t = (self.timeout if timeout is None else max(min(timeout, self.timeout), 0.05)) + max(wait, 0.0)
        if self._scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self._host, self._port, timeout=t, context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=t)
        h = {"Authorization": f"Bearer {self._token}", "User-Agent": user_agent(), "Accept": "application/json"}
        if body is not None:
            h["Content-Type"] = "application/json"
        if headers:
            for name, value in headers.items():
                # http.client refuses a line break or a control byte with a
                # bare ValueError: said here as the client's own error.
                if any(c in str(name) + str(value) for c in "\r\n\0"):
                    raise errors.InvalidError(
                        f"header {name!r}: a line break or NUL cannot be sent in a header", field="headers")
            h.update(headers)
        try:
            conn.request(method, self._prefix + path, body=body, headers=h)
            resp = conn.getresponse()
            # In pieces: read(n) allocates n bytes up front on Python 3.9.
            chunks, size = [], 0
            while True:
                chunk = resp.read(64 << 10)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_ANSWER:
                    raise errors.UnreachableError(f"{method} {path}: the answer is over {MAX_ANSWER} bytes, "
                                                  "more than this client reads")
                chunks.append(chunk)
            return Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, b"".join(chunks))
        except (OSError, http.client.HTTPException, socket.timeout) as e:
            raise errors.UnreachableError(f"{method} {self.url}{path}: {e or type(e).__name__}") from e
        finally:
            conn.close()


def path_escape(segment: str) -> str:
    """A key as one path segment, as the Go client escapes it: "." and ".."
    escaped too, or a server would clean them away."""
    if segment in (".", ".."):
        return segment.replace(".", "%2E")
    return quote(segment, safe="")


def seconds(d: float) -> float:
    return float(d.total_seconds()) if hasattr(d, "total_seconds") else float(d)


def parse_time(s: Any) -> Optional[datetime]:
    """An RFC 3339 time as the gateway writes it (nanoseconds and Z included)."""
    if not isinstance(s, str) or not s:
        return None
    s = s.strip()
    if s.endswith("Z") or s.endswith("z"):
        s = s[:-1] + "+00:00"
    # Python 3.9's fromisoformat takes at most 6 fraction digits.
    if "." in s:
        head, _, rest = s.partition(".")
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        s = head + "." + (rest[:i] + "000000")[:6] + rest[i:]
    try:
        t = datetime.fromisoformat(s)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def error_for(a: Answer, what: str) -> errors.OncehookError:
    """The error an answer that is not a success stands for."""
    body = a.json()
    reason = str(body.get("reason") or "")
    message = str(body.get("error") or f"{what}: the API answered {a.status}")
    field = body.get("field") or None
    kw: Dict[str, Any] = {"status": a.status, "field": field}
    if a.status == 400:
        return errors.InvalidError(message, code=reason or "invalid", **kw)
    if a.status == 409:
        if reason == "busy":
            return errors.BusyError(message, retry_after=parse_time(body.get("retry_after")), **kw)
        if reason == "failed":
            return errors.FailedError(f"failed for good: {message}", reason=message, **kw)
        if reason == "stale_token":
            return errors.StaleTokenError(message, **kw)
        return errors.ConflictError(message, code=reason or "conflict", **kw)
    if a.status == 422 and reason == "fingerprint_mismatch":
        return errors.FingerprintError(message, **kw)
    if a.status == 410:
        return errors.ExpiredError(message, code=reason or "expired", **kw)
    if a.status == 404:
        return errors.NotFoundError(message, code=reason or "not_found", **kw)
    return errors.ApiError(message, code=reason or f"http_{a.status}", **kw)


def raw_member(body: bytes, name: str) -> Optional[bytes]:
    """The bytes of a top-level member's value in a JSON object, exactly as they
    stand: a stored result comes back byte for byte, which decoding and
    encoding it again would not keep (spacing, key order, number spelling)."""
    text = body.decode("utf-8", "surrogateescape")
    dec = json.JSONDecoder()
    i = _skip(text, 0)
    if i >= len(text) or text[i] != "{":
        return None
    i = _skip(text, i + 1)
    while i < len(text) and text[i] != "}":
        key, i = dec.raw_decode(text, i)
        i = _skip(text, i)
        if i >= len(text) or text[i] != ":":
            return None
        start = _skip(text, i + 1)
        _, end = dec.raw_decode(text, start)
        if key == name:
            return text[start:end].encode("utf-8", "surrogateescape")
        i = _skip(text, end)
        if i < len(text) and text[i] == ",":
            i = _skip(text, i + 1)
    return None


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def decode_json(raw: bytes) -> Any:
    return json.loads(raw.decode("utf-8", "surrogateescape"))


def encode(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode("utf-8")
