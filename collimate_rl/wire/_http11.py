"""A small HTTP/1.1 client for a daemon on a plain connection: a unix socket or ``http://``.

httpx is general (TLS, proxies, cookies, redirects, auth flows, its own request and URL
models) and costs a daemon client ~1 ms of CPU per request on our 2-core machines; a node
on the same machine needs none of it. This keeps just what a daemon needs: pooled keep-alive
connections, each with its own `h11 <https://h11.readthedocs.io>`_ state machine (the
sans-I/O HTTP/1.1 parser under httpcore and uvicorn, installed with httpx), which encodes the
requests and reads the responses: bodies by ``Content-Length``, chunked or to the end of the
connection, and whether the connection can be reused. Its failures are httpx's exception
types (``ConnectError``, ``ReadTimeout``, ``RemoteProtocolError``, ...), so the wire core's
retry rules treat the two transports alike. The sync and async clients share
:class:`Exchange`; only their I/O differs.

>>> exchange = Exchange(h11.Connection(h11.CLIENT), "GET", "/v1/health", {"Host": "n"}, None)
>>> exchange.request
b'GET /v1/health HTTP/1.1\\r\\nHost: n\\r\\n\\r\\n'
>>> exchange.feed(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\n{}")
True
>>> exchange.status, exchange.reason, exchange.body, exchange.reusable
(200, 'OK', b'{}', True)
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Mapping
from urllib.parse import urlencode, urlsplit

import anyio
import anyio.abc
import h11
import httpx

from collimate_rl.wire._core import RawResponse

__all__ = ["AsyncNodeHTTP", "Exchange", "NodeHTTP"]

#: An idle connection older than this is closed rather than reused (uvicorn's default
#: keep-alive is 5 s; our node keeps them 30 s).
IDLE_SECONDS = 4.0
_MAX_HEAD = 64 << 10
_CHUNK = 64 << 10


class Exchange:
    """One request and its response on a connection's h11 state machine (no I/O).

    ``request`` is the bytes to send; :meth:`feed` takes what the connection reads (``b""``
    at its end) and is true once the response is whole. Raises ``httpx.RemoteProtocolError``
    for a response it cannot read.
    """

    def __init__(
        self,
        conn: h11.Connection,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes | None,
    ) -> None:
        self._conn = conn
        fields = list(headers.items())
        if body is not None:
            fields.append(("Content-Length", str(len(body))))
        try:
            request = conn.send(h11.Request(method=method, target=target, headers=fields))
            if body:
                request += conn.send(h11.Data(data=body))
            request += conn.send(h11.EndOfMessage())
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc)) from exc
        self.request: bytes = request
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self.body = b""
        self._ended = False  # the connection's end was fed

    def feed(self, data: bytes) -> bool:
        self._ended = self._ended or not data
        self._conn.receive_data(data)
        try:
            while True:
                event = self._conn.next_event()
                if event is h11.NEED_DATA:
                    return False
                if isinstance(event, h11.Response):
                    self.status = event.status_code
                    self.reason = event.reason.decode("latin-1")
                    self.headers = {
                        k.decode("latin-1"): v.decode("latin-1") for k, v in event.headers
                    }
                elif isinstance(event, h11.Data):
                    self._body.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    self.body = b"".join(self._body)
                    return True
                elif isinstance(event, h11.ConnectionClosed):
                    raise h11.RemoteProtocolError("the connection closed mid-response")
                # (an InformationalResponse, 1xx: the real one follows)
        except h11.RemoteProtocolError as exc:
            raise httpx.RemoteProtocolError(str(exc) or "unreadable response") from exc

    @property
    def request_id(self) -> str | None:
        """The answer's ``X-Request-Id`` (our node's; a real daemon sends none)."""
        return self.headers.get("x-request-id")

    @property
    def reusable(self) -> bool:
        """Whether the connection can carry the next request (and is made ready for it)."""
        conn = self._conn
        if not self._ended and conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
            return True
        return False


def _new_connection() -> h11.Connection:
    return h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)


class _Endpoint:
    """Where requests go and what every request carries."""

    def __init__(self, base: str, unix_socket: str | None, headers: Mapping[str, str]) -> None:
        url = urlsplit(base)
        self.unix_socket = unix_socket
        self.host = url.hostname or "localhost"
        self.port = url.port or 80
        host_header = url.netloc or "localhost"
        self.headers = {"Host": host_header, **headers}

    def exchange(
        self,
        conn: h11.Connection,
        method: str,
        path: str,
        content: bytes | None,
        params: Mapping[str, str] | None,
    ) -> Exchange:
        target = f"{path}?{urlencode(dict(params))}" if params else path
        return Exchange(conn, method, target, self.headers, content)


class NodeHTTP:
    """The blocking client: a pool of keep-alive sockets, safe to share between threads."""

    def __init__(self, base: str, *, unix_socket: str | None, headers: Mapping[str, str]) -> None:
        self._endpoint = _Endpoint(base, unix_socket, headers)
        self._idle: list[tuple[socket.socket, h11.Connection, float]] = []
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()  # a forked child must not share its parent's connections

    def request(
        self,
        method: str,
        path: str,
        *,
        content: bytes | None,
        params: Mapping[str, str] | None,
        timeout: float | None,
    ) -> RawResponse:
        sock, conn = self._take() or (self._connect(timeout), _new_connection())
        exchange = self._endpoint.exchange(conn, method, path, content, params)
        keep = False
        try:
            sock.settimeout(timeout)
            unsent: OSError | None = None
            try:
                sock.sendall(exchange.request)
            except TimeoutError as exc:
                raise httpx.WriteTimeout(str(exc) or "write timed out") from exc
            except OSError as exc:  # the server may have answered and closed (a 413)
                unsent = exc
            while True:
                try:
                    chunk = sock.recv(_CHUNK)
                except TimeoutError as exc:
                    raise httpx.ReadTimeout(str(exc) or "read timed out") from exc
                except OSError as exc:
                    raise _lost(unsent, exc) from (unsent or exc)
                if not chunk:
                    _read_to_the_end(exchange, unsent)
                    break
                if exchange.feed(chunk):
                    break
            keep = unsent is None and exchange.reusable
            return RawResponse(exchange.status, exchange.reason, exchange.body, exchange.request_id)
        finally:
            if keep:
                self._give_back(sock, conn)
            else:
                sock.close()

    def _connect(self, timeout: float | None) -> socket.socket:
        ep = self._endpoint
        try:
            if ep.unix_socket is not None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.settimeout(timeout)
                    sock.connect(ep.unix_socket)
                except BaseException:
                    sock.close()
                    raise
                return sock
            sock = socket.create_connection((ep.host, ep.port), timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc) or "connect timed out") from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc

    def _take(self) -> tuple[socket.socket, h11.Connection] | None:
        """An idle connection the server has not closed, or ``None``."""
        if self._pid != os.getpid():  # forked: the parent's connections stay the parent's
            with self._lock:
                inherited, self._idle, self._pid = self._idle, [], os.getpid()
            for sock, _, _ in inherited:
                sock.close()  # our copy of the descriptor only (no shutdown)
        while True:
            with self._lock:
                if not self._idle:
                    return None
                sock, conn, since = self._idle.pop()
            if time.monotonic() - since < IDLE_SECONDS and _still_open(sock):
                return sock, conn
            sock.close()

    def _give_back(self, sock: socket.socket, conn: h11.Connection) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append((sock, conn, time.monotonic()))
                return
        sock.close()

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` ran (as ``httpx.Client.is_closed``)."""
        return self._closed

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for sock, _, _ in idle:
            sock.close()


