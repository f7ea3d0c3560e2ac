"""Publishing to an outbox source over HTTP: POST /v1/publish/{source}."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

from . import _api, errors

_TOKEN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~:/")


@dataclass(frozen=True)
class Published:
    """The gateway's answer to a publish, given once the event was durable:
    ``status`` is ``accepted`` (new: it will be delivered), ``duplicate``
    (published before: nothing written, no second delivery) or, for a
    publish marked ``reconcile=True``, ``republished`` (published before,
    and counted as a reconciliation pass's, not as a duplicate). ``key`` is the
    key as the gateway keeps it and deliveries carry it (a space or a byte
    that a header cannot hold percent-encoded)."""

    status: str
    key: str
    events: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def duplicate(self) -> bool:
        """Published before: nothing written, no second delivery (true for
        ``republished`` too)."""
        return self.status in ("duplicate", "republished")

    @property
    def republished(self) -> bool:
        """A ``reconcile=True`` publish of a key published before."""
        return self.status == "republished"


class Outbox:
    """Publishes events to a gateway's outbox sources (``outbox: true``).

    ``url`` defaults to ``$ONCEHOOK_API`` (else ``http://127.0.0.1:8081``),
    ``token`` to ``$ONCEHOOK_API_TOKEN`` (a token that may publish to the
    source); ``timeout`` bounds each call.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *,
                 timeout: float = _api.DEFAULT_TIMEOUT) -> None:
        self._api = _api.Api(url, token, timeout)

    def __repr__(self) -> str:
        return f"Outbox({self._api.url!r})"

    def publish(self, source: str, key: Optional[str], body: Any, *, content_type: Optional[str] = None,
                headers: Optional[Mapping[str, str]] = None, reconcile: bool = False,
                timeout: Optional[float] = None) -> Published:
        """Publish ``body`` to ``source`` under ``key`` (the Idempotency-Key
        header; ``None`` leaves the key to the source's ``key:`` rules).

        ``body`` as bytes or str is sent as it is (``content_type`` defaults to
        ``application/json``); any other value is encoded as JSON. ``headers``
        are sent too (a source's ``type:`` rules may read one). Publishing
        again with the same key is safe: it answers ``duplicate``. So after an
        UnreachableError or a 503, publish again.

        ``reconcile=True`` marks a reconciliation pass (``?reconcile=true``):
        a key published before answers ``republished`` and is counted so, apart
        from the duplicates whose rate reveals a provider's trouble, and it never
        raises the duplicate-rate alert; a key never published is accepted and
        delivered as any other.
        """
        if isinstance(body, (bytes, bytearray, memoryview)):
            data = bytes(body)
        elif isinstance(body, str):
            data = body.encode("utf-8")
        else:
            data = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
        h: Dict[str, str] = dict(headers or {})
        h["Content-Type"] = content_type or "application/json"
        if key is not None:
            h["Idempotency-Key"] = format_key(key)
        if not source or "/" in source:
            raise errors.InvalidError(f"{source!r} is not a source's name", field="source")
        path = f"/v1/publish/{_api.path_escape(source)}"
        if reconcile:
            path += "?reconcile=true"
        a = self._api.request("POST", path, data, headers=h, timeout=timeout)
        if a.status not in (200, 202):
            raise _api.error_for(a, f"publish to {source!r}")
        b = a.json()
        events = [e for e in b.get("events", []) if isinstance(e, dict)]
        got = str(events[0].get("key", "")) if events else (key or "")
        return Published(status=str(b.get("status", "accepted" if a.status == 202 else "duplicate")), key=got,
                         events=events)


def format_key(key: str) -> str:
    """An Idempotency-Key as the gateway reads it: bare when made of token
    characters (``ord_1042``, a UUID), else an RFC 8941 string (``"a b"``),
    which the gateway reads as the same key."""
    if not isinstance(key, str) or not 1 <= len(key) <= 255:
        raise errors.InvalidError("an Idempotency-Key has 1 to 255 characters", field="Idempotency-Key")
    if all(c in _TOKEN_CHARS for c in key):
        return key
    if any(not (0x20 <= ord(c) <= 0x7E) for c in key):
        raise errors.InvalidError("an Idempotency-Key is printable ASCII only", field="Idempotency-Key")
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
