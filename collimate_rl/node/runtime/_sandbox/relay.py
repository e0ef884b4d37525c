"""A single-threaded byte relay: accept on listening sockets, dial a peer, pump both ways.

Stdlib only (it runs inside the sandbox). Two processes of a session use it:

* the service keeper K (``service.py``): unix sockets in the host-shared
  folder -> ``127.0.0.1:<port>`` inside the session (the node's bridges
  reach a session's server this way);
* the egress relay R (``egress_relay.py``): ``127.0.0.1:3128``/``:1080``
  inside the session -> the node's per-session egress gate (a unix socket).

A :class:`Relay` owns a selector; its owner registers the listeners, calls
:meth:`Relay.handle` for every event whose data is one of the relay's
(``"accept"``, ``"connect"``, ``"io"``) and may register events of its own.
Half-closes are passed on; a side that stops reading is not read past
:data:`HIGH_WATER` bytes; a dial that fails closes the accepted connection
at once (the client sees the connection end, never a hang).

>>> relay = Relay({}, lambda key: (socket.socket(), 0))
>>> relay.handle("accept", "no such listener", 0) if False else relay.handle("other", None, 0)
False
"""

# ruff: noqa: SIM105
from __future__ import annotations

import errno
import selectors
import socket
from collections.abc import Callable, Hashable, Mapping
from typing import Any

#: Bytes read per call.
CHUNK = 65536
#: Stop reading a side while this much waits to be written to the other.
HIGH_WATER = 1 << 20

#: ``dial(key)`` returns a non-blocking socket whose connect was started and
#: the ``connect_ex`` result (0 or ``EINPROGRESS``; anything else: failed).
Dial = Callable[[Any], "tuple[socket.socket, int]"]


def loopback_up() -> None:
    """Bring ``lo`` up (a fresh network namespace has it down); needs CAP_NET_ADMIN."""
    import fcntl
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sh14x", b"lo", 0)
        flags = struct.unpack("16sh14x", fcntl.ioctl(s.fileno(), siocgifflags, req))[1]
        fcntl.ioctl(s.fileno(), siocsifflags, struct.pack("16sh14x", b"lo", flags | iff_up))


class _Side:
    """One socket of a relayed connection and the bytes waiting to be written to it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pending = bytearray()
        self.eof = False  # the peer will send nothing more
        self.shut = False  # we passed the peer's EOF on (SHUT_WR)


class _Pair:
    def __init__(self, outer: socket.socket, inner: socket.socket) -> None:
        self.outer = _Side(outer)
        self.inner = _Side(inner)
        self.connected = False
        self.closed = False

    def other(self, side: _Side) -> _Side:
        return self.inner if side is self.outer else self.outer


class Relay:
    """Relays every connection accepted on ``listeners[key]`` to ``dial(key)``.

    Args:
        listeners: key -> a listening, non-blocking socket.
        dial: starts the connection to the peer for an accepted one.
    """

    def __init__(self, listeners: Mapping[Any, socket.socket], dial: Dial) -> None:
        self.listeners: dict[Any, socket.socket] = dict(listeners)
        self.dial = dial
        self.selector = selectors.DefaultSelector()
        self.pairs: set[_Pair] = set()
        self.paused: set[Hashable] = set()  # listeners whose accept hit the fd limit

    def register_listeners(self) -> None:
        for key, lsock in self.listeners.items():
            self.selector.register(lsock, selectors.EVENT_READ, ("accept", key))

    def handle(self, kind: str, obj: Any, mask: int) -> bool:
        """Serve one selector event; ``False`` if it is not the relay's."""
        if kind == "accept":
            self._accept(obj)
        elif kind == "connect":
            if not obj.closed and not obj.connected:
                self._on_connect(obj)
        elif kind == "io":
            pair, side = obj
            if not pair.closed:
                self._on_io(pair, side, mask)
        else:
            return False
        return True

    def run(self) -> None:
        """Relay until killed (never returns normally)."""
        self.register_listeners()
        while True:
            try:
                events = self.selector.select()
            except InterruptedError:
                continue
            for key, mask in events:
                kind, obj = key.data
                self.handle(kind, obj, mask)

    def _accept(self, key: Hashable) -> None:
        lsock = self.listeners[key]
        while True:
            try:
                outer, _ = lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # EMFILE: stop accepting until a connection closes (no busy loop)
                self.selector.unregister(lsock)
                self.paused.add(key)
                return
            outer.setblocking(False)
            try:
                inner, err = self.dial(key)
            except OSError:
                outer.close()
                continue
            pair = _Pair(outer, inner)
            self.pairs.add(pair)
            if err not in (0, errno.EINPROGRESS):
                self._close(pair)
                continue
            self.selector.register(inner, selectors.EVENT_WRITE, ("connect", pair))

    def _on_connect(self, pair: _Pair) -> None:
        err = pair.inner.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        self.selector.unregister(pair.inner.sock)
        if err:
            self._close(pair)
            return
        pair.connected = True
        self.selector.register(pair.outer.sock, selectors.EVENT_READ, ("io", (pair, pair.outer)))
        self.selector.register(pair.inner.sock, selectors.EVENT_READ, ("io", (pair, pair.inner)))

    def _interest(self, pair: _Pair, side: _Side) -> None:
        if pair.closed:
            return
        other = pair.other(side)
        events = 0
        if not side.eof and len(other.pending) < HIGH_WATER:
            events |= selectors.EVENT_READ
        if side.pending:
            events |= selectors.EVENT_WRITE
        try:
            if events:
                self.selector.modify(side.sock, events, ("io", (pair, side)))
            else:
                self.selector.unregister(side.sock)
        except KeyError:
            if events:
                self.selector.register(side.sock, events, ("io", (pair, side)))

    def _on_io(self, pair: _Pair, side: _Side, mask: int) -> None:
        other = pair.other(side)
        try:
            if mask & selectors.EVENT_READ and not side.eof:
                data = side.sock.recv(CHUNK)
                if data:
                    other.pending += data
                else:
                    side.eof = True
            if mask & selectors.EVENT_WRITE and side.pending:
                sent = side.sock.send(side.pending)
                del side.pending[:sent]
            for a, b in ((side, other), (other, side)):
                # a's peer said EOF and everything it sent reached b: pass the EOF on
                if a.eof and not b.pending and not b.shut:
                    b.shut = True
                    b.sock.shutdown(socket.SHUT_WR)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._close(pair)
            return
        if side.shut and other.shut:
            self._close(pair)
            return
        self._interest(pair, side)
        self._interest(pair, other)

    def _close(self, pair: _Pair) -> None:
        if pair.closed:
            return
        pair.closed = True
        self.pairs.discard(pair)
        for side in (pair.outer, pair.inner):
            try:
                self.selector.unregister(side.sock)
            except (KeyError, ValueError):
                pass
            side.sock.close()
        for key in self.paused:
            self.selector.register(self.listeners[key], selectors.EVENT_READ, ("accept", key))
        self.paused.clear()
