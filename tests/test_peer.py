"""Who owns the other end of a loopback connection (collimate_rl._peer), and the forwarders
that serve only their own user with it."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collimate_rl import _peer
from collimate_rl._peer import encode_address, loopback_peer_uid, owner_in_table
from tests._other_user import OTHER_UID, connect_as_other_user, needs_root


@contextlib.contextmanager
def _listener(host: str = "127.0.0.1") -> Iterator[socket.socket]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as srv:
        srv.bind((host, 0))
        srv.listen(8)
        yield srv


def _owner(conn: socket.socket) -> int | None:
    return loopback_peer_uid(conn.getsockname(), conn.getpeername())


@pytest.fixture(params=["sock_diag", "proc_table"])
def lookup(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of asking: netlink, and the /proc/net/tcp scan it falls back to."""
    if request.param == "proc_table":
        monkeypatch.setattr(_peer, "_ask_sock_diag", lambda *args: (False, None))
    return str(request.param)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_a_live_peer_is_owned_by_its_uid(host: str, lookup: str) -> None:
    if ":" in host and not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        listener = _listener(host)
        srv = listener.__enter__()
    except OSError:
        pytest.skip(f"cannot listen on {host}")
    try:
        client = socket.create_connection(srv.getsockname()[:2])
        conn, _ = srv.accept()
        assert _owner(conn) == os.geteuid()
        client.shutdown(socket.SHUT_WR)  # half-closed: still its owner's, still asking
        assert _owner(conn) == os.geteuid()
        client.close()  # gone: no live socket owns that end any more
        time.sleep(0.05)
        assert _owner(conn) is None
        conn.close()
    finally:
        listener.__exit__(None, None, None)


def test_unknown_or_malformed_peers_have_no_owner(lookup: str) -> None:
    assert loopback_peer_uid(("127.0.0.1", 1), ("127.0.0.1", 2)) is None
    assert loopback_peer_uid(None, None) is None
    assert loopback_peer_uid(("127.0.0.1", 1), ("not an address", 2)) is None


@given(st.ip_addresses(v=4), st.integers(0, 65535), st.integers(0, 2**32 - 2))
def test_the_table_lookup_matches_only_its_own_row(ip: object, port: int, uid: int) -> None:
    local = encode_address(str(ip), port, socket.AF_INET)
    remote = encode_address("127.0.0.1", 8000, socket.AF_INET)
    row = f"1: {local} {remote} 01 0:0 0:0 0 {uid} 0 99"
    assert owner_in_table([row], local, remote) == uid
    assert owner_in_table([row], remote, local) is None
    assert owner_in_table([row.replace(" 01 ", " 06 ")], local, remote) is None  # TIME_WAIT


@needs_root
def test_a_peer_of_another_user_is_seen_as_that_user(lookup: str) -> None:
    with _listener() as srv:
        host, port = srv.getsockname()[:2]
        srv.settimeout(10)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # hold a connection as the other user until the parent looked
            try:
                os.close(r)
                os.setgroups([])
                os.setgid(OTHER_UID)
                os.setuid(OTHER_UID)
                sock = socket.create_connection((host, port), timeout=10)
                os.write(w, b"x")
                sock.recv(1)
            finally:
                os._exit(0)
        os.close(w)
        conn, _ = srv.accept()
        assert os.read(r, 1) == b"x"
        os.close(r)
        assert _owner(conn) == OTHER_UID
        conn.close()
        os.waitpid(pid, 0)


@needs_root
def test_the_openenv_tunnel_serves_only_its_own_user() -> None:
    pytest.importorskip("openenv.core")
    from collimate_rl.openenv._tunnel import PortForward

    fwd = PortForward(lambda: "ws://127.0.0.1:9/connect?port=8000&t=x").start()
    try:
        address = f"127.0.0.1:{fwd.port}"
        assert connect_as_other_user(address, b"GET / HTTP/1.0\r\n\r\n").startswith(
            ("read 0 bytes", "error ConnectionResetError")
        )
        assert fwd.refused == 1
        with socket.create_connection(("127.0.0.1", fwd.port), timeout=10) as own:
            own.sendall(b"GET / HTTP/1.0\r\n\r\n")
            own.recv(1)  # its tunnel cannot open (nothing on :9), but it was not refused
        assert fwd.refused == 1
    finally:
        fwd.close()
