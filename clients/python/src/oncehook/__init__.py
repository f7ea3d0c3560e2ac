"""oncehook's client for Python: the effects ledger as one call, the outbox
over HTTP, a pull destination's consumer, and the check of a delivery's
signature. Standard library only.

    from oncehook import Ledger

    ledger = Ledger()  # $ONCEHOOK_API, $ONCEHOOK_API_TOKEN

    @ledger.once("llm-summary:{event_id}")
    def summarize(event_id, text):
        return call_the_model(text, idempotency_key=f"llm-summary:{event_id}")
"""

from .errors import (AlreadyDone, ApiError, BusyError, ConflictError, ExpiredError, FailedError, FingerprintError,
                     InvalidError, LeaseLostError, NotFoundError, OncehookError, Permanent, ResultRefusedError,
                     SignatureError, StaleTokenError, UnreachableError)
from .ledger import DEFAULT_LEASE, DEFAULT_WAIT, Claim, Effect, Ledger, Once, RawJSON
from .outbox import Outbox, Published, format_key
from .pull import Consumer, Headers, Outcome, PulledDelivery
from .verify import DEFAULT_TOLERANCE, Delivery, read_delivery, verify_delivery

__version__ = "0.1.0"

__all__ = [
    "Ledger", "Once", "Effect", "Claim", "RawJSON", "DEFAULT_LEASE", "DEFAULT_WAIT",
    "Outbox", "Published", "format_key",
    "Consumer", "PulledDelivery", "Outcome", "Headers",
    "verify_delivery", "read_delivery", "Delivery", "DEFAULT_TOLERANCE",
    "OncehookError", "ApiError", "UnreachableError", "InvalidError", "BusyError", "FailedError", "StaleTokenError",
    "LeaseLostError", "ExpiredError", "FingerprintError", "ConflictError", "NotFoundError", "ResultRefusedError",
    "SignatureError", "AlreadyDone", "Permanent",
]
