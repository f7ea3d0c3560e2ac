"""Taking a pull destination's deliveries: POST /v1/destinations/{name}/pull,
then POST /v1/deliveries/{id}/ack with each one's outcome. For a service with
no inbound port: the gateway keeps the deliveries until a consumer takes them,
and hands one out again (next attempt, same Idempotency-Key) when its lease
ends unacked."""

from __future__ import annotations

import base64
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Union

from . import _api, errors
from .verify import Delivery, verify_delivery

log = logging.getLogger("oncehook.pull")

Seconds = Union[float, int, Any]  # a number of seconds, or a timedelta


class Headers(Mapping[str, str]):
    """A pulled delivery's headers: names in any case; ``headers[name]`` is
    the first value, ``get_all(name)`` every one."""

    def __init__(self, raw: Mapping[str, List[str]]) -> None:
        self._raw = {str(k): [str(v) for v in (vs if isinstance(vs, list) else [vs])] for k, vs in raw.items()}
        self._lower = {k.lower(): vs for k, vs in self._raw.items()}

    def __getitem__(self, name: str) -> str:
        vs = self._lower[name.lower()]
        return vs[0] if vs else ""

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._lower

    def get_all(self, name: str) -> List[str]:
        return list(self._lower.get(name.lower(), []))

    def pairs(self) -> List[tuple]:
        """Every (name, value) pair, as an HTTP request would carry them."""
        return [(k, v) for k, vs in self._raw.items() for v in vs]

    def __repr__(self) -> str:
        return f"Headers({self._raw!r})"


@dataclass(frozen=True)
class PulledDelivery:
    """One delivery a pull leased to this consumer: what a push delivery
    carries (``headers``, ``body`` byte for byte), and the lease to ack it
    under (``token``, until ``lease_expires_at``). ``attempt`` counts the
    destination's attempts (1 on the first); ``idempotency_key`` is the same
    on every attempt: dedupe on it. ``path`` and ``query`` (encoded,
    ``a=1&b=2``) are set when the destination's transformation set the
    request's: they replace your URL's, as they would an HTTP destination's;
    empty otherwise."""

    id: str
    source: str
    key: str
    type: Optional[str]
    attempt: int
    token: str
    lease_expires_at: Optional[datetime]
    received_at: Optional[datetime]
    headers: Headers
    body: bytes = field(repr=False)
    path: str = ""
    query: str = ""

    @property
    def idempotency_key(self) -> str:
        return self.headers.get("Idempotency-Key") or f"{self.source}:{self.key}"

    def verify(self, secret: Any, **kw: Any) -> Delivery:
        """Check the destination's signature over the body (as
        :func:`verify_delivery` does for a push), and read the headers."""
        return verify_delivery(self.body, self.headers.pairs(), secret, **kw)

    @classmethod
    def _from_wire(cls, d: Mapping[str, Any]) -> "PulledDelivery":
        return cls(id=str(d.get("id", "")), source=str(d.get("source", "")), key=str(d.get("key", "")),
                   type=d.get("type") or None, attempt=int(d.get("attempt") or 0), token=str(d.get("token", "")),
                   lease_expires_at=_api.parse_time(d.get("lease_expires_at")),
                   received_at=_api.parse_time(d.get("received_at")),
                   headers=Headers(d.get("headers") or {}), body=base64.b64decode(d.get("body") or ""),
                   path=str(d.get("path") or ""), query=str(d.get("query") or ""))


@dataclass(frozen=True)
class Outcome:
    """What the consumer says of one delivery, classified by the gateway as an
    HTTP destination's answer is: a 2xx ``status`` is delivered; 400, 401,
    403, 404, 410, 422 or a 3xx is permanent (a dead letter); anything else,
    or an ``error`` without a status, is retried with the destination's
    backoff (``retry_after`` seconds honoured with a 429 or a 503). Build one
    with :meth:`delivered`, :meth:`retry` or :meth:`permanent`."""

    status: int = 0
    error: str = ""
    retry_after: Optional[float] = None
    latency: Optional[float] = None
    response: str = ""

    @classmethod
    def delivered(cls, status: int = 200, *, latency: Optional[Seconds] = None, response: str = "") -> "Outcome":
        return cls(status=status, latency=_opt_seconds(latency), response=response)

    @classmethod
    def retry(cls, error: str = "", *, after: Optional[Seconds] = None, status: int = 0,
              latency: Optional[Seconds] = None, response: str = "") -> "Outcome":
        """Retried: with ``after`` (seconds), not before then (sent as a 503
        with Retry-After unless ``status`` says 429)."""
        if after is not None and status == 0:
            status = 503
        if status == 0 and not error:
            error = "retry"
        return cls(status=status, error=error, retry_after=_opt_seconds(after), latency=_opt_seconds(latency),
                   response=response)

    @classmethod
    def permanent(cls, error: str = "", *, status: int = 422, latency: Optional[Seconds] = None,
                  response: str = "") -> "Outcome":
        """Never retried: a dead letter (``status`` 422 unless given)."""
        return cls(status=status, error=error, latency=_opt_seconds(latency), response=response)

    def _wire(self, token: str) -> Dict[str, Any]:
        b: Dict[str, Any] = {"token": token}
        if self.status:
            b["status"] = self.status
        if self.error:
            b["error"] = self.error[:4096]
        if self.retry_after is not None:
            b["retry_after"] = _duration(self.retry_after)
        if self.latency is not None:
            b["latency"] = _duration(self.latency)
        if self.response:
            b["response"] = self.response[:512]
        return b


