"""The HTTP side of the egress proxy: ``CONNECT host:port`` tunnels and plain ``http://`` requests.

One request per client connection: a ``CONNECT`` becomes a byte tunnel (TLS
passes through untouched); a plain request is forwarded in origin form with
``Connection: close`` and the response streamed back until the server closes.
A refusal is answered at once with ``403`` and a body naming the policy and
the host; a failed upstream with ``502`` (``504`` on a connect timeout).

>>> parse_request(b"CONNECT pypi.org:443 HTTP/1.1\\r\\nHost: pypi.org:443\\r\\n\\r\\n").target
'pypi.org:443'
>>> split_authority("[::1]:8443")
('::1', 8443)
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

import h11

from collimate_rl.node.egress.decide import Refused, Target
from collimate_rl.node.egress.upstream import Opener, Upstream, UpstreamError
from collimate_rl.node.runtime.bridge import pump

__all__ = [
    "BadRequest",
    "HttpRequest",
    "parse_request",
    "reply",
    "serve_http",
    "split_authority",
]

#: How long a client may take to send its request head (seconds).
HEAD_TIMEOUT: Final = 30.0
#: Headers a proxy consumes or must not forward (RFC 9110 section 7.6.1).
_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    }
)
_MAX_HEADERS: Final = 128


class BadRequest(ValueError):
    """The client's request cannot be proxied (answered with 400)."""


@dataclass(frozen=True)
class HttpRequest:
    """A parsed request head."""

    method: str
    target: str
    version: str
    headers: tuple[tuple[str, str], ...]


def parse_request(head: bytes) -> HttpRequest:
    """Parse a request head (ending in an empty line); :class:`BadRequest` if malformed.

    h11 (the sans-I/O HTTP/1.1 parser under uvicorn and httpcore) reads it, in the server's
    role: the request line, the header fields and their syntax as RFC 9112 has them. Only
    the head is given to it; a body is relayed as the client sends it.
    """
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=len(head) + 1)
    conn.receive_data(head)
    try:
        event = conn.next_event()
    except h11.RemoteProtocolError as exc:
        raise BadRequest(f"malformed request head: {exc}") from None
    if not isinstance(event, h11.Request):  # (the head ends in an empty line: never more data)
        raise BadRequest("incomplete request head")
    headers = tuple(
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, value in event.headers.raw_items()
    )
    if len(headers) > _MAX_HEADERS:
        raise BadRequest(f"more than {_MAX_HEADERS} headers")
    return HttpRequest(
        event.method.decode("latin-1").upper(),
        event.target.decode("latin-1"),
        "HTTP/" + event.http_version.decode("latin-1"),
        headers,
    )


def split_authority(authority: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) as ``(host, port)``; :class:`BadRequest` without a port."""
    host, sep, port = authority.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise BadRequest(f"expected host:port, got {authority[:200]!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def reply(writer: asyncio.StreamWriter, status: int, reason: str, message: str) -> None:
    """Write a complete ``text/plain`` response that closes the connection."""
    body = (message.rstrip("\n") + "\n").encode("utf-8", "replace")
    kind = "refused" if status == 403 else "error"
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"X-Collimate-Egress: {kind}\r\n"
        "Connection: close\r\n\r\n"
    )
    writer.write(head.encode("latin-1") + body)


def _forwarded_head(request: HttpRequest, path: str, authority: str) -> bytes:
    # The Host header is the checked URL's authority, whatever the client sent
    # (RFC 9112 section 3.2.2): a server hosting several names must not be asked
    # for one the policy never saw.
    lines = [f"{request.method} {path} HTTP/1.1", f"Host: {authority}"]
    for name, value in request.headers:
        low = name.lower()
        if low in _HOP_BY_HOP or low == "host":
            continue
        lines.append(f"{name}: {value}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _plain_target(request: HttpRequest) -> tuple[Target, str, str]:
    """``(target, origin-form path, authority)`` of an absolute ``http://`` request."""
    url = urlsplit(request.target)
    if url.scheme == "https":
        raise BadRequest("send https:// requests through CONNECT (set HTTPS_PROXY)")
    if url.scheme != "http" or not url.hostname:
        raise BadRequest(
            f"this is a forward proxy: send an absolute http:// URL, not {request.target[:200]!r}"
        )
    try:
        port = url.port or 80
    except ValueError as exc:
        raise BadRequest(f"bad port in {request.target[:200]!r}") from exc
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    return Target.parse(url.hostname, port), path, url.netloc.rpartition("@")[2]


async def _tunnel(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, up: Upstream) -> None:
    await asyncio.gather(
        pump(reader, up.writer, up.counters.add_out),
        pump(up.reader, writer, up.counters.add_in),
        return_exceptions=True,
    )


async def _forward(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, up: Upstream
) -> None:
    # The request body (if any) goes up while the response comes down; the
    # exchange is over when the server closes (we asked for Connection: close).
    upload = asyncio.ensure_future(pump(reader, up.writer, up.counters.add_out))
    try:
        await pump(up.reader, writer, up.counters.add_in)
    finally:
        upload.cancel()
        with contextlib.suppress(BaseException):
            await upload


async def serve_http(
    first: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, opener: Opener
) -> None:
    """Serve one proxied HTTP request whose first byte was ``first``."""
    try:
        head = first + await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
    except asyncio.LimitOverrunError:
        reply(
            writer,
            431,
            "Request Header Fields Too Large",
            "collimate egress: request head too large",
        )
        return
    try:
        request = parse_request(head)
        if request.method == "CONNECT":
            target = Target.parse(*split_authority(request.target))
            path = authority = ""
        else:
            target, path, authority = _plain_target(request)
    except ValueError as exc:
        reply(writer, 400, "Bad Request", f"collimate egress: {exc}")
        return
    try:
        up = await opener.open(target)
    except Refused as exc:
        reply(writer, 403, "Forbidden", f"collimate egress: {exc}")
        return
    except UpstreamError as exc:
        status, reason = (504, "Gateway Timeout") if exc.timed_out else (502, "Bad Gateway")
        reply(writer, status, reason, f"collimate egress: {exc}")
        return
    try:
        if request.method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await _tunnel(reader, writer, up)
        else:
            forwarded = _forwarded_head(request, path, authority)
            up.counters.add_out(len(forwarded))
            up.writer.write(forwarded)
            await _forward(reader, writer, up)
    finally:
        up.writer.close()
