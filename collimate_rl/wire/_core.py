"""The transport-free core shared by every client: written once, driven twice.

A client call is a *flow*: a generator that yields :class:`Send` (do this HTTP
request and send me back a :class:`RawResponse` or the transport exception)
and :class:`Sleep` (back off this long and send me back ``None``), and finally
returns the parsed result. :func:`run_sync` and :func:`run_async` are the only
two drivers; the sync and async clients differ only in which one they call.
Multi-step protocols (retry, ``exec_once``, fork chunking) compose with
``yield from``.

>>> flow = call(ctx_for_test(), Request("GET", "/v1/health"))
>>> next(flow)
Send(request=Request(method='GET', path='/v1/health', body=None, params=None, idempotent=True, timeout=120.0))
>>> flow.send(RawResponse(200, "OK", b'{"status": "ok"}'))
Traceback (most recent call last):
...
StopIteration: {'status': 'ok'}
"""

from __future__ import annotations

import errno
import json
import random
import time
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar
from urllib.parse import quote

import anyio
import httpx

from collimate_rl.errors import (
    SAFE_TO_RETRY_CODES,
    CollimateError,
    CollimateProtocolError,
    CollimateTransportError,
    CollimateUsageError,
    error_from_envelope,
    note_request_id,
)
from collimate_rl.seeds import is_valid_seed

__all__ = [
    "DAEMON_RETRY_STATUSES",
    "GATEWAY_NEVER_RETRY_CODES",
    "GATEWAY_RETRY_STATUSES",
    "MAX_TIMEOUT_SECONDS",
    "CallContext",
    "Flow",
    "RawResponse",
    "Request",
    "RetryPolicy",
    "Send",
    "Sleep",
    "build_exec_body",
    "call",
    "exec_timeout",
    "is_refused",
    "path_id",
    "run_async",
    "run_sync",
]

T = TypeVar("T")

#: Statuses the daemon client retries (429 too; 410 deliberately not).
DAEMON_RETRY_STATUSES: Final = frozenset({429, 500, 502, 503, 504})
#: Statuses the gateway client retries (429 is not retried there).
GATEWAY_RETRY_STATUSES: Final = frozenset({500, 502, 503, 504})
#: Gateway codes that are never retried, whatever the status.
GATEWAY_NEVER_RETRY_CODES: Final = frozenset(
    {"demo_tier_limit", "quota_exceeded", "forbidden", "unauthorized", "not_found", "bad_request"}
)
#: The daemon's cap on ``timeout_seconds``.
MAX_TIMEOUT_SECONDS: Final = 3600
#: Extra socket wait on top of the guest timeout, so a long exec is never abandoned.
EXEC_SOCKET_SLACK_S: Final = 30.0


@dataclass(frozen=True)
class Request:
    """One HTTP request, before any transport is involved.

    Attributes:
        method: ``GET``, ``POST`` or ``DELETE``.
        path: the path below the client's base URL, e.g. ``/v1/sessions``.
        body: the JSON body, or ``None`` for no body.
        params: query parameters.
        idempotent: whether resending can never duplicate work.
        timeout: the socket timeout in seconds.
    """

    method: str
    path: str
    body: Any = None
    params: Mapping[str, str] | None = None
    idempotent: bool = True
    timeout: float = 120.0


@dataclass(frozen=True)
class RawResponse:
    """What a driver hands back for a request that got an HTTP answer.

    ``request_id`` is the answer's ``X-Request-Id`` header (our node's; a real
    daemon sends none: ``None``).
    """

    status: int
    reason: str
    content: bytes
    request_id: str | None = None


@dataclass(frozen=True)
class Send:
    """Flow action: perform ``request``; reply with a RawResponse or the transport error."""

    request: Request


@dataclass(frozen=True)
class Sleep:
    """Flow action: wait ``seconds`` before the next attempt; reply with ``None``."""

    seconds: float


Action = Send | Sleep
Reply = RawResponse | BaseException | None
Flow = Generator[Action, Reply, T]


@dataclass(frozen=True)
class RetryPolicy:
    """Retry settings: ``retries + 1`` attempts, full-jitter backoff within a budget.

    Before retry attempt ``i`` (0-based) the client sleeps
    ``uniform(0, backoff * 2**i)``, truncated to what is left of
    ``retry_budget``; once the budget is spent, the next retryable failure
    raises at once.

    >>> policy = RetryPolicy(retries=3, backoff=1.0, retry_budget=0.5, rng=random.Random(0))
    >>> policy.delay(attempt=2, slept=0.4) <= 0.1
    True
    >>> policy.delay(attempt=0, slept=0.5) is None
    True
    """

    retries: int = 3
    backoff: float = 0.15
    retry_budget: float = 30.0
    gateway: bool = False
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def delay(self, *, attempt: int, slept: float) -> float | None:
        """The sleep before retry ``attempt``, or ``None`` if no retry is allowed."""
        remaining = self.retry_budget - slept
        if attempt >= self.retries or remaining <= 0:
            return None
        return min(self.rng.uniform(0.0, self.backoff * 2**attempt), remaining)


