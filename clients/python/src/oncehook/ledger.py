"""The effects ledger over HTTP: every side effect once, however many processes
ask for it, with the semantics of the Go package's ``effect.Do``."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, Optional, Tuple, Type, Union

from . import _api, errors

log = logging.getLogger("oncehook")

DEFAULT_LEASE = 30.0
"""Seconds a claim is the caller's, renewed every third of it while the work runs."""
DEFAULT_WAIT = 30.0
"""Seconds ``once`` waits, at most, while another owner holds the key."""
RECORD_FOR = 30.0
"""Seconds, at most, an outcome is tried again while the ledger cannot be reached."""
MAX_REASON = 4096
MAX_KEY = 512

Seconds = Union[float, int, timedelta]
Deadline = Union[datetime, timedelta, None]


class RawJSON:
    """JSON already encoded, completed as it is: the ledger stores these bytes
    and gives them back to every later claim byte for byte."""

    __slots__ = ("data",)

    def __init__(self, data: Union[bytes, str]) -> None:
        self.data = data.encode("utf-8") if isinstance(data, str) else bytes(data)

    def __repr__(self) -> str:
        return f"RawJSON({self.data!r})"


@dataclass(frozen=True)
class Claim:
    """A successful claim: either owned (``token``, ``attempt``, ``reclaimed``,
    ``lease_expires_at``) or ``already_done``, with the stored ``raw_result``."""

    key: str
    token: str = ""
    attempt: int = 0
    reclaimed: bool = False
    lease_expires_at: Optional[datetime] = None
    already_done: bool = False
    raw_result: Optional[bytes] = None

    @property
    def result(self) -> Any:
        """The stored result as Python values (``None`` while not done)."""
        return None if self.raw_result is None else _api.decode_json(self.raw_result)


