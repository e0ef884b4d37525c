"""The exception tree and the wire error-code table.

Every error the SDK raises derives from :class:`CollimateError`::

    CollimateError (RuntimeError)            .status, .error_code
    ├── CollimateTransportError              the request never got an HTTP answer
    │   └── CollimateProtocolError           a 2xx answer whose body is not JSON
    ├── CollimateServerError                 the server answered with an error envelope
    │   ├── CollimateDrainingError           503 draining: route the work elsewhere
    │   ├── CollimateCapacityError           503 at_capacity past the retry budget
    │   ├── CollimateNotFoundError           404 no_such_session / no_template / not_found
    │   ├── CollimateSessionGoneError        410 session_gone
    │   ├── CollimateAuthError               401 unauthorized (a node's token, a gateway key)
    │   └── GatewayError                     the managed gateway's errors (.code)
    │       ├── DemoTierLimit                demo_tier_limit
    │       ├── QuotaExceededError           quota_exceeded / insufficient_credits
    │       ├── NetworkRequiresProError      network_requires_pro
    │       └── ForkShortError               fork_short (client-side)
    ├── CollimateTaskError                   a failure *inside* the sandbox (file IO)
    └── CollimateUsageError (also ValueError) bad arguments caught before sending

Infrastructure errors (everything except :class:`CollimateTaskError`) must
never be folded into a reward.

>>> err = error_from_envelope(503, {"error": "node draining", "error_code": "draining"})
>>> type(err).__name__, err.status, err.error_code
('CollimateDrainingError', 503, 'draining')
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "ERROR_CODES",
    "SAFE_TO_RETRY_CODES",
    "CollimateAuthError",
    "CollimateCapacityError",
    "CollimateDrainingError",
    "CollimateError",
    "CollimateNotFoundError",
    "CollimateProtocolError",
    "CollimateServerError",
    "CollimateSessionGoneError",
    "CollimateTaskError",
    "CollimateTransportError",
    "CollimateUsageError",
    "DemoTierLimit",
    "ForkShortError",
    "GatewayError",
    "NetworkRequiresProError",
    "QuotaExceededError",
    "error_from_envelope",
    "note_request_id",
]


class CollimateError(RuntimeError):
    """Root of every collimate-rl error.

    Attributes:
        status: the HTTP status, or ``None`` when there was no HTTP answer.
        error_code: the contract's stable error code, or ``None``.
        request_id: the answer's ``X-Request-Id`` (our node sends one with every
            answer; its log lines name it), or ``None`` (no answer, or a server
            that sends none, such as a real daemon).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_code: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.request_id = request_id


class CollimateTransportError(CollimateError):
    """The request got no HTTP answer (refused, reset, timed out, unreadable)."""


class CollimateProtocolError(CollimateTransportError):
    """The server answered 2xx but the body could not be read as JSON."""


class CollimateServerError(CollimateError):
    """The server answered with an error status and envelope."""


class CollimateDrainingError(CollimateServerError):
    """The node is draining; nothing ran. Retry on another node."""


class CollimateCapacityError(CollimateServerError):
    """The node refused the work (``at_capacity``) before doing any of it."""


class CollimateNotFoundError(CollimateServerError):
    """The session, template or route does not exist."""


class CollimateSessionGoneError(CollimateServerError):
    """The session was reaped or destroyed (410). Permanent."""


class CollimateAuthError(CollimateServerError):
    """401 ``unauthorized``: a missing or wrong token (a node's ``--token-file``, a gateway
    key). Nothing ran; not retried."""


class GatewayError(CollimateServerError):
    """An error from the managed gateway. ``code`` aliases ``error_code``."""

    @property
    def code(self) -> str | None:
        return self.error_code


class DemoTierLimit(GatewayError):
    """The demo tier's limits were hit; the message is the server's, verbatim."""


class QuotaExceededError(GatewayError):
    """The tenant's quota or credits are exhausted."""


class NetworkRequiresProError(GatewayError):
    """A network-enabled template was asked for on the demo tier."""


class ForkShortError(GatewayError):
    """A fork returned fewer children than requested (the group was reaped)."""


