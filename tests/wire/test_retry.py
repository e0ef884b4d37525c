"""Retry and idempotency rules of the daemon client, against a real server."""

from __future__ import annotations

import random
import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collimate_rl.errors import (
    CollimateCapacityError,
    CollimateError,
    CollimateProtocolError,
    CollimateServerError,
    CollimateSessionGoneError,
    CollimateTransportError,
)
from collimate_rl.wire import CollimateClient
from collimate_rl.wire._core import (
    CallContext,
    RawResponse,
    Request,
    RetryPolicy,
    Send,
    Sleep,
    call,
)

from ._server import Reply, ScriptedServer

MakeClient = Callable[..., CollimateClient]

AT_CAPACITY = Reply(503, {"error": "at capacity", "error_code": "at_capacity"})
CREATED = Reply(201, {"session_id": "s1", "template_id": "py"})
EXEC_OK = Reply(200, {"stdout": "", "exit_code": 0})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RecordingTransport(httpx.BaseTransport):
    """Forwards to a real transport; records each request's timeout, may shrink the read one."""

    def __init__(self, uds: str | None = None, read_timeout: float | None = None) -> None:
        self.inner = httpx.HTTPTransport(uds=uds)
        self.read_timeout = read_timeout
        self.timeouts: list[dict[str, Any]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.timeouts.append(dict(request.extensions["timeout"]))
        if self.read_timeout is not None:
            request.extensions["timeout"] = {
                **request.extensions["timeout"],
                "read": self.read_timeout,
            }
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


# -------------------------------------------------------- non-idempotent posts


def test_503_without_safe_code_on_create_is_not_retried(
    server: ScriptedServer, make_client: MakeClient, sleeps: list[float]
) -> None:
    server.script("POST", "/v1/sessions", Reply(503, {"error": "overloaded"}), CREATED)
    with pytest.raises(CollimateServerError) as info:
        make_client(server).create_session("py")
    assert info.value.status == 503 and info.value.error_code is None
    assert len(server.calls()) == 1 and sleeps == []


def test_at_capacity_is_retried_then_surfaces_typed(
    server: ScriptedServer, make_client: MakeClient, sleeps: list[float]
) -> None:
    server.script("POST", "/v1/sessions", *[AT_CAPACITY] * 4)
    with pytest.raises(CollimateCapacityError) as info:
        make_client(server, retries=3).create_session("py")
    assert info.value.error_code == "at_capacity" and info.value.status == 503
    assert len(server.calls()) == 4 and len(sleeps) == 3


@pytest.mark.parametrize("code", ["at_capacity", "session_bringup_failed", "draining"])
def test_safe_codes_are_retried_for_create_and_exec(
    tcp_server: ScriptedServer, make_client: MakeClient, code: str
) -> None:
    refused = Reply(503, {"error": code, "error_code": code})
    tcp_server.script("POST", "/v1/sessions", refused, CREATED)
    tcp_server.script("POST", "/v1/exec", refused, EXEC_OK)
    client = make_client(tcp_server)
    assert client.create_session("py").session_id == "s1"
    assert client.exec_once("py", command="true").ok
    assert len(tcp_server.calls()) == 4


def test_refused_connection_is_retried_for_a_create(
    make_client: MakeClient, sleeps: list[float]
) -> None:
    client = make_client(base_url=f"http://127.0.0.1:{free_port()}", retries=2)
    with pytest.raises(CollimateTransportError) as info:
        client.create_session("py")
    assert str(info.value).startswith("POST /v1/sessions: ")
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    assert len(sleeps) == 2


def test_missing_socket_counts_as_refused_and_recovers(tmp_path: Any) -> None:
    """A create against a socket that appears during the backoff succeeds, sent once."""
    srv = ScriptedServer("uds")
    srv.script("POST", "/v1/sessions", CREATED)
    started: list[float] = []

    def sleep(seconds: float) -> None:
        started.append(seconds)
        if len(started) == 1:
            srv.start()

    try:
        client = CollimateClient(
            unix_socket=srv.socket_path, sleep=sleep, rng=random.Random(1), retries=3
        )
        with client:
            assert client.create_session("py").session_id == "s1"
        assert len(started) == 1 and len(srv.calls()) == 1
    finally:
        srv.stop()


def test_read_timeout_on_exec_is_not_retried(server: ScriptedServer, sleeps: list[float]) -> None:
    server.script("POST", "/v1/sessions/s1/exec", Reply(200, {"stdout": ""}, delay=0.6), EXEC_OK)
    transport = RecordingTransport(uds=server.socket_path, read_timeout=0.15)
    kwargs = (
        {"base_url": server.url} if server.kind == "tcp" else {"unix_socket": server.socket_path}
    )
    with (
        CollimateClient(**kwargs, transport=transport, sleep=sleeps.append) as client,
        pytest.raises(CollimateTransportError) as info,
    ):
        client.session_exec("s1", command="sleep 1")
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)
    assert len(server.calls()) == 1 and sleeps == []


def test_dropped_connection_after_sending_a_create_is_not_retried(
    server: ScriptedServer, make_client: MakeClient
) -> None:
    server.script("POST", "/v1/sessions", Reply(drop=True), CREATED)
    with pytest.raises(CollimateTransportError):
        make_client(server).create_session("py")
    assert len(server.calls()) == 1


def test_unparseable_2xx_on_a_create_is_not_retried(
    tcp_server: ScriptedServer, make_client: MakeClient
) -> None:
    tcp_server.script("POST", "/v1/sessions", Reply(201, raw=b"{half"), CREATED)
    with pytest.raises(CollimateProtocolError) as info:
        make_client(tcp_server).create_session("py")
    assert info.value.status == 201 and len(tcp_server.calls()) == 1


