"""The transport-free core: classification, refusal detection, drivers."""

from __future__ import annotations

import errno
import random
from typing import Any

import httpx
import pytest

from collimate_rl.errors import CollimateTransportError, CollimateUsageError
from collimate_rl.wire._core import (
    CallContext,
    RawResponse,
    Request,
    RetryPolicy,
    build_exec_body,
    call,
    is_refused,
    run_sync,
)


def _connect_error(cause: BaseException) -> httpx.ConnectError:
    try:
        try:
            raise cause
        except OSError as exc:
            raise httpx.ConnectError(str(exc)) from exc
    except httpx.ConnectError as err:
        return err


@pytest.mark.parametrize(
    "exc, refused",
    [
        (ConnectionRefusedError(), True),
        (_connect_error(ConnectionRefusedError(errno.ECONNREFUSED, "refused")), True),
        (_connect_error(FileNotFoundError(errno.ENOENT, "no socket")), True),
        (_connect_error(OSError(errno.ECONNREFUSED, "refused")), True),
        (_connect_error(OSError(errno.EHOSTUNREACH, "unreachable")), False),
        (httpx.ConnectTimeout("slow connect"), False),
        (httpx.ReadTimeout("slow"), False),
        (httpx.RemoteProtocolError("dropped"), False),
        (httpx.ReadError("reset"), False),
    ],
)
def test_is_refused(exc: BaseException, refused: bool) -> None:
    assert is_refused(exc) is refused


def _drive(replies: list[Any], *, idempotent: bool, gateway: bool = False) -> tuple[Any, int]:
    policy = RetryPolicy(retries=5, backoff=0.0, gateway=gateway, rng=random.Random(0))
    sent: list[Request] = []

    def send(req: Request) -> RawResponse:
        sent.append(req)
        reply = replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        assert isinstance(reply, RawResponse)
        return reply

    flow = call(CallContext(policy=policy), Request("POST", "/p", {"a": 1}, idempotent=idempotent))
    return run_sync(flow, send, lambda s: None), len(sent)


def test_driver_hands_transport_errors_to_the_flow() -> None:
    ok = RawResponse(200, "OK", b'{"ok": true}')
    assert _drive([httpx.ReadError("reset"), ok], idempotent=True) == ({"ok": True}, 2)
    with pytest.raises(CollimateTransportError, match="POST /p: reset"):
        _drive([httpx.ReadError("reset"), ok], idempotent=False)
    refused = _connect_error(ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    assert _drive([refused, ok], idempotent=False, gateway=True) == ({"ok": True}, 2)


def test_zero_delay_does_not_yield_a_sleep() -> None:
    ok = RawResponse(200, "OK", b"[]")
    busy = RawResponse(503, "Busy", b'{"error": "x", "error_code": "at_capacity"}')
    assert _drive([busy, busy, ok], idempotent=False) == ([], 3)


def test_build_exec_body_omits_unset_keys() -> None:
    body = build_exec_body(command="ls", files=None, timeout_seconds=2.9)  # type: ignore[arg-type]
    assert body == {"timeout_seconds": 2, "command": "ls"}
    with pytest.raises(CollimateUsageError):
        build_exec_body(command="ls", timeout_seconds=True)
    with pytest.raises(CollimateUsageError):
        build_exec_body(command="ls", timeout_seconds="30")  # type: ignore[arg-type]


def test_gateway_resends_once_after_a_write_error() -> None:
    ok = RawResponse(200, "OK", b"{}")
    broken = httpx.WriteError("broken pipe")
    assert _drive([broken, ok], idempotent=False, gateway=True) == ({}, 2)
    with pytest.raises(CollimateTransportError, match="broken pipe"):
        _drive([broken, broken, ok], idempotent=False, gateway=True)
    with pytest.raises(CollimateTransportError):  # the daemon contract: only refusals
        _drive([broken, ok], idempotent=False, gateway=False)