def _read_to_the_end(exchange: Exchange, unsent: Exception | None) -> None:
    """The connection ended: the response is whole only if its body ran to the end."""
    try:
        if exchange.feed(b""):
            return
    except httpx.RemoteProtocolError:
        pass
    raise _lost(unsent, None) from unsent


def _still_open(sock: socket.socket) -> bool:
    """No end-of-file (nor stray bytes) waiting on an idle socket."""
    try:
        sock.setblocking(False)  # (with a timeout set, Python would wait out MSG_DONTWAIT)
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True  # nothing to read: the server has not closed it
    except OSError:
        return False
    return False


def _stream_still_open(stream: anyio.abc.SocketStream) -> bool:
    """:func:`_still_open` for an async stream (its socket object is the event loop's own
    wrapper: a duplicate descriptor of the same socket is peeked)."""
    raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    try:
        probe = socket.fromfd(raw.fileno(), raw.family, raw.type)
    except OSError:
        return False
    with probe:
        return _still_open(probe)


def _lost(unsent: Exception | None, read_error: Exception | None) -> httpx.TransportError:
    """The error for a reply that never came: the request's, if it could not be sent whole."""
    if unsent is not None:
        return httpx.WriteError(str(unsent) or type(unsent).__name__)
    if read_error is not None:
        return httpx.ReadError(str(read_error) or type(read_error).__name__)
    return httpx.RemoteProtocolError("the server closed the connection without a reply")