# ------------------------------------------------------------ idempotent requests


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_retryable_statuses_are_retried_for_get(
    tcp_server: ScriptedServer, make_client: MakeClient, status: int
) -> None:
    tcp_server.script(
        "GET", "/v1/health", Reply(status, {"error": "x"}), Reply(200, {"status": "ok"})
    )
    assert make_client(tcp_server).health().status == "ok"
    assert len(tcp_server.calls()) == 2


def test_410_is_never_retried(server: ScriptedServer, make_client: MakeClient) -> None:
    gone = Reply(410, {"error": "reaped", "error_code": "session_gone"})
    server.script("GET", "/v1/sessions/s1", gone, Reply(200, {"session_id": "s1"}))
    with pytest.raises(CollimateSessionGoneError):
        make_client(server).get_session("s1")
    assert len(server.calls()) == 1


def test_transport_error_on_get_is_retried(server: ScriptedServer, make_client: MakeClient) -> None:
    server.script("GET", "/v1/sessions", Reply(drop=True), Reply(200, []))
    assert make_client(server).list_sessions() == []
    assert len(server.calls()) == 2


def test_unparseable_2xx_on_get_is_retried(
    tcp_server: ScriptedServer, make_client: MakeClient
) -> None:
    tcp_server.script("GET", "/v1/health", Reply(200, raw=b"<html>"), Reply(200, {"status": "ok"}))
    assert make_client(tcp_server).health().status == "ok"


def test_retries_zero_means_one_attempt(
    tcp_server: ScriptedServer, make_client: MakeClient
) -> None:
    tcp_server.script("GET", "/v1/health", *[Reply(503, {"error": "x"})] * 2)
    with pytest.raises(CollimateServerError):
        make_client(tcp_server, retries=0).health()
    assert len(tcp_server.calls()) == 1


def test_budget_bounds_the_real_clients_sleep(
    tcp_server: ScriptedServer, make_client: MakeClient, sleeps: list[float]
) -> None:
    tcp_server.script("GET", "/v1/health", *[Reply(503, {"error": "x"})] * 10)
    with pytest.raises(CollimateServerError):
        make_client(tcp_server, retries=9, backoff=10.0, retry_budget=0.05).health()
    assert sum(sleeps) <= 0.05 + 1e-9
    assert len(tcp_server.calls()) <= 10


def test_exhausted_budget_raises_at_once(
    tcp_server: ScriptedServer, make_client: MakeClient, sleeps: list[float]
) -> None:
    tcp_server.script("GET", "/v1/health", *[Reply(503, {"error": "x"})] * 3)
    with pytest.raises(CollimateServerError):
        make_client(tcp_server, retry_budget=0.0).health()
    assert len(tcp_server.calls()) == 1 and sleeps == []


# -------------------------------------------------------------------- timeouts


@pytest.mark.parametrize(
    "client_timeout, timeout_seconds, expected",
    [(120.0, 30, 120.0), (5.0, 10, 40.0), (100.0, 3600, 3630.0)],
)
def test_exec_socket_timeout(
    server: ScriptedServer, client_timeout: float, timeout_seconds: int, expected: float
) -> None:
    server.script("POST", "/v1/sessions/s1/exec", EXEC_OK)
    server.script("POST", "/v1/exec", EXEC_OK)
    server.script("GET", "/v1/health", Reply(200, {"status": "ok"}))
    transport = RecordingTransport(uds=server.socket_path)
    kwargs = (
        {"base_url": server.url} if server.kind == "tcp" else {"unix_socket": server.socket_path}
    )
    with CollimateClient(**kwargs, timeout=client_timeout, transport=transport) as client:
        client.session_exec("s1", command="true", timeout_seconds=timeout_seconds)
        client.exec_once("py", command="true", timeout_seconds=timeout_seconds)
        client.health()
    assert [t["read"] for t in transport.timeouts] == [expected, expected, client_timeout]


# ------------------------------------------------------- the budget, as a property

outcomes = st.one_of(
    st.sampled_from([429, 500, 502, 503, 504, 410, 404]).map(
        lambda s: RawResponse(s, "x", b'{"error": "e", "error_code": "at_capacity"}')
    ),
    st.just(httpx.ConnectError("refused")),
    st.just(httpx.ReadTimeout("slow")),
)


@settings(max_examples=300, deadline=None)
@given(
    failures=st.lists(outcomes, max_size=12),
    retries=st.integers(0, 8),
    backoff=st.floats(0, 50, allow_nan=False),
    budget=st.floats(0, 5, allow_nan=False),
    idempotent=st.booleans(),
    gateway=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_total_sleep_never_exceeds_the_budget(
    failures: list[Any],
    retries: int,
    backoff: float,
    budget: float,
    idempotent: bool,
    gateway: bool,
    seed: int,
) -> None:
    policy = RetryPolicy(
        retries=retries,
        backoff=backoff,
        retry_budget=budget,
        gateway=gateway,
        rng=random.Random(seed),
    )
    flow = call(CallContext(policy=policy), Request("POST", "/x", idempotent=idempotent))
    queue = list(failures)
    attempts, slept = 0, 0.0
    action = next(flow)
    try:
        while True:
            if isinstance(action, Sleep):
                assert action.seconds > 0
                slept += action.seconds
                action = flow.send(None)
                continue
            assert isinstance(action, Send)
            attempts += 1
            reply = queue.pop(0) if queue else RawResponse(200, "OK", b"{}")
            action = flow.send(reply)
    except (StopIteration, CollimateError):
        pass
    assert slept <= budget + 1e-9
    assert attempts <= retries + 1
