"""The errors of oncehook's client: one class per answer a program acts on.

Every error is an :class:`OncehookError` carrying ``code``, the API's own
``reason`` (``busy``, ``stale_token``, ``invalid``, ...), so that a log line
names what the gateway said; ``status`` is the HTTP status when an answer came.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Optional


class OncehookError(Exception):
    """Anything the API refused, or could not be asked.

    ``code`` is the API's ``reason`` (or this client's own word, such as
    ``unreachable``); ``status`` the HTTP status, ``None`` when no answer came;
    ``field`` the request field at fault, when the API named one.
    """

    code = "error"

    def __init__(self, message: str, *, code: Optional[str] = None, status: Optional[int] = None,
                 field: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.status = status
        self.field = field

    def __str__(self) -> str:
        where = f", field {self.field}" if self.field else ""
        status = f" {self.status}" if self.status else ""
        return f"oncehook: {self.message} ({self.code}{status}{where})"


class ApiError(OncehookError):
    """An answer of the API that no narrower class below stands for
    (``unauthorized``, ``read_only``, ``unavailable``, ...)."""


class UnreachableError(OncehookError):
    """No answer came: the gateway is down or restarting, the network cut, or
    the call's timeout passed. Safe to try again: every call is fenced (the
    ledger's token) or keyed (a publish's Idempotency-Key)."""

    code = "unreachable"


class InvalidError(OncehookError):
    """The API refused the request's input (400): ``field`` names what."""

    code = "invalid"


class BusyError(OncehookError):
    """Another owner holds the key's lease. ``retry_after`` is when that lease
    expires (a :class:`datetime`, UTC), unless it is renewed or completed first."""

    code = "busy"

    def __init__(self, message: str, *, retry_after: Optional[datetime] = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class FailedError(OncehookError):
    """The key was failed for good (a permanent error); ``reason`` is what its
    owner said. Only an operator's reset reopens it."""

    code = "failed"

    def __init__(self, message: str, *, reason: str = "", **kw: Any) -> None:
        super().__init__(message, **kw)
        self.reason = reason


class StaleTokenError(OncehookError):
    """The token is not the owner's any more: the lease expired and another
    process took the key over (or it was released). Its work is not recorded:
    the new owner's is. This is a dead owner's late ``complete``."""

    code = "stale_token"


class LeaseLostError(OncehookError):
    """The lease could not be kept while the function ran: a renewal was refused
    (the key was taken over), or none got through before the lease ran out.
    Raised when the function failed meanwhile; its own error is the cause."""

    code = "lease_lost"


class ExpiredError(OncehookError):
    """The claim's deadline passed before the key was done: the effect is not
    worth doing any more, and never will be under this key."""

    code = "expired"


class FingerprintError(OncehookError):
    """The key was claimed before with another fingerprint: the key is too
    coarse for the requests it stands for."""

    code = "fingerprint_mismatch"


class ConflictError(OncehookError):
    """The record is not in a state the operation applies to."""

    code = "conflict"


class NotFoundError(OncehookError):
    """No such key, source or endpoint."""

    code = "not_found"


class ResultRefusedError(OncehookError):
    """The function ran, but its result could not be stored (not JSON, or over
    the gateway's ``effects.max_result``): the key is failed for good with that
    reason, so that nobody runs the work again."""

    code = "result_refused"


class SignatureError(OncehookError):
    """A delivery's signature does not hold: ``code`` says why
    (``missing_header``, ``bad_timestamp``, ``timestamp_out_of_tolerance``,
    ``bad_secret``, ``no_match``)."""

    code = "no_match"


class AlreadyDone(Exception):
    """Raised on entering ``with ledger.once(key)`` when the key was done
    before: the block must not run again. ``result`` is the stored result as
    Python values, ``raw`` its JSON bytes exactly as they were stored.

    It is not an :class:`OncehookError`: nothing went wrong. It is raised,
    rather than handed to the block to check, so that a block that forgets to
    check cannot repeat the side effect.
    """

    def __init__(self, key: str, raw: bytes, result: Any) -> None:
        super().__init__(f"oncehook: {key!r} was done before")
        self.key = key
        self.raw = raw
        self.result = result


class Permanent(Exception):
    """Raise it (or ``raise Permanent(...) from err``) from an effect when no
    retry can fix the failure (an invalid phone number, a refused card): the key
    is failed for good instead of released for the next attempt."""
