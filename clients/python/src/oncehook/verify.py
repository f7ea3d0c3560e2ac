"""Checking a delivery from oncehook: its Standard Webhooks signature, over the
raw bytes of the body, and what its headers say about it."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from . import errors

DEFAULT_TOLERANCE = 300.0
"""Seconds a signature's timestamp may be off from now, both ways (the spec's 5 minutes)."""

_BODY_HINT = ("pass the body's raw bytes (Django: request.body; Flask: request.get_data(); "
              "FastAPI: await request.body()): a decoded body need not be the bytes that were signed")


@dataclass(frozen=True)
class Delivery:
    """What a delivery's headers say.

    ``idempotency_key`` is the Idempotency-Key header (``"stripe:evt_1"``),
    the same on every attempt and replay of the event: dedupe on it, or use it
    as an effect's key. ``key`` is the event's key within its ``source``
    (``"evt_1"``). ``type`` is the event's type (URL-escaped by the gateway when
    it holds characters a header cannot); ``attempt`` counts this
    destination's attempts (1 on the first); ``delivery_id`` is this
    destination's delivery (one per destination of an event); ``id`` and
    ``timestamp`` are the signature's webhook-id and webhook-timestamp.
    ``stale`` marks an event older than what the destination already has for
    its entity, delivered because the source asks for stale ones, with
    ``current_version`` the version it has.
    """

    idempotency_key: str
    source: str
    key: str
    type: Optional[str]
    attempt: Optional[int]
    delivery_id: Optional[str]
    id: Optional[str]
    timestamp: Optional[datetime]
    stale: bool = False
    current_version: Optional[str] = None


def read_delivery(headers: Any) -> Delivery:
    """Read a delivery's headers without checking a signature (for a
    destination configured without ``secret:``). ``headers`` is any mapping or
    list of pairs: Django's ``request.headers``, Flask's and Starlette's, a
    dict; names in any case."""
    h = _Headers(headers)
    ikey = h.get("idempotency-key") or ""
    source = h.get("x-oncehook-source") or ""
    key = ikey[len(source) + 1:] if source and ikey.startswith(source + ":") else ikey
    attempt = h.get("x-oncehook-attempt")
    ts = h.get("webhook-timestamp")
    return Delivery(
        idempotency_key=ikey, source=source, key=key, type=h.get("x-oncehook-type"),
        attempt=int(attempt) if attempt and attempt.isdigit() else None,
        delivery_id=h.get("x-oncehook-delivery-id"), id=h.get("webhook-id"),
        timestamp=datetime.fromtimestamp(int(ts), timezone.utc) if ts and ts.isdigit() else None,
        stale=(h.get("x-oncehook-stale") or "").lower() == "true", current_version=h.get("x-oncehook-current-version"))


def verify_delivery(body: Union[bytes, bytearray, memoryview], headers: Any,
                    secret: Union[str, Sequence[str]], *, tolerance: float = DEFAULT_TOLERANCE,
                    now: Optional[float] = None) -> Delivery:
    """Check that oncehook signed this delivery with ``secret`` (the
    destination's ``whsec_...``; a list of them while rotating), over
    ``body``'s raw bytes, whatever their encoding, within ``tolerance``
    seconds; then read it (:func:`read_delivery`). Raises SignatureError,
    whose ``code`` says why, when it does not hold."""
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise TypeError(f"verify_delivery: the body is a {type(body).__name__}; {_BODY_HINT}")
    keys = [_secret_key(s) for s in ([secret] if isinstance(secret, str) else list(secret))]
    if not keys:
        raise errors.InvalidError("no secret given", field="secret")
    h = _Headers(headers)
    msg_id, ts, sigs = h.get("webhook-id"), h.get("webhook-timestamp"), h.get_all("webhook-signature")
    for name, v in (("webhook-id", msg_id), ("webhook-timestamp", ts)):
        if not v:
            raise errors.SignatureError(f"no {name} header: not a signed delivery", code="missing_header")
    if not sigs:
        raise errors.SignatureError("no webhook-signature header: not a signed delivery", code="missing_header")
    assert msg_id is not None and ts is not None
    if not ts.isdigit():
        raise errors.SignatureError(f"webhook-timestamp {ts!r} is not Unix seconds", code="bad_timestamp")
    signed = msg_id.encode("utf-8") + b"." + ts.encode("ascii") + b"." + bytes(body)
    given: List[bytes] = []
    for entry in " ".join(sigs).split():
        version, _, b64 = entry.partition(",")
        if version != "v1":
            continue
        try:
            given.append(base64.b64decode(b64, validate=True))
        except (binascii.Error, ValueError):
            continue
    if not any(hmac.compare_digest(hmac.new(k, signed, hashlib.sha256).digest(), g) for k in keys for g in given):
        raise errors.SignatureError("the signature does not match the body (altered, or another secret)",
                                    code="no_match")
    age = (time.time() if now is None else now) - int(ts)
    if abs(age) > tolerance:
        raise errors.SignatureError(
            f"the signature was made {abs(age):.0f}s {'ago' if age > 0 else 'ahead'}, over the {tolerance:g}s tolerance",
            code="timestamp_out_of_tolerance")
    return read_delivery(headers)


def _secret_key(secret: str) -> bytes:
    raw = secret[len("whsec_"):] if secret.startswith("whsec_") else secret
    try:
        key = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise errors.InvalidError("the secret is not whsec_<base64>", field="secret") from None
    if not key:
        raise errors.InvalidError("the secret is empty after whsec_: anybody could sign with it", field="secret")
    return key


class _Headers:
    """Headers from any mapping or list of pairs, names in any case, values
    str or bytes (ASGI's raw pairs)."""

    def __init__(self, headers: Any) -> None:
        pairs: Iterable[Any]
        if hasattr(headers, "items"):
            pairs = headers.items()
        else:
            pairs = headers
        self._v: Dict[str, List[str]] = {}
        for name, value in pairs:
            if isinstance(name, bytes):
                name = name.decode("latin-1")
            values = value if isinstance(value, (list, tuple)) else [value]
            for v in values:
                if isinstance(v, bytes):
                    v = v.decode("latin-1")
                self._v.setdefault(str(name).lower(), []).append(str(v))

    def get(self, name: str) -> Optional[str]:
        vs = self._v.get(name)
        return vs[0].strip() if vs else None

    def get_all(self, name: str) -> List[str]:
        return self._v.get(name, [])