class CollimateTaskError(CollimateError):
    """A failure inside the sandbox (not an infrastructure failure).

    Attributes:
        exit_code: the in-sandbox exit code, if any.
        output: the merged stdout+stderr transcript.
    """

    def __init__(self, message: str, *, exit_code: int | None = None, output: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.output = output


class CollimateUsageError(CollimateError, ValueError):
    """The caller's arguments are invalid; nothing was sent."""


#: Wire error codes -> (default HTTP status, exception class). The node uses
#: the status when it emits a code; both clients use the class when they raise.
ERROR_CODES: Final[dict[str, tuple[int, type[CollimateServerError]]]] = {
    "bad_request": (400, CollimateServerError),
    "template_id_required": (400, CollimateServerError),
    "invalid_seed": (400, CollimateServerError),
    "not_found": (404, CollimateNotFoundError),
    "method_not_allowed": (405, CollimateServerError),
    "no_template": (404, CollimateNotFoundError),
    "no_such_session": (404, CollimateNotFoundError),
    "session_busy": (409, CollimateServerError),
    "template_exists": (409, CollimateServerError),
    "bake_failed": (400, CollimateServerError),
    "session_gone": (410, CollimateSessionGoneError),
    "payload_too_large": (413, CollimateServerError),
    "internal_error": (500, CollimateServerError),
    "at_capacity": (503, CollimateCapacityError),
    "session_bringup_failed": (503, CollimateServerError),
    "service_not_ready": (502, CollimateServerError),
    "draining": (503, CollimateDrainingError),
    "unauthorized": (401, CollimateAuthError),
    # Gateway codes.
    "forbidden": (403, GatewayError),
    "quota_exceeded": (402, QuotaExceededError),
    "insufficient_credits": (402, QuotaExceededError),
    "rate_limited": (429, GatewayError),
    "demo_tier_limit": (403, DemoTierLimit),
    "network_requires_pro": (403, NetworkRequiresProError),
    "port_not_exposed": (409, GatewayError),
    "template_in_use": (409, GatewayError),
    "upstream_error": (502, GatewayError),
    "fork_short": (502, ForkShortError),
}

#: Codes that prove no work was done, so even a create or an exec may be retried.
SAFE_TO_RETRY_CODES: Final[frozenset[str]] = frozenset(
    {"at_capacity", "session_bringup_failed", "draining"}
)


def error_from_envelope(
    status: int, payload: Any, *, reason: str = "", gateway: bool = False
) -> CollimateServerError:
    """Build the typed error for an error response.

    Accepts the daemon envelope ``{"error", "error_code"}`` and, for the
    gateway, ``{"code", "message"}`` as well. Anything else gives a message
    ``"HTTP <status>: <reason>"`` and ``error_code=None``.
    """
    code: str | None = None
    if isinstance(payload, dict) and gateway and "message" in payload:
        message = str(payload["message"])
        code = payload.get("code") or payload.get("error_code")
    elif isinstance(payload, dict) and "error" in payload:
        message = str(payload["error"]) if gateway else f"HTTP {status}: {payload['error']}"
        code = payload.get("error_code") or payload.get("code")
    else:
        message = f"HTTP {status}: {reason}".rstrip()
    default_cls: type[CollimateServerError] = GatewayError if gateway else CollimateServerError
    cls = ERROR_CODES.get(code, (status, default_cls))[1] if code else default_cls
    if gateway and not issubclass(cls, GatewayError):
        # Gateway errors stay GatewayError so callers can catch one family,
        # while draining/capacity keep their own class via multiple bases.
        cls = _gateway_twin(cls)
    return cls(message, status=status, error_code=code)


def note_request_id(err: CollimateError, request_id: str | None) -> CollimateError:
    """Record the node's request id on ``err`` and at the end of its message; ``err``.

    >>> str(note_request_id(CollimateServerError("HTTP 500: boom"), "req_0123456789abcdef"))
    'HTTP 500: boom (request req_0123456789abcdef)'
    """
    if request_id is not None:
        err.request_id = request_id
        if err.args:
            err.args = (f"{err.args[0]} (request {request_id})", *err.args[1:])
    return err


_TWINS: dict[type[CollimateServerError], type[CollimateServerError]] = {}


def _gateway_twin(cls: type[CollimateServerError]) -> type[CollimateServerError]:
    """A subclass of both ``cls`` and :class:`GatewayError` (cached)."""
    if issubclass(GatewayError, cls):
        return GatewayError  # e.g. plain CollimateServerError: GatewayError already is one
    twin = _TWINS.get(cls)
    if twin is None:
        twin = type(f"Gateway{cls.__name__.removeprefix('Collimate')}", (cls, GatewayError), {})
        _TWINS[cls] = twin
    return twin
