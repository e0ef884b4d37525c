"""A small HTTP/1.1 client for a daemon on a plain connection: a unix socket or ``http://``.

httpx is general (TLS, proxies, cookies, redirects, auth flows, its own request and URL
models) and costs a daemon client ~1 ms of CPU per request on our 2-core machines; a node
on the same machine needs none of it. This speaks just the HTTP a daemon answers with:
pooled keep-alive connections, bodies by ``Content-Length`` or chunked. Its failures are
httpx's exception types (``ConnectError``, ``ReadTimeout``, ...), so the wire core's retry
rules treat the two transports alike. The sync and async clients share the request
encoding and the response parser; only their I/O differs.

>>> parser = ResponseParser()
>>> parser.feed(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\n{}")
True
>>> parser.status, parser.reason, parser.body, parser.keep_alive
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
import httpx

from collimate_rl.wire._core import RawResponse

__all__ = ["AsyncNodeHTTP", "NodeHTTP", "ResponseParser", "encode_request"]

#: An idle connection older than this is closed rather than reused (uvicorn's default
#: keep-alive is 5 s; our node keeps them 30 s).
IDLE_SECONDS = 4.0
_MAX_HEAD = 64 << 10
_CHUNK = 64 << 10


def encode_request(
    method: str, target: str, headers: Mapping[str, str], body: bytes | None
) -> bytes:
    """One request's bytes: the request line, ``headers``, ``Content-Length``, the body.

    >>> encode_request("GET", "/v1/health", {"Host": "localhost"}, None)
    b'GET /v1/health HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n'
    """
    lines = [f"{method} {target} HTTP/1.1"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body if body else head


class ResponseParser:
    """Reads one response from the bytes fed to it (``feed`` is true once it is whole).

    Raises ``httpx.RemoteProtocolError`` for a response it cannot read.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._length: int | None = None  # of the body; None: chunked
        self._chunked = False
        self._chunks = bytearray()
        self._chunk_at = 0  # where the next chunk's size line starts
        self._body_at = -1
        self.status = 0
        self.reason = ""
        self.keep_alive = True
        self.body = b""
        self.request_id: str | None = None

    def feed(self, data: bytes) -> bool:
        self._buffer += data
        if self._body_at < 0:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > _MAX_HEAD:
                    raise httpx.RemoteProtocolError("response head too long")
                return False
            self._read_head(bytes(self._buffer[:end]).decode("latin-1"))
            self._body_at = self._chunk_at = end + 4
        if self._chunked:
            return self._read_chunks()
        assert self._length is not None
        if len(self._buffer) - self._body_at < self._length:
            return False
        self.body = bytes(self._buffer[self._body_at : self._body_at + self._length])
        return True

    def _read_head(self, head: str) -> None:
        status_line, *header_lines = head.split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise httpx.RemoteProtocolError(f"not an HTTP/1.1 response: {status_line[:80]!r}")
        self.status = int(parts[1])
        self.reason = parts[2] if len(parts) > 2 else ""
        fields: dict[str, str] = {}
        for line in header_lines:
            name, sep, value = line.partition(":")
            if not sep:
                raise httpx.RemoteProtocolError(f"bad response header: {line[:80]!r}")
            fields[name.strip().lower()] = value.strip()
        self.request_id = fields.get("x-request-id")
        connection = fields.get("connection", "").lower()
        self.keep_alive = parts[0] == "HTTP/1.1" and connection != "close"
        if "chunked" in fields.get("transfer-encoding", "").lower():
            self._chunked = True
        elif "content-length" in fields and fields["content-length"].isdigit():
            self._length = int(fields["content-length"])
        elif self.status in (204, 304) or 100 <= self.status < 200:
            self._length = 0
        else:  # a body to the end of the connection: no daemon answers so
            raise httpx.RemoteProtocolError("a response without a length")

    def _read_chunks(self) -> bool:
        """Take the whole chunks buffered so far (where the last call stopped)."""
        while True:
            end = self._buffer.find(b"\r\n", self._chunk_at)
            if end < 0:
                return False
            size_text = bytes(self._buffer[self._chunk_at : end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise httpx.RemoteProtocolError("bad chunk size") from None
            if size == 0:  # the last chunk, then (no trailers from a daemon) a blank line
                if self._buffer.find(b"\r\n", end + 2) < 0:
                    return False
                self.body = bytes(self._chunks)
                return True
            if len(self._buffer) < end + 2 + size + 2:
                return False
            self._chunks += self._buffer[end + 2 : end + 2 + size]
            self._chunk_at = end + 2 + size + 2


class _Endpoint:
    """Where requests go and what every request carries."""

    def __init__(self, base: str, unix_socket: str | None, headers: Mapping[str, str]) -> None:
        url = urlsplit(base)
        self.unix_socket = unix_socket
        self.host = url.hostname or "localhost"
        self.port = url.port or 80
        host_header = url.netloc or "localhost"
        self.headers = {"Host": host_header, **headers}

    def request_bytes(
        self, method: str, path: str, content: bytes | None, params: Mapping[str, str] | None
    ) -> bytes:
        target = f"{path}?{urlencode(dict(params))}" if params else path
        return encode_request(method, target, self.headers, content)


class NodeHTTP:
    """The blocking client: a pool of keep-alive sockets, safe to share between threads."""

    def __init__(self, base: str, *, unix_socket: str | None, headers: Mapping[str, str]) -> None:
        self._endpoint = _Endpoint(base, unix_socket, headers)
        self._idle: list[tuple[socket.socket, float]] = []
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
        data = self._endpoint.request_bytes(method, path, content, params)
        sock = self._take() or self._connect(timeout)
        keep = False
        try:
            sock.settimeout(timeout)
            unsent: OSError | None = None
            try:
                sock.sendall(data)
            except TimeoutError as exc:
                raise httpx.WriteTimeout(str(exc) or "write timed out") from exc
            except OSError as exc:  # the server may have answered and closed (a 413)
                unsent = exc
            parser = ResponseParser()
            while True:
                try:
                    chunk = sock.recv(_CHUNK)
                except TimeoutError as exc:
                    raise httpx.ReadTimeout(str(exc) or "read timed out") from exc
                except OSError as exc:
                    raise _lost(unsent, exc) from (unsent or exc)
                if not chunk:
                    raise _lost(unsent, None) from unsent
                if parser.feed(chunk):
                    break
            keep = parser.keep_alive and unsent is None
            return RawResponse(parser.status, parser.reason, parser.body, parser.request_id)
        finally:
            if keep:
                self._give_back(sock)
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

    def _take(self) -> socket.socket | None:
        """An idle socket the server has not closed, or ``None``."""
        if self._pid != os.getpid():  # forked: the parent's connections stay the parent's
            with self._lock:
                inherited, self._idle, self._pid = self._idle, [], os.getpid()
            for sock, _ in inherited:
                sock.close()  # our copy of the descriptor only (no shutdown)
        while True:
            with self._lock:
                if not self._idle:
                    return None
                sock, since = self._idle.pop()
            if time.monotonic() - since < IDLE_SECONDS and _still_open(sock):
                return sock
            sock.close()

    def _give_back(self, sock: socket.socket) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append((sock, time.monotonic()))
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
        for sock, _ in idle:
            sock.close()


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
        self._idle: list[tuple[anyio.abc.SocketStream, float]] = []
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
        data = self._endpoint.request_bytes(method, path, content, params)
        stream = await self._take() or await self._connect(timeout)
        keep = False
        try:
            unsent: Exception | None = None
            try:
                with anyio.fail_after(timeout):
                    await stream.send(data)
            except TimeoutError as exc:
                raise httpx.WriteTimeout("write timed out") from exc
            except (OSError, anyio.BrokenResourceError) as exc:  # answered and closed (a 413)?
                unsent = exc
            parser = ResponseParser()
            while True:
                try:
                    with anyio.fail_after(timeout):
                        chunk = await stream.receive(_CHUNK)
                except TimeoutError as exc:
                    raise httpx.ReadTimeout("read timed out") from exc
                except anyio.EndOfStream:
                    raise _lost(unsent, None) from unsent
                except (OSError, anyio.BrokenResourceError) as exc:
                    raise _lost(unsent, exc) from (unsent or exc)
                if parser.feed(chunk):
                    break
            keep = parser.keep_alive and unsent is None
            return RawResponse(parser.status, parser.reason, parser.body, parser.request_id)
        finally:
            if keep and not self._closed:
                self._idle.append((stream, time.monotonic()))
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

    async def _take(self) -> anyio.abc.SocketStream | None:
        """An idle stream the server has not closed, or ``None``."""
        while self._idle:
            stream, since = self._idle.pop()
            if time.monotonic() - since < IDLE_SECONDS and _stream_still_open(stream):
                return stream
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
        for stream, _ in idle:
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await stream.aclose()
