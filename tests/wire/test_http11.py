"""The daemon clients' small HTTP/1.1 client: parsing, connection reuse, and failures.

Everything else in ``tests/wire`` (a scripted server over TCP and a unix socket, the retry
rules, timeouts, dropped connections) runs through it too; these tests attack what is its
own: a response split anywhere, a server that closes idle connections, a fork.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time

import anyio
import h11
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collimate_rl.wire import AsyncCollimateClient, CollimateClient
from collimate_rl.wire._http11 import Exchange, NodeHTTP


def _chunked(body: bytes, sizes: list[int]) -> bytes:
    out, at = b"", 0
    for size in sizes:
        piece = body[at : at + size]
        if not piece:
            break
        out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        at += len(piece)
    if at < len(body):
        out += f"{len(body) - at:x};ext=1\r\n".encode() + body[at:] + b"\r\n"
    return out + b"0\r\n\r\n"


def _exchange(method: str = "GET") -> Exchange:
    return Exchange(h11.Connection(h11.CLIENT), method, "/v1/x", {"Host": "node"}, None)


def _feed_in_pieces(data: bytes, cuts: list[int]) -> Exchange:
    parser = _exchange()
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    done = False
    for start, stop in itertools.pairwise(points):
        assert not done, "complete before its last byte"
        done = parser.feed(data[start:stop])
    assert done
    return parser


@given(
    body=st.binary(max_size=3000),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12),
    sizes=st.lists(st.integers(min_value=1, max_value=700), max_size=8),
)
def test_a_response_split_anywhere_reads_the_same(
    body: bytes, cuts: list[int], sizes: list[int]
) -> None:
    sized = b"HTTP/1.1 201 Created\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked(body, sizes)
    for data in (sized, chunked):
        parser = _feed_in_pieces(data, cuts)
        assert parser.body == body and parser.reusable


@pytest.mark.parametrize(
    ("head", "keep_alive"),
    [
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.1 204 No Content\r\n\r\n", True),
    ],
)
def test_keep_alive_follows_the_response(head: bytes, keep_alive: bool) -> None:
    parser = _exchange()
    assert parser.feed(head)
    assert parser.reusable is keep_alive and parser.body == b""


def test_a_body_without_a_length_runs_to_the_end_of_the_connection() -> None:
    parser = _exchange()
    assert not parser.feed(b'HTTP/1.1 200 OK\r\n\r\n{"a"')
    assert not parser.feed(b": 1}")
    assert parser.feed(b"")  # the connection's end
    assert parser.body == b'{"a": 1}' and not parser.reusable


def test_a_head_response_has_no_body_whatever_its_length_says() -> None:
    parser = _exchange("HEAD")
    assert parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
    assert parser.body == b"" and parser.reusable


@pytest.mark.parametrize(
    "data",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_an_unreadable_response_is_a_protocol_error(data: bytes) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        _exchange().feed(data)


def test_the_request_carries_its_length_and_query() -> None:
    endpoint = NodeHTTP("http://127.0.0.1:9", unix_socket=None, headers={"X-A": "1"})._endpoint
    conn = h11.Connection(h11.CLIENT)
    data = endpoint.exchange(conn, "POST", "/v1/x", b"{}", {"a": "b c"}).request
    assert data.startswith(b"POST /v1/x?a=b+c HTTP/1.1\r\nHost: 127.0.0.1:9\r\nX-A: 1\r\n")
    assert data.endswith(b"Content-Length: 2\r\n\r\n{}")


class _CountingServer:
    """Answers ``per_connection`` requests on each connection, then closes it.

    With ``announce`` the last answer says ``Connection: close``; without, the server just
    closes, as one whose idle keep-alive ran out does.
    """

    def __init__(self, per_connection: int, announce: bool = True) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.per_connection = per_connection
        self.announce = announce
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            for served in range(1, self.per_connection + 1):
                data = b""
                while b"\r\n\r\n" not in data:
                    more = conn.recv(4096)
                    if not more:
                        return
                    data += more
                body = b'{"status": "ok", "templates": [], "version": "x"}'
                close = b"Connection: close\r\n" if self.announce else b""
                last = served == self.per_connection
                head = b"HTTP/1.1 200 OK\r\n" + (close if last else b"")
                conn.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def close(self) -> None:
        self.sock.close()


def test_a_connection_the_server_closes_is_not_reused() -> None:
    server = _CountingServer(per_connection=1)
    try:
        with CollimateClient(server.url, retries=0) as client:
            for _ in range(4):
                assert client.health().status == "ok"
        assert server.connections == 4
    finally:
        server.close()


def test_a_connection_that_went_idle_and_closed_is_not_reused() -> None:
    server = _CountingServer(per_connection=1, announce=False)
    try:
        with CollimateClient(server.url, retries=0, timeout=30) as client:
            for _ in range(3):
                assert client.health().status == "ok"
                time.sleep(0.2)  # the server's close arrives while the connection is idle
        assert server.connections == 3
    finally:
        server.close()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_async_client_keeps_its_connections_on_either_event_loop(backend: str) -> None:
    server = _CountingServer(per_connection=2)

    async def run() -> list[str]:
        async with AsyncCollimateClient(server.url, retries=0) as client:
            return [(await client.health()).status for _ in range(4)]

    try:
        assert anyio.run(run, backend=backend) == ["ok"] * 4
        assert server.connections == 2  # two requests on each, then the server's close
    finally:
        server.close()


def test_a_forked_child_dials_its_own_connection() -> None:
    server = _CountingServer(per_connection=100)
    try:
        with CollimateClient(server.url, retries=0) as client:
            assert client.health().status == "ok"
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                code = 0 if client.health().status == "ok" else 1
                os._exit(code)
            assert os.waitpid(pid, 0)[1] == 0
            assert client.health().status == "ok"  # still the parent's first connection
        assert server.connections == 2
    finally:
        server.close()


def test_a_refused_connection_is_a_connect_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    http = NodeHTTP(f"http://127.0.0.1:{port}", unix_socket=None, headers={})
    with pytest.raises(httpx.ConnectError) as caught:
        http.request("GET", "/v1/health", content=None, params=None, timeout=5)
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)


def test_an_idle_socket_is_checked_without_waiting_on_its_timeout() -> None:
    from collimate_rl.wire._http11 import _still_open

    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.settimeout(30.0)  # as a request leaves it: a peek must not wait this out
        assert _still_open(ours)
        theirs.sendall(b"stray")
        assert not _still_open(ours)
    ours, theirs = socket.socketpair()
    with ours:
        theirs.close()
        assert not _still_open(ours)