class AsyncNodeHTTP:
    """The async twin of :class:`NodeHTTP` (on anyio: asyncio or trio, as httpx is)."""

    def __init__(self, base: str, *, unix_socket: str | None, headers: Mapping[str, str]) -> None:
        self._endpoint = _Endpoint(base, unix_socket, headers)
        self._idle: list[tuple[anyio.abc.SocketStream, h11.Connection, float]] = []
        self._closed = False

    async def request(
        self,
        method: str,
        path: str,
        *,
        content: bytes | None,
        params: Mapping[str, str] | None,
        timeout: float | None,  # noqa: ASYNC109 (per read and write, as httpx's timeouts)
    ) -> RawResponse:
        taken = await self._take()
        stream, conn = taken or (await self._connect(timeout), _new_connection())
        exchange = self._endpoint.exchange(conn, method, path, content, params)
        keep = False
        try:
            unsent: Exception | None = None
            try:
                with anyio.fail_after(timeout):
                    await stream.send(exchange.request)
            except TimeoutError as exc:
                raise httpx.WriteTimeout("write timed out") from exc
            except (OSError, anyio.BrokenResourceError) as exc:  # answered and closed (a 413)?
                unsent = exc
            while True:
                try:
                    with anyio.fail_after(timeout):
                        chunk = await stream.receive(_CHUNK)
                except TimeoutError as exc:
                    raise httpx.ReadTimeout("read timed out") from exc
                except anyio.EndOfStream:
                    _read_to_the_end(exchange, unsent)
                    break
                except (OSError, anyio.BrokenResourceError) as exc:
                    raise _lost(unsent, exc) from (unsent or exc)
                if exchange.feed(chunk):
                    break
            keep = unsent is None and exchange.reusable
            return RawResponse(exchange.status, exchange.reason, exchange.body, exchange.request_id)
        finally:
            if keep and not self._closed:
                self._idle.append((stream, conn, time.monotonic()))
            else:
                with anyio.CancelScope(shield=True):  # (also when the caller was cancelled)
                    await stream.aclose()

    async def _connect(self, timeout: float | None) -> anyio.abc.SocketStream:  # noqa: ASYNC109
        ep = self._endpoint
        try:
            with anyio.fail_after(timeout):
                if ep.unix_socket is not None:
                    return await anyio.connect_unix(ep.unix_socket)
                return await anyio.connect_tcp(ep.host, ep.port)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout("connect timed out") from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc

    async def _take(self) -> tuple[anyio.abc.SocketStream, h11.Connection] | None:
        """An idle stream the server has not closed, or ``None``."""
        while self._idle:
            stream, conn, since = self._idle.pop()
            if time.monotonic() - since < IDLE_SECONDS and _stream_still_open(stream):
                return stream, conn
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await stream.aclose()
        return None

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`aclose` ran (as ``httpx.AsyncClient.is_closed``)."""
        return self._closed

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for stream, _, _ in idle:
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await stream.aclose()
