"""The default-deny policy, one test per refused class, on the real kernel and in real sandboxes.

A call outside the allowlist gets ENOSYS and the process goes on; a dangerous call gets EPERM;
the Landlock fence refuses a write outside the session's paths even where the mode bits allow
it, and TCP bind/connect in a session without network even where seccomp allowed the socket.
The Docker comparison and the recorded lists (``docs/syscalls/``) are checked against the
allowlist, and ``collimate doctor`` is run for real.
"""

from __future__ import annotations

import ctypes
import errno
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from collimate_rl.node.runtime import LocalRuntime
from collimate_rl.node.runtime._sandbox import seccomp
from collimate_rl.node.runtime._sandbox.landlock import Fence, landlock_abi
from collimate_rl.node.runtime._sandbox.syscall_allowlist import REFUSED_ON_PURPOSE, allowed_calls
from collimate_rl.node.runtime._sandbox.syscall_table import SYSCALL_NUMBERS

from .conftest import run

ROOT = Path(__file__).resolve().parents[3]
SYSCALLS_DIR = ROOT / "docs" / "syscalls"
ARCH = os.uname().machine
NR = SYSCALL_NUMBERS.get(ARCH, {})
needs_landlock = pytest.mark.skipif(landlock_abi() < 4, reason="no Landlock ABI >= 4 here")


def _in_child(body: Callable[[], None]) -> None:
    """Run ``body`` in a forked child (no_new_privs set); fail unless it returns."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
            body()
            code = 0
        except BaseException as exc:
            os.write(2, f"child failed: {exc!r}\n".encode())
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _raw(name: str, *args: int) -> int:
    """``syscall(name, args...)``: the result, or ``-errno``."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    rc = int(libc.syscall(NR[name], *[ctypes.c_ulong(a) for a in args]))
    return rc if rc >= 0 else -ctypes.get_errno()


def test_a_call_outside_the_list_gets_enosys_and_the_process_goes_on() -> None:
    outside = "get_mempolicy"  # a NUMA query: not in the list, harmless, on both arches
    assert outside not in allowed_calls(ARCH) and outside not in seccomp.DENY_COMMON

    def body() -> None:
        seccomp.load_seccomp(seccomp.build_seccomp_filter())
        assert _raw(outside, 0, 0, 0, 0, 0) == -errno.ENOSYS
        assert _raw("mbind", 0, 0, 0, 0, 0) == -errno.ENOSYS  # refused on purpose
        r, w = os.pipe()  # and it goes on
        os.write(w, b"on")
        assert os.read(r, 2) == b"on"

    _in_child(body)


def test_a_dangerous_call_gets_eperm() -> None:
    def body() -> None:
        seccomp.load_seccomp(seccomp.build_seccomp_filter())
        for name in ("keyctl", "ptrace", "bpf", "unshare", "io_uring_setup", "open_tree_attr"):
            assert _raw(name, 0, 0, 0, 0, 0) == -errno.EPERM, name
        assert os.getpid() > 0

    _in_child(body)


def test_the_recorders_policy_lets_other_calls_through_but_not_the_dangerous_ones() -> None:
    def body() -> None:
        seccomp.load_seccomp(seccomp.build_seccomp_filter(allowlist=False))
        assert _raw("get_mempolicy", 0, 0, 0, 0, 0) != -errno.ENOSYS
        assert _raw("keyctl", 0, 0, 0, 0, 0) == -errno.EPERM

    _in_child(body)


@needs_landlock
def test_landlock_refuses_a_write_outside_the_session_even_when_mode_bits_allow_it() -> None:
    with tempfile.TemporaryDirectory() as outside, tempfile.TemporaryDirectory() as session:
        os.chmod(outside, 0o777)  # anyone may write here, as far as mode bits go
        Path(outside, "old").write_text("x")
        os.chmod(Path(outside, "old"), 0o666)

        def body() -> None:
            assert Fence(networked=False).apply((session,))
            Path(session, "mine").write_text("ok")  # the session's own path: written
            for attempt in (
                lambda: Path(outside, "new").write_text("x"),
                lambda: open(Path(outside, "old"), "a").close(),
                lambda: os.mkdir(Path(outside, "d")),
                lambda: os.unlink(Path(outside, "old")),
            ):
                with pytest.raises(PermissionError):
                    attempt()
            assert Path(outside, "old").read_text() == "x"  # reading stays allowed

        _in_child(body)
        assert not Path(outside, "new").exists() and Path(session, "mine").exists()


@needs_landlock
def test_landlock_refuses_tcp_without_network_even_when_seccomp_allows_the_socket() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def body() -> None:
        assert Fence(networked=False).apply(("/tmp",))
        seccomp.load_seccomp(seccomp.build_seccomp_filter(allow_inet=True, ip_only=True))
        s = socket.socket()  # seccomp allowed AF_INET
        with pytest.raises(PermissionError):
            s.connect(("127.0.0.1", port))
        with pytest.raises(PermissionError):
            socket.socket().bind(("127.0.0.1", 0))

    try:
        _in_child(body)
    finally:
        listener.close()