@dataclass(frozen=True)
class CallContext:
    """What every flow needs from its client: the socket timeout and the retry policy."""

    timeout: float = 120.0
    policy: RetryPolicy = field(default_factory=RetryPolicy)


def ctx_for_test(**kw: Any) -> CallContext:
    """A default context (for doctests and tests)."""
    return CallContext(**kw)


def is_refused(exc: BaseException) -> bool:
    """Whether ``exc`` proves the request was never sent (connection refused).

    For a unix socket this includes a socket file that does not exist. Only a
    failure while *connecting* counts; a timeout or reset after that is
    ambiguous.

    >>> is_refused(ConnectionRefusedError()), is_refused(httpx.ReadTimeout("slow"))
    (True, False)
    """
    if isinstance(exc, ConnectionRefusedError):
        return True
    if not isinstance(exc, httpx.ConnectError):
        return False
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, (ConnectionRefusedError, FileNotFoundError)):
            return True
        if isinstance(cur, OSError) and cur.errno in (errno.ECONNREFUSED, errno.ENOENT):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _decode(content: bytes) -> Any:
    """Parse a JSON body; an empty body is ``{}``. Raises ValueError."""
    if not content.strip():
        return {}
    return json.loads(content)


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _retryable_status(req: Request, status: int, code: str | None, gateway: bool) -> bool:
    if gateway:
        if code in GATEWAY_NEVER_RETRY_CODES or status not in GATEWAY_RETRY_STATUSES:
            return False
        return req.idempotent or code == "at_capacity"
    if status not in DAEMON_RETRY_STATUSES:
        return False
    return req.idempotent or code in SAFE_TO_RETRY_CODES


def _outcome(req: Request, reply: Reply, gateway: bool) -> tuple[Any, CollimateError | None, bool]:
    """Classify one attempt: ``(value, error, retryable)``."""
    if isinstance(reply, BaseException):
        err: CollimateError = CollimateTransportError(
            f"{req.method} {req.path}: {_describe(reply)}"
        )
        err.__cause__ = reply
        return None, err, req.idempotent or is_refused(reply)
    if not isinstance(reply, RawResponse):
        raise TypeError(f"a driver replied to Send with {type(reply).__name__}")
    if 200 <= reply.status < 300:
        try:
            return _decode(reply.content), None, False
        except ValueError as exc:
            err = CollimateProtocolError(
                f"{req.method} {req.path}: HTTP {reply.status} body is not JSON ({exc})",
                status=reply.status,
                request_id=reply.request_id,
            )
            err.__cause__ = exc
            return None, err, req.idempotent
    try:
        payload = _decode(reply.content)
    except ValueError:
        payload = None
    err = error_from_envelope(reply.status, payload, reason=reply.reason, gateway=gateway)
    note_request_id(err, reply.request_id)
    return None, err, _retryable_status(req, reply.status, err.error_code, gateway)


def call(ctx: CallContext, req: Request) -> Flow[Any]:
    """Send ``req`` with the retry rules of the contract; return the decoded JSON.

    Idempotent requests retry on the retryable statuses, unreadable bodies and
    any transport error. Creates and execs retry only on a code proving no work
    was done (daemon: ``at_capacity`` / ``session_bringup_failed`` /
    ``draining``; gateway: ``at_capacity``) or a refused connection. The
    gateway client also resends once, without backoff, a request whose
    connection failed while it was being written (``httpx.WriteError``).
    """
    policy = ctx.policy
    slept = 0.0
    attempt = 0
    resent = False
    while True:
        reply = yield Send(req)
        if policy.gateway and not resent and isinstance(reply, httpx.WriteError):
            # A (stale keep-alive) connection died while the request was being
            # written: the server never got a whole request. Resend once, at once.
            resent = True
            continue
        value, error, retryable = _outcome(req, reply, policy.gateway)
        if error is None:
            return value
        delay = policy.delay(attempt=attempt, slept=slept) if retryable else None
        if delay is None:
            raise error
        attempt += 1
        slept += delay
        if delay > 0:
            yield Sleep(delay)


def run_sync(
    flow: Flow[T], send: Callable[[Request], RawResponse], sleep: Callable[[float], None]
) -> T:
    """Drive ``flow`` with blocking I/O. Transport errors are handed to the flow."""
    try:
        action = next(flow)
        while True:
            reply: Reply = None
            if isinstance(action, Sleep):
                sleep(action.seconds)
            else:
                try:
                    reply = send(action.request)
                except httpx.RequestError as exc:
                    reply = exc
            action = flow.send(reply)
    except StopIteration as stop:
        result: T = stop.value
        return result
    finally:
        flow.close()