class Consumer:
    """Takes a pull destination's deliveries (``pull: {}``) and acks them.

    ``url`` defaults to ``$ONCEHOOK_API`` (else ``http://127.0.0.1:8081``),
    ``token`` to ``$ONCEHOOK_API_TOKEN`` (a consumer's token, ``pull: [names]``,
    or one that may change anything); ``name`` says which consumer this is
    (the attempts record it after the token's name); ``timeout`` bounds each
    call beyond a pull's ``wait``.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *, name: str = "",
                 timeout: float = _api.DEFAULT_TIMEOUT) -> None:
        self._api = _api.Api(url, token, timeout)
        self.name = name

    def __repr__(self) -> str:
        return f"Consumer({self._api.url!r})"

    def pull(self, destination: str, max: int = 16, lease: Seconds = 30.0, wait: Seconds = 20.0) -> List[PulledDelivery]:
        """Lease up to ``max`` of ``destination``'s due deliveries for ``lease``
        seconds each, waiting up to ``wait`` seconds for the first (a long
        poll): an empty list when none came."""
        if not destination or "/" in destination:
            raise errors.InvalidError(f"{destination!r} is not a destination's name", field="destination")
        body: Dict[str, Any] = {"max": int(max), "lease": _duration(_api.seconds(lease)),
                                "wait": _duration(_api.seconds(wait))}
        if self.name:
            body["consumer"] = self.name
        a = self._api.request("POST", f"/v1/destinations/{_api.path_escape(destination)}/pull", _api.encode(body),
                              wait=_api.seconds(wait))
        if a.status != 200:
            raise _api.error_for(a, f"pull from {destination!r}")
        return [PulledDelivery._from_wire(d) for d in a.json().get("deliveries") or [] if isinstance(d, dict)]

    def ack(self, delivery: PulledDelivery, outcome: Optional[Outcome] = None) -> str:
        """End ``delivery``'s lease with ``outcome`` (delivered when none) and
        return how the gateway classified it: ``delivered``, ``retry`` or
        ``permanent``. A lease that ended before (expired: the delivery is
        handed out again) raises ConflictError (``lease_unknown``) or
        StaleTokenError."""
        outcome = outcome or Outcome.delivered()
        a = self._api.request("POST", f"/v1/deliveries/{_api.path_escape(delivery.id)}/ack",
                              _api.encode(outcome._wire(delivery.token)))
        if a.status != 200:
            raise _api.error_for(a, f"ack of {delivery.id}")
        return str(a.json().get("outcome", ""))

    def consume(self, destination: str, handler: Callable[[PulledDelivery], Any], *, max: int = 16,
                lease: Seconds = 30.0, wait: Seconds = 20.0, stop: Optional[threading.Event] = None) -> None:
        """Pull ``destination`` in a loop and run ``handler`` on each delivery,
        then ack it with its outcome: what the handler returns (an
        :class:`Outcome`, or an int status; ``None`` is delivered), a retry
        when it raises, permanent when it raises :class:`Permanent`. Returns
        once ``stop`` is set (checked between pulls: within ``wait``). An
        unreachable gateway is tried again with backoff; an error answer
        (403: the token may not pull it, 404: no such pull destination)
        raises."""
        backoff = 0.5
        while stop is None or not stop.is_set():
            try:
                batch = self.pull(destination, max=max, lease=lease, wait=wait)
            except errors.UnreachableError as e:
                log.warning("oncehook: pull from %s: %s; again in %.1fs", destination, e, backoff)
                if stop is None:
                    time.sleep(backoff)
                elif stop.wait(backoff):
                    return
                backoff = min(backoff * 2, 30.0)
                continue
            backoff = 0.5
            for d in batch:
                self._handle(d, handler)

    def _handle(self, d: PulledDelivery, handler: Callable[[PulledDelivery], Any]) -> None:
        start = time.monotonic()
        try:
            got = handler(d)
            if isinstance(got, Outcome):
                out = got
            elif isinstance(got, int) and not isinstance(got, bool):
                out = Outcome(status=got)
            else:
                out = Outcome.delivered()
        except errors.Permanent as e:
            out = Outcome.permanent(f"{type(e).__name__}: {e}")
        except Exception as e:  # the handler failed: retried, same key
            out = Outcome.retry(f"{type(e).__name__}: {e}")
        if out.latency is None:
            out = Outcome(out.status, out.error, out.retry_after, time.monotonic() - start, out.response)
        try:
            self.ack(d, out)
        except (errors.ConflictError, errors.StaleTokenError) as e:
            # The lease ended first: the delivery comes again, same key.
            log.warning("oncehook: ack of %s (%s): %s", d.id, d.idempotency_key, e)
        except errors.UnreachableError as e:
            log.warning("oncehook: ack of %s (%s): %s; it comes again when its lease ends", d.id,
                        d.idempotency_key, e)


def _opt_seconds(d: Optional[Seconds]) -> Optional[float]:
    return None if d is None else _api.seconds(d)


def _duration(seconds: float) -> str:
    """Seconds as the API's duration: whole milliseconds."""
    return f"{max(int(round(seconds * 1000)), 0)}ms"