@needs_landlock
def test_a_networked_sessions_fence_allows_tcp() -> None:
    def body() -> None:
        assert Fence(networked=True).apply(("/tmp",))
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.close()

    _in_child(body)


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_in_a_real_sandbox_outside_calls_get_enosys_and_dangerous_ones_eperm(
    rt: LocalRuntime,
) -> None:
    code = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr):
    return libc.syscall(nr, 0, 0, 0, 0, 0), ctypes.get_errno()
print("outside", call({NR["get_mempolicy"]}))
print("keyctl", call({NR["keyctl"]}))
try:
    open("/usr/collimate-probe", "w")
except OSError as exc:
    print("usr", exc.errno)
open("/sandbox/f", "w").write("x")
print("still here", open("/sandbox/f").read())
"""
    sess = await rt.create_session("python3", "policy-probe")
    try:
        out = await run(sess, code=code)
    finally:
        await sess.close()  # type: ignore[attr-defined]
    text = out.output.decode()
    assert out.exit_code == 0, text
    assert f"outside (-1, {errno.ENOSYS})" in text
    assert f"keyctl (-1, {errno.EPERM})" in text
    assert "still here x" in text
    assert "usr " in text  # refused (read-only mount first, the fence behind it)


def test_the_docker_comparison_is_current_and_allows_no_more() -> None:
    data = json.loads((SYSCALLS_DIR / "docker-default.json").read_text())
    for arch, facts in data["arches"].items():
        ours = sorted(n for n in allowed_calls(arch) if n in SYSCALL_NUMBERS[arch])
        assert facts["ours_allow"] == ours, arch
        assert facts["only_ours_allow"] == [], arch  # no more than Docker's default
        assert set(ours) <= set(facts["docker_allows"])
        assert "ptrace" in facts["only_docker_allows"]


def test_the_recorded_lists_are_within_the_allowlist() -> None:
    recorded = sorted((SYSCALLS_DIR / "recorded").glob("*.json"))
    assert len(recorded) >= 5
    for path in recorded:
        data = json.loads(path.read_text())
        extra = set(data["calls"]) - allowed_calls(data["arch"]) - set(REFUSED_ON_PURPOSE)
        assert not extra, f"{path.name}: {sorted(extra)}"


def test_collimate_doctor_reports_every_layer_active(require_bwrap: None) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "collimate_rl.cli", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    report = json.loads(done.stdout)
    layers = report["layers"]
    for name in ("user", "pid", "mnt", "net", "ipc"):
        assert layers[f"{name} namespace"]["private"] is True
    assert layers["seccomp"]["mode"] == "filter"
    assert layers["seccomp"]["allowed_calls"] == len([n for n in allowed_calls(ARCH) if n in NR])
    assert layers["no_new_privs and capabilities"]["effective_capabilities"] == "0" * 16
    assert layers["landlock"]["abi"] == landlock_abi()
    assert layers["sandbox uid"]["uid_inside"] == 1000
    if os.geteuid() == 0:
        assert layers["sandbox uid"]["host_uid"] not in (0, None)
    assert done.returncode == (0 if report["ok"] else 1)


@pytest.mark.skipif(landlock_abi() < 6, reason="no Landlock scoping (ABI 6) here")
def test_landlock_refuses_an_abstract_socket_outside_the_fence() -> None:
    """A service's or another session's abstract unix socket is out of a fenced process's
    reach; one made inside its own fence is not."""
    name = f"\0collimate-scope-{os.getpid()}"
    outside = socket.socket(socket.AF_UNIX)
    outside.bind(name)
    outside.listen(1)

    def body() -> None:
        assert Fence(networked=False).apply(("/tmp",))
        with pytest.raises(PermissionError):
            socket.socket(socket.AF_UNIX).connect(name)
        inside = socket.socket(socket.AF_UNIX)
        inside.bind(name + "-inside")
        inside.listen(1)
        socket.socket(socket.AF_UNIX).connect(name + "-inside")

    try:
        _in_child(body)
    finally:
        outside.close()


def test_without_landlock_the_fence_is_skipped_and_the_node_says_so(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel without Landlock cannot run here: its probe's answer is stood in for."""
    from collimate_rl.node.runtime import surface

    def body() -> None:
        assert Fence(networked=False, abi=0).apply(("/tmp",)) is False
        Path(tempfile.mkdtemp(dir="/var/tmp")).rmdir()  # nothing was fenced

    _in_child(body)
    monkeypatch.setattr(surface, "probe_error", lambda: "no Landlock in this kernel (stand-in)")
    with caplog.at_level(logging.WARNING, logger="collimate_rl.node"):
        surface.log_missing_layers()
    assert "Landlock fence off: no Landlock in this kernel (stand-in)" in caplog.text