async def run_async(
    flow: Flow[T],
    send: Callable[[Request], Awaitable[RawResponse]],
    sleep: Callable[[float], Awaitable[None]],
) -> T:
    """Drive ``flow`` with async I/O; the twin of :func:`run_sync`."""
    try:
        action = next(flow)
        while True:
            reply: Reply = None
            if isinstance(action, Sleep):
                await sleep(action.seconds)
            else:
                try:
                    reply = await send(action.request)
                except httpx.RequestError as exc:
                    reply = exc
            action = flow.send(reply)
    except StopIteration as stop:
        result: T = stop.value
        return result
    finally:
        flow.close()


def default_sleep(seconds: float) -> None:
    """The sync clients' default sleep."""
    time.sleep(seconds)


async def default_async_sleep(seconds: float) -> None:
    """The async clients' default sleep (works under asyncio and trio)."""
    await anyio.sleep(seconds)


# ---------------------------------------------------------------- validation


def path_id(value: object, what: str = "session_id") -> str:
    """Validate an id and quote it for use as one path segment.

    >>> path_id("s-1")
    's-1'
    >>> path_id("")
    Traceback (most recent call last):
    ...
    collimate_rl.errors.CollimateUsageError: session_id must be a non-empty string, got ''
    """
    if not isinstance(value, str) or not value:
        raise CollimateUsageError(f"{what} must be a non-empty string, got {value!r}")
    return quote(value, safe="")


def exec_timeout(ctx: CallContext, timeout_seconds: int) -> float:
    """The socket timeout of an exec: ``max(timeout, timeout_seconds + 30)``.

    >>> exec_timeout(CallContext(timeout=120.0), 300)
    330.0
    """
    return max(ctx.timeout, timeout_seconds + EXEC_SOCKET_SLACK_S)


def _check_timeout_seconds(timeout_seconds: object) -> int:
    if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, (int, float)):
        raise CollimateUsageError(f"timeout_seconds must be a number, got {timeout_seconds!r}")
    value = int(timeout_seconds)
    if not 1 <= value <= MAX_TIMEOUT_SECONDS:
        raise CollimateUsageError(
            f"timeout_seconds must be within 1..{MAX_TIMEOUT_SECONDS}, got {timeout_seconds!r}"
        )
    return value


def _check_files(files: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    out = []
    for item in files:
        if not isinstance(item, Mapping):
            raise CollimateUsageError(f"files entries must be dicts, got {item!r}")
        path, content = item.get("path"), item.get("content")
        if not isinstance(path, str) or not path or not isinstance(content, str):
            raise CollimateUsageError(
                'each files entry needs a non-empty str "path" and a str "content"'
            )
        out.append({"path": path, "content": content})
    return out


def _check_commands(commands: Sequence[Sequence[str]]) -> list[list[str]]:
    if isinstance(commands, str) or not all(
        not isinstance(argv, str) and all(isinstance(a, str) for a in argv) for argv in commands
    ):
        raise CollimateUsageError("commands must be a list of argv lists of str")
    return [list(argv) for argv in commands]


def build_exec_body(
    *,
    command: str | None = None,
    code: str | None = None,
    commands: Sequence[Sequence[str]] | None = None,
    files: Sequence[Mapping[str, str]] | None = None,
    timeout_seconds: int = 30,
    seed: str | None = None,
    template_id: str | None = None,
    egress: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Validate and build an ExecRequest body; optional keys are omitted when unset.

    Raises:
        CollimateUsageError: none of command/code/commands, a malformed seed,
            ``timeout_seconds`` outside 1..3600, or badly shaped files/commands.

    >>> build_exec_body(code="print(1)", timeout_seconds=5)
    {'timeout_seconds': 5, 'code': 'print(1)'}
    >>> build_exec_body(files=[{"path": "/tmp/a", "content": ""}])
    Traceback (most recent call last):
    ...
    collimate_rl.errors.CollimateUsageError: one of command/code/commands is required
    """
    if command is None and code is None and commands is None:
        raise CollimateUsageError("one of command/code/commands is required")
    body: dict[str, Any] = {"timeout_seconds": _check_timeout_seconds(timeout_seconds)}
    if template_id is not None:
        path_id(template_id, "template_id")  # validates: a non-empty string
        body["template_id"] = template_id
    if command is not None:
        if not isinstance(command, str):
            raise CollimateUsageError(f"command must be a str, got {type(command).__name__}")
        body["command"] = command
    if code is not None:
        if not isinstance(code, str):
            raise CollimateUsageError(f"code must be a str, got {type(code).__name__}")
        body["code"] = code
    if commands is not None:
        body["commands"] = _check_commands(commands)
    if files:
        body["files"] = _check_files(files)
    if seed is not None:
        if not is_valid_seed(seed):
            raise CollimateUsageError(f"seed must be 64 hex characters, got {seed!r}")
        body["seed"] = seed
    if egress is not None:
        body["egress"] = dict(egress)
    return body