class Ledger:
    """oncehook's effects ledger on a running gateway's API listener.

    ``url`` defaults to ``$ONCEHOOK_API`` (else ``http://127.0.0.1:8081``),
    ``token`` to ``$ONCEHOOK_API_TOKEN``. ``timeout`` bounds each HTTP call;
    ``lease`` and ``wait`` are the defaults of :meth:`once`. A Ledger holds no
    connection and may be shared by threads.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *,
                 timeout: float = _api.DEFAULT_TIMEOUT, lease: Seconds = DEFAULT_LEASE,
                 wait: Seconds = DEFAULT_WAIT) -> None:
        self._api = _api.Api(url, token, timeout)
        self.lease = _positive(lease, "lease")
        self.wait = _api.seconds(wait)

    def __repr__(self) -> str:
        return f"Ledger({self._api.url!r})"

    @property
    def url(self) -> str:
        return self._api.url

    # -- the one call ----------------------------------------------------------------------------

    def once(self, key: Union[str, Callable[..., str]], *, lease: Optional[Seconds] = None,
             wait: Optional[Seconds] = None, deadline: Deadline = None, fingerprint: Optional[str] = None,
             permanent: Tuple[Type[BaseException], ...] = ()) -> "Once":
        """Run a side effect at most once for ``key``, as a decorator or a
        context manager (sync or async).

        As a decorator, ``key`` is a format string over the function's
        arguments (``"llm-summary:{event_id}"``, ``"{invoice.id}"``) or a
        callable taking the same arguments and returning the key. A function
        with a parameter named ``effect`` is given the :class:`Effect`.

        ``lease`` (seconds, default the Ledger's) is renewed every third of it
        while the work runs; ``wait`` bounds how long a busy key is waited for
        before :class:`~oncehook.BusyError`; ``deadline`` (an aware datetime, or
        a timedelta from now) is when the effect stops being worth doing;
        ``fingerprint`` catches a key too coarse for its requests; an exception
        that is an instance of ``permanent`` (or of :class:`~oncehook.Permanent`)
        fails the key for good instead of releasing it.
        """
        return Once(self, key, _Options(
            lease=self.lease if lease is None else _positive(lease, "lease"),
            wait=self.wait if wait is None else _api.seconds(wait),
            deadline=deadline, fingerprint=fingerprint, permanent=tuple(permanent)))

    # -- the steps, for work that does not fit one call ------------------------------------------

    def claim(self, key: str, *, lease: Optional[Seconds] = None, deadline: Deadline = None,
              fingerprint: Optional[str] = None, timeout: Optional[float] = None) -> Claim:
        """Take ``key``'s lease once, without waiting: a :class:`Claim`, owned or
        already done, or BusyError, FailedError, ExpiredError, FingerprintError,
        InvalidError, UnreachableError."""
        _check_key(key)
        body: Dict[str, Any] = {"lease": _positive(self.lease if lease is None else lease, "lease")}
        if fingerprint:
            body["fingerprint"] = fingerprint
        if deadline is not None:
            body["deadline"] = _rfc3339(_deadline(deadline))
        a = self._api.request("POST", f"/v1/effects/{_api.path_escape(key)}/claim", _api.encode(body),
                              timeout=timeout)
        if a.status == 201:
            b = a.json()
            return Claim(key=key, token=str(b.get("token", "")), attempt=int(b.get("attempt", 0)),
                         reclaimed=bool(b.get("reclaimed", False)),
                         lease_expires_at=_api.parse_time(b.get("lease_expires_at")))
        if a.status == 200:
            raw = _api.raw_member(a.body, "result")
            if raw is None:
                raise errors.ApiError(f"claim {key!r}: a done answer without its result", code="malformed",
                                      status=a.status)
            return Claim(key=key, already_done=True, raw_result=raw)
        err = _api.error_for(a, f"claim {key!r}")
        if isinstance(err, errors.BusyError) and err.retry_after is None:
            after = a.headers.get("retry-after", "")
            if after.isdigit():
                err.retry_after = _now() + timedelta(seconds=int(after))
        raise err

    def complete(self, key: str, token: str, result: Any = None, *, timeout: Optional[float] = None) -> None:
        """Mark ``key`` done with ``result`` (JSON values, or :class:`RawJSON`
        stored as it is). StaleTokenError when the token is not the owner's."""
        raw = _encode_result(result)
        # Built by hand: the result is sent, stored and given back as these bytes.
        body = b'{"token":' + json.dumps(token).encode() + b',"result":' + raw + b"}"
        self._post(key, "complete", body, timeout)

    def release(self, key: str, token: str, reason: str = "", *, timeout: Optional[float] = None) -> None:
        """Give the lease back after a retryable failure: claimable at once, as
        the next attempt."""
        self._post(key, "release", _api.encode({"token": token, "error": _reason(reason)}), timeout)

    def fail(self, key: str, token: str, reason: str = "", *, timeout: Optional[float] = None) -> None:
        """Mark ``key`` failed for good; only an operator's reset reopens it."""
        self._post(key, "fail", _api.encode({"token": token, "error": _reason(reason)}), timeout)

    def renew(self, key: str, token: str, lease: Optional[Seconds] = None, *,
              timeout: Optional[float] = None) -> Optional[datetime]:
        """Extend the lease by ``lease`` seconds from now; returns its new expiry."""
        body = {"token": token, "lease": _positive(self.lease if lease is None else lease, "lease")}
        a = self._call(key, "renew", _api.encode(body), timeout)
        return _api.parse_time(a.json().get("lease_expires_at"))

    def get(self, key: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The key's record, with its attempts (never its token), as the API
        answers it; NotFoundError when there is none."""
        _check_key(key)
        a = self._api.request("GET", f"/v1/effects/{_api.path_escape(key)}", timeout=timeout)
        if a.status != 200:
            raise _api.error_for(a, f"get {key!r}")
        return a.json()

    def _post(self, key: str, op: str, body: bytes, timeout: Optional[float]) -> None:
        self._call(key, op, body, timeout)

    def _call(self, key: str, op: str, body: bytes, timeout: Optional[float]) -> _api.Answer:
        _check_key(key)
        a = self._api.request("POST", f"/v1/effects/{_api.path_escape(key)}/{op}", body, timeout=timeout)
        if a.status != 200:
            raise _api.error_for(a, f"{op} {key!r}")
        return a


@dataclass(frozen=True)
class _Options:
    lease: float
    wait: float
    deadline: Deadline
    fingerprint: Optional[str]
    permanent: Tuple[Type[BaseException], ...]


class Effect:
    """The claim a running effect holds. ``attempt`` counts the claims that
    took the key; ``reclaimed`` says a previous owner stopped halfway (it
    crashed or hung until its lease expired), so check whether the side effect
    already happened (look it up by the same key downstream) before doing it
    again. In the ``with`` form, set ``result`` to what should be stored."""

    def __init__(self, key: str, claim: Claim, lease: float) -> None:
        self.key = key
        self.token = claim.token
        self.attempt = claim.attempt
        self.reclaimed = claim.reclaimed
        self.lease = lease
        self.lease_expires_at = claim.lease_expires_at
        self.result: Any = None
        self._lost: Optional[errors.LeaseLostError] = None

    def __repr__(self) -> str:
        return f"Effect(key={self.key!r}, attempt={self.attempt}, reclaimed={self.reclaimed}, lost={self.lost})"

    @property
    def lost(self) -> bool:
        """True once the lease could not be kept: stop acting as the owner."""
        return self._lost is not None

    def check(self) -> None:
        """Raise LeaseLostError if the lease was lost: call it before each
        step of long work that acts on the outside world."""
        if self._lost is not None:
            raise self._lost


class _Run:
    """One call of ``once``: claim (waiting while busy), renew while the work
    runs, then record its outcome."""

    def __init__(self, ledger: Ledger, key: str, opts: _Options) -> None:
        self.ledger = ledger
        self.key = key
        self.opts = opts
        self.effect: Optional[Effect] = None
        self._stop = threading.Event()
        self._renewer: Optional[threading.Thread] = None
        self._until = 0.0  # the lease's end by the local monotonic clock, as last known

    def start(self) -> Claim:
        """Claim the key, waiting as Retry-After says (checking sooner, since an
        owner that completes early frees it) until ``wait`` runs out. An owned
        claim starts the renewer."""
        give_up = time.monotonic() + max(self.opts.wait, 0.0)
        pause = 0.05
        deadline = _deadline(self.opts.deadline) if self.opts.deadline is not None else None
        while True:
            sent = time.monotonic()
            try:
                c = self.ledger.claim(self.key, lease=self.opts.lease, deadline=deadline,
                                      fingerprint=self.opts.fingerprint)
            except errors.BusyError as e:
                left = give_up - time.monotonic()
                if left <= 0:
                    e.message = f"{self.key!r} is busy: another owner holds its lease" + (
                        f" (waited {self.opts.wait:g}s)" if self.opts.wait > 0 else "")
                    raise
                nap = pause * (0.5 + random.random() / 2)
                if e.retry_after is not None:
                    nap = min(nap, max((e.retry_after - _now()).total_seconds(), 0.01))
                time.sleep(min(nap, left))
                pause = min(pause * 2, 1.0)
                continue
            if not c.already_done:
                self._until = sent + self.opts.lease
                self.effect = Effect(self.key, c, self.opts.lease)
                self._renewer = threading.Thread(target=self._renew, name=f"oncehook renew {self.key}", daemon=True)
                self._renewer.start()
            return c

    def _renew(self) -> None:
        """Renew every third of the lease. A renewal the ledger refuses loses
        the lease at once; one that gets no answer (a gateway restarting) is
        tried at the next tick, until the lease as last renewed has run out."""
        eff = self.effect
        assert eff is not None
        every = max(self.opts.lease / 3, 0.001)
        while not self._stop.wait(every):
            sent = time.monotonic()
            try:
                exp = self.ledger.renew(self.key, eff.token, self.opts.lease,
                                        timeout=max(self._until - sent, 0.05))
            except Exception as e:  # noqa: BLE001 - anything but an answer is tried again while the lease lasts
                if self._stop.is_set():
                    return
                if isinstance(e, errors.OncehookError) and _answered(e):
                    eff._lost = errors.LeaseLostError(f"{self.key!r}: lease lost: {e}")
                    return
                if time.monotonic() >= self._until:
                    eff._lost = errors.LeaseLostError(
                        f"{self.key!r}: lease lost: no renewal got through before it ran out ({e})")
                    return
                continue
            self._until = sent + self.opts.lease
            eff.lease_expires_at = exp

    def _halt(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()

    def succeeded(self, result: Any) -> None:
        """Complete with result, trying again while the ledger cannot be
        reached (until the lease runs out, 30 s at most). A result the ledger
        (or JSON) refuses fails the key for good: the work ran, and a pending
        key would be handed to the next claimer to run again."""
        self._halt()
        eff = self.effect
        assert eff is not None
        try:
            raw = _encode_result(result)
        except errors.InvalidError as e:
            self._refused(e)
        try:
            self._record(lambda: self.ledger.complete(self.key, eff.token, RawJSON(raw)))
        except errors.InvalidError as e:
            self._refused(e)
        except errors.OncehookError as e:
            if eff._lost is not None and not isinstance(e, errors.StaleTokenError):
                raise e from eff._lost
            raise

    def _refused(self, e: errors.InvalidError) -> None:
        eff = self.effect
        assert eff is not None
        reason = _reason("done, but its result could not be stored: " + e.message)
        try:
            self._record(lambda: self.ledger.fail(self.key, eff.token, reason))
        except errors.OncehookError as ferr:
            raise ferr from e
        raise errors.ResultRefusedError(
            f"{self.key!r}: the work was done, but its result was refused ({e.message}), "
            "so the key is failed for good", code="result_refused") from e

    def failed(self, exc: BaseException) -> None:
        """Release the key for a later attempt, or fail it for good when exc is
        permanent; the caller raises exc (or, when the lease was lost, a
        LeaseLostError, since the key is not this owner's to release)."""
        self._halt()
        eff = self.effect
        assert eff is not None
        if eff._lost is not None:
            if not isinstance(exc, Exception):
                return  # an interrupt or exit goes on as it is
            raise eff._lost from exc
        reason = _reason(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        permanent = isinstance(exc, errors.Permanent) or (
            bool(self.opts.permanent) and isinstance(exc, self.opts.permanent))
        step = self.ledger.fail if permanent else self.ledger.release
        try:
            self._record(lambda: step(self.key, eff.token, reason))
        except errors.OncehookError as rerr:
            # The function's own error is what the caller raises; the key stays
            # pending until its lease expires, then goes to the next claimer.
            log.warning("oncehook: %r: could not %s the key after %s: %s", self.key,
                        "fail" if permanent else "release", type(exc).__name__, rerr)
            if hasattr(exc, "add_note"):
                exc.add_note(f"oncehook could not {'fail' if permanent else 'release'} {self.key!r}: {rerr}")

    def _record(self, call: Callable[[], None]) -> None:
        until = min(self._until, time.monotonic() + RECORD_FOR)
        pause = 0.05
        while True:
            try:
                call()
                return
            except errors.OncehookError as e:
                if _answered(e) or time.monotonic() + pause >= until:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 2.0)


class Once:
    """What :meth:`Ledger.once` returns: a decorator, and a context manager
    (``with`` and ``async with``)."""

    def __init__(self, ledger: Ledger, key: Union[str, Callable[..., str]], opts: _Options) -> None:
        self._ledger = ledger
        self._key = key
        self._opts = opts
        self._run: Optional[_Run] = None

    # -- decorator -------------------------------------------------------------------------------

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)
        wants_effect = "effect" in sig.parameters
        if wants_effect and sig.parameters["effect"].kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(f"{fn.__qualname__}: the effect parameter must be passable by name")
        outer = sig.replace(parameters=[p for p in sig.parameters.values() if p.name != "effect"])
        template = self._key

        def key_for(*args: Any, **kwargs: Any) -> str:
            if callable(template):
                key = template(*args, **kwargs)
            else:
                bound = outer.bind(*args, **kwargs)
                bound.apply_defaults()
                key = template.format(*bound.args, **bound.arguments)
            if not isinstance(key, str):
                raise TypeError(f"{fn.__qualname__}: the key must be a str, not {type(key).__name__}")
            return key

        def call_kwargs(kwargs: Dict[str, Any], eff: Effect) -> Dict[str, Any]:
            if wants_effect:
                if "effect" in kwargs:
                    raise TypeError(f"{fn.__qualname__}: effect is given by oncehook, not by the caller")
                return {**kwargs, "effect": eff}
            return kwargs

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                run = _Run(self._ledger, key_for(*args, **kwargs), self._opts)
                claim = await asyncio.to_thread(run.start)
                if claim.already_done:
                    return claim.result
                assert run.effect is not None
                try:
                    result = await fn(*args, **call_kwargs(kwargs, run.effect))
                except BaseException as exc:
                    await asyncio.to_thread(run.failed, exc)
                    raise
                await asyncio.to_thread(run.succeeded, result)
                return result

            run_async.key_for = key_for  # type: ignore[attr-defined]
            return run_async

        @functools.wraps(fn)
        def run_sync(*args: Any, **kwargs: Any) -> Any:
            run = _Run(self._ledger, key_for(*args, **kwargs), self._opts)
            claim = run.start()
            if claim.already_done:
                return claim.result
            assert run.effect is not None
            try:
                result = fn(*args, **call_kwargs(kwargs, run.effect))
            except BaseException as exc:
                run.failed(exc)
                raise
            run.succeeded(result)
            return result

        run_sync.key_for = key_for  # type: ignore[attr-defined]
        return run_sync

    # -- context manager -------------------------------------------------------------------------

    def _begin(self) -> _Run:
        if not isinstance(self._key, str):
            raise TypeError("with ledger.once(key): the key must be a str (a template or callable is for the decorator)")
        if self._run is not None:
            raise RuntimeError(f"ledger.once({self._key!r}) is already in use: call once() for each with")
        self._run = _Run(self._ledger, self._key, self._opts)
        return self._run

    def _entered(self, claim: Claim) -> Effect:
        run = self._run
        assert run is not None
        if claim.already_done:
            self._run = None
            raise errors.AlreadyDone(run.key, claim.raw_result or b"null", claim.result)
        assert run.effect is not None
        return run.effect

    def __enter__(self) -> Effect:
        run = self._begin()
        try:
            return self._entered(run.start())
        except BaseException:
            self._run = None
            raise

    def __exit__(self, typ: Any, exc: Optional[BaseException], tb: Any) -> None:
        run, self._run = self._run, None
        assert run is not None and run.effect is not None
        if exc is None:
            run.succeeded(run.effect.result)
        else:
            run.failed(exc)

    async def __aenter__(self) -> Effect:
        run = self._begin()
        try:
            return self._entered(await asyncio.to_thread(run.start))
        except BaseException:
            self._run = None
            raise

    async def __aexit__(self, typ: Any, exc: Optional[BaseException], tb: Any) -> None:
        run, self._run = self._run, None
        assert run is not None and run.effect is not None
        if exc is None:
            await asyncio.to_thread(run.succeeded, run.effect.result)
        else:
            await asyncio.to_thread(run.failed, exc)


def _answered(e: errors.OncehookError) -> bool:
    """Whether e is the ledger's answer, rather than a failure to reach it (no
    answer, or a 5xx: the gateway could not commit, and says to retry)."""
    if isinstance(e, errors.UnreachableError):
        return False
    return not (e.status is not None and e.status >= 500)


def _encode_result(result: Any) -> bytes:
    if isinstance(result, RawJSON):
        raw = result.data
        try:
            json.loads(raw.decode("utf-8"))
        except ValueError as e:
            raise errors.InvalidError(f"not JSON: {e}", field="result") from e
        return raw
    try:
        return json.dumps(result, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise errors.InvalidError(f"not JSON: {e}", field="result") from e


def _reason(s: str) -> str:
    """A reason the ledger takes: no NUL, at most 4,096 bytes of UTF-8 cut at a
    character's boundary. One it refused would leave the key pending."""
    b = s.replace("\x00", "\ufffd").encode("utf-8", "replace")
    if len(b) <= MAX_REASON:
        return b.decode("utf-8")
    return b[:MAX_REASON].decode("utf-8", "ignore")


def _check_key(key: str) -> None:
    if not isinstance(key, str) or not key:
        raise errors.InvalidError("the key is empty (or not a str)", field="key")
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY:
        raise errors.InvalidError(f"the key is over {MAX_KEY} bytes", field="key")


def _positive(v: Seconds, field: str) -> float:
    s = _api.seconds(v)
    if not s > 0:
        raise errors.InvalidError(f"want more than 0 seconds, not {v!r}", field=field)
    return s


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _deadline(d: Union[datetime, timedelta]) -> datetime:
    if isinstance(d, timedelta):
        return _now() + d
    if d.tzinfo is None:
        raise errors.InvalidError("a naive datetime: give it a timezone (datetime.now(timezone.utc) + ...)",
                                  field="deadline")
    return d


def _rfc3339(t: datetime) -> str:
    return t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
