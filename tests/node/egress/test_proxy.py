"""The node-side egress proxy (``EgressGate``) over its unix socket: HTTP, CONNECT, SOCKS5.

The stand-in internet is ``127.0.0.2``/``127.0.0.3`` (see conftest.py); names
resolve only through the settings' overrides, so no DNS query leaves the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.node.egress import NONE, OPEN, EgressPolicy
from collimate_rl.node.egress.entries import IPAddress
from collimate_rl.node.egress.gate import EgressGate
from collimate_rl.node.egress.node_sockets import listening_here, own_listeners
from collimate_rl.node.egress.settings import EgressSettings

pytestmark = pytest.mark.anyio

SETTINGS = EgressSettings.from_flags(
    resolve=[
        "origin.test=127.0.0.2",
        "echo.test=127.0.0.3",
        "github.com=127.0.0.2",
        "*.github.com=127.0.0.2",
        "rebind.test=127.0.0.4",
    ],
    internet=["127.0.0.2/32", "127.0.0.3/32"],
    resolve_only=True,
    connect_timeout=5.0,
)


def never_node(address: IPAddress, port: int) -> bool:
    return False


GateFactory = Callable[..., Any]


@pytest.fixture
async def gate() -> AsyncIterator[GateFactory]:
    made: list[EgressGate] = []
    tmp = Path(tempfile.mkdtemp(prefix="gate-"))

    async def make(raw: dict[str, Any] | EgressPolicy, **kw: Any) -> EgressGate:
        policy = raw if isinstance(raw, EgressPolicy) else EgressPolicy.model_validate(raw)
        kw.setdefault("is_node", never_node)
        g = EgressGate(tmp / f"{len(made)}.net.sock", policy, kw.pop("settings", SETTINGS), **kw)
        await g.start()
        made.append(g)
        return g

    yield make
    for g in made:
        await g.close()
    assert os.listdir(tmp) == []
    os.rmdir(tmp)


async def exchange(g: EgressGate, request: bytes) -> bytes:
    """Send ``request`` through the gate and read until it closes."""
    reader, writer = await asyncio.open_unix_connection(str(g.path))
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


def get(url: str) -> bytes:
    return f"GET {url} HTTP/1.1\r\nHost: ignored\r\nProxy-Connection: keep-alive\r\n\r\n".encode()


async def connect_tunnel(
    g: EgressGate, authority: str
) -> tuple[bytes, asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_unix_connection(str(g.path))
    writer.write(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    return head, reader, writer


async def socks(
    g: EgressGate, host: str, port: int, command: int = 1
) -> tuple[int, asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_unix_connection(str(g.path))
    writer.write(b"\x05\x01\x00")
    assert await asyncio.wait_for(reader.readexactly(2), 10) == b"\x05\x00"
    name = host.encode()
    writer.write(bytes([5, command, 0, 3, len(name)]) + name + struct.pack(">H", port))
    reply = await asyncio.wait_for(reader.readexactly(10), 10)
    assert reply[0] == 5
    return reply[1], reader, writer


async def test_allowed_http_connect_and_socks_reach_the_stand_in_internet(
    gate: GateFactory, origin: tuple[str, int], echo: tuple[str, int]
) -> None:
    g = await gate({"allow": ["origin.test", "echo.test"]})
    body = await exchange(g, get(f"http://origin.test:{origin[1]}/pkg?x=1"))
    assert body.startswith(b"HTTP/1.0 200") and body.endswith(
        f"hello /pkg?x=1 host=origin.test:{origin[1]}".encode()
    )
    head, reader, writer = await connect_tunnel(g, f"echo.test:{echo[1]}")
    assert head.startswith(b"HTTP/1.1 200")
    writer.write(b"through the tunnel")
    assert await reader.readexactly(18) == b"through the tunnel"
    writer.close()
    code, reader, writer = await socks(g, "echo.test", echo[1])
    assert code == 0
    writer.write(b"over socks")
    assert await reader.readexactly(10) == b"over socks"
    writer.close()
    await asyncio.sleep(0.1)
    info = g.info()
    assert info["policy"] == {"mode": "allowlist", "allow": ["origin.test", "echo.test"]}
    assert info["hosts"]["origin.test"]["allowed"] == 1
    assert info["hosts"]["echo.test"]["allowed"] == 2
    assert (
        info["hosts"]["echo.test"]["bytes_out"] >= 28
        and info["hosts"]["echo.test"]["bytes_in"] >= 28
    )
    assert info["denied"] == 0


async def test_a_post_body_goes_up_and_the_answer_comes_down(
    gate: GateFactory, origin: tuple[str, int]
) -> None:
    g = await gate(OPEN)
    payload = b"x" * 100_000
    request = (
        f"POST http://origin.test:{origin[1]}/up HTTP/1.1\r\nHost: origin.test\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    ).encode() + payload
    answer = await exchange(g, request)
    assert answer.endswith(payload)
    assert g.info()["bytes_out"] > len(payload)


async def timed_refusal(coro: Any) -> tuple[Any, float]:
    start = time.monotonic()
    result = await coro
    return result, time.monotonic() - start


@pytest.mark.parametrize(
    ("policy", "url_host", "why"),
    [
        ({"allow": ["echo.test"]}, "origin.test", "no allow entry names it"),
        ({"deny": ["origin.test"]}, "origin.test", "matches the deny entry 'origin.test'"),
        ({"preset": "rl-leakage"}, "github.com", "matches the deny entry 'github.com'"),
        ({"preset": "rl-leakage"}, "raw.github.com", "matches the deny entry '*.github.com'"),
        ({"mode": "none"}, "origin.test", "has no egress"),
        ({"mode": "open"}, "127.0.0.1", "a loopback address"),
        ({"mode": "open"}, "169.254.169.254", "a link-local address"),
        ({"mode": "open"}, "rebind.test", "resolves to 127.0.0.4, a loopback address"),
    ],
)
async def test_refusals_are_immediate_403s_naming_the_policy_and_host(
    gate: GateFactory, origin: tuple[str, int], policy: dict[str, Any], url_host: str, why: str
) -> None:
    g = await gate(policy)
    described = g.policy.describe()
    answer, took = await timed_refusal(exchange(g, get(f"http://{url_host}:{origin[1]}/")))
    assert took < 1.0
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403 Forbidden")
    assert b"X-Collimate-Egress: refused" in head
    text = body.decode()
    assert f"{url_host}:{origin[1]} refused by egress policy {described}" in text and why in text
    (head, _, _), took = await timed_refusal(connect_tunnel(g, f"{url_host}:443"))
    assert head.startswith(b"HTTP/1.1 403") and took < 1.0
    (code, _, writer), took = await timed_refusal(socks(g, url_host, 443))
    writer.close()
    assert code == 2 and took < 1.0  # "connection not allowed by ruleset"
    assert g.info()["hosts"][url_host]["denied"] == 3
    assert g.info()["allowed"] == 0


async def test_an_allowlist_naming_a_loopback_address_reaches_it(
    gate: GateFactory, private_echo: tuple[str, int]
) -> None:
    host, port = private_echo
    assert "loopback" in (await exchange(await gate(OPEN), get(f"http://{host}:{port}/"))).decode()
    g = await gate({"allow": [f"{host}:{port}"]})
    code, reader, writer = await socks(g, host, port)
    assert code == 0
    writer.write(b"ping")
    assert await reader.readexactly(4) == b"ping"
    writer.close()


async def test_the_nodes_own_socket_is_refused_even_when_allowlisted(
    gate: GateFactory, private_echo: tuple[str, int]
) -> None:
    host, port = private_echo  # stands in for the node: the check says it is
    g = await gate({"allow": [host]}, is_node=lambda a, p: (str(a), p) == (host, port))
    answer = await exchange(g, get(f"http://{host}:{port}/v1/health"))
    assert answer.startswith(b"HTTP/1.1 403") and b"node's own listening socket" in answer


def test_the_node_check_finds_this_processs_listening_sockets() -> None:
    with (
        socket.create_server(("127.0.0.5", 0)) as srv,
        socket.create_server(("0.0.0.0", 0)) as anyaddr,
    ):
        port, any_port = srv.getsockname()[1], anyaddr.getsockname()[1]
        assert (ip_address("127.0.0.5"), port) in own_listeners()
        assert listening_here(ip_address("127.0.0.5"), port)
        assert not listening_here(ip_address("127.0.0.6"), port)
        assert listening_here(
            ip_address("127.0.0.9"), any_port
        )  # 0.0.0.0 covers every local address
        assert not listening_here(ip_address("8.8.8.8"), any_port)  # not ours: never probed
    assert not listening_here(ip_address("127.0.0.5"), port)


async def test_upstream_failures_are_immediate_and_typed(
    gate: GateFactory, origin: tuple[str, int]
) -> None:
    closed = socket.create_server(("127.0.0.3", 0))
    dead_port = closed.getsockname()[1]
    closed.close()
    g = await gate(OPEN)
    answer, took = await timed_refusal(exchange(g, get(f"http://echo.test:{dead_port}/")))
    assert answer.startswith(b"HTTP/1.1 502") and b"Connection refused" in answer and took < 1.0
    code, _, writer = await socks(g, "echo.test", dead_port)
    writer.close()
    assert code == 5  # connection refused
    answer = await exchange(g, get("http://unknown.test/"))
    assert answer.startswith(b"HTTP/1.1 502") and b"resolves only" in answer
    assert g.info()["hosts"]["echo.test"]["failed"] == 2


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /relative HTTP/1.1\r\nHost: origin.test\r\n\r\n", b"400"),
        (b"GET https://origin.test/ HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT origin.test HTTP/1.1\r\n\r\n", b"400"),
        (b"NONSENSE\r\n\r\n", b"400"),
        (b"GET http://origin.test/ HTTP/1.1\r\n" + b"X: " + b"a" * 70_000 + b"\r\n\r\n", b"431"),
    ],
)
async def test_malformed_requests_get_a_clear_answer(
    gate: GateFactory, request_bytes: bytes, status: bytes
) -> None:
    answer = await exchange(await gate(OPEN), request_bytes)
    assert answer.startswith(b"HTTP/1.1 " + status)


async def test_socks_refuses_what_it_does_not_support(
    gate: GateFactory, echo: tuple[str, int]
) -> None:
    g = await gate(OPEN)
    code, _, writer = await socks(g, "echo.test", echo[1], command=2)  # BIND
    writer.close()
    assert code == 7
    reader, writer = await asyncio.open_unix_connection(str(g.path))
    writer.write(b"\x05\x01\x02")  # only username/password offered
    assert await reader.read() == b"\x05\xff"
    writer.close()


async def test_closing_the_gate_drops_its_connections(
    gate: GateFactory, echo: tuple[str, int]
) -> None:
    g = await gate(OPEN)
    code, reader, writer = await socks(g, "echo.test", echo[1])
    assert code == 0 and g.active == 1
    await g.close()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    assert not g.path.exists()
    writer.close()


async def test_a_session_cannot_hold_more_connections_than_the_cap(
    gate: GateFactory, echo: tuple[str, int]
) -> None:
    settings = EgressSettings(
        resolve=SETTINGS.resolve, internet=SETTINGS.internet, max_connections=2
    )
    g = await gate(OPEN, settings=settings)
    held = [await socks(g, "echo.test", echo[1]) for _ in range(2)]
    reader, writer = await asyncio.open_unix_connection(str(g.path))
    writer.write(b"\x05\x01\x00")
    with contextlib.suppress(ConnectionResetError):  # closed at once, unanswered
        assert await asyncio.wait_for(reader.read(), 5) == b""
    for _, _, w in held:
        w.close()
    writer.close()


async def test_a_none_gate_answers_everything_with_a_refusal(gate: GateFactory) -> None:
    answer = await exchange(await gate(NONE), get("http://origin.test/"))
    assert answer.startswith(b"HTTP/1.1 403")
