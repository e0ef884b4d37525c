"""The zygote's clone loop, native and Python twins: built once, same commands, same answers.

The twins run in real zygotes (``_zygote_twin.py``: a user namespace of its own and a
"session" to clone into, as the master sets one up), fed commands as the master sends
them. The node-level tests check that a template's zygote runs the native loop, and
that a node whose zygote loops in Python grades, runs and cleans up the same.
"""

from __future__ import annotations

import array
import ast
import asyncio
import errno
import os
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collimate_rl.node.runtime import (
    LocalRuntime,
    LocalSession,
    SessionLost,
    create_runtime,
    native,
)
from collimate_rl.node.runtime._sandbox.syscalls import (
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
)
from collimate_rl.node.runtime._sandbox.zygote_loop import COMMAND_MAX, HEADER, pack_command

from ..test_node_process import serve_node, start_up_line
from .conftest import SANDBOX_UID, TEST_LIMITS, run
from .test_fastpath_attacks import grade_in, sessions, template_processes
from .test_runtime_lifecycle import until_no_process_of

TWIN = Path(__file__).with_name("_zygote_twin.py")
#: What a box is cloned with (the master's flags), none, and two sets clone(2) refuses.
CLONE_THREAD, CLONE_FS = 0x00010000, 0x00000200
FLAGS = (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS, 0, CLONE_THREAD, CLONE_NEWUSER | CLONE_FS)


needs_compiler = pytest.mark.skipif(
    not native.find_compiler(), reason="no C compiler: only the Python loop runs here"
)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not native.find_compiler():
        pytest.skip("no C compiler: only the Python loop runs here")
    built = native.zygote_loop_library(tmp_path_factory.mktemp("cache"))
    assert built is not None
    return built


class Twin:
    """A zygote running one loop, and the master's end of its socket."""

    def __init__(self, kind: str, library: Path) -> None:
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.reports, report_w = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, str(TWIN), kind, str(library), str(theirs.fileno()), str(report_w)],
            pass_fds=(theirs.fileno(), report_w),
        )
        theirs.close()
        os.close(report_w)
        ready, self.session, _, _ = socket.recv_fds(self.sock, 16, 3)
        assert ready == b"ready", ready
        assert self.sock.recv(16) == b"serving"  # (it closed its copies of the session's fds)
        self.home = self.namespaces()
        self.open_fds = self.fd_count()

    def namespaces(self) -> list[str]:
        return [os.readlink(f"/proc/{self.proc.pid}/ns/{k}") for k in ("mnt", "ipc", "net")]

    def fd_count(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def command(self, data: bytes, fds: list[int]) -> int:
        """Send a command; the answer (a box's pid, once it has reported, or ``-errno``)."""
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        self.sock.sendmsg([data], rights)
        answer = int.from_bytes(self.sock.recv(8), "big", signed=True)
        if answer > 0:
            self.last_report = self.report()
            os.waitpid(answer, 0)  # CLONE_PARENT: the box is our child
        return answer

    def report(self) -> tuple[bytes, int, list[str]]:
        line = b""
        while not line.endswith(b"\n"):
            assert select.select([self.reports], [], [], 10)[0], "the box did not report"
            chunk = os.read(self.reports, 4096)
            assert chunk, "the report pipe closed"
            line += chunk
        got: tuple[bytes, int, list[str]] = ast.literal_eval(line.decode())  # the box's repr()
        return got

    def close(self) -> int:
        """Hang up; the zygote's exit status (its descriptors here are closed too)."""
        if self.sock.fileno() >= 0:
            self.sock.close()
            os.close(self.reports)
            for fd in self.session:
                os.close(fd)
        return self.proc.wait(10)


@pytest.fixture
def twins(library: Path) -> Iterator[dict[str, Twin]]:
    started = {kind: Twin(kind, library) for kind in ("native", "python")}
    try:
        yield started
    finally:
        for twin in started.values():
            twin.close()


@needs_compiler
def test_the_native_loop_is_built_once_readable_by_the_sandbox(tmp_path: Path) -> None:
    built = native.zygote_loop_library(tmp_path)
    assert built is not None and built.is_relative_to(tmp_path)
    assert built.stat().st_mode & 0o777 == 0o644
    for folder in (built.parent, built.parent.parent):
        assert folder.stat().st_mode & 0o777 == 0o755
    first = built.stat()
    again = native.zygote_loop_library(tmp_path)
    assert again == built and again.stat().st_mtime_ns == first.st_mtime_ns  # not rebuilt
    assert sorted(p.name for p in built.parent.iterdir()) == [".lock", built.name]


def test_a_failed_build_leaves_nothing_but_its_lock(tmp_path: Path) -> None:
    assert native.zygote_loop_library(tmp_path, compiler="/bin/false") is None
    (folder,) = (tmp_path / "zygote-loop").iterdir()
    assert [p.name for p in folder.iterdir()] == [".lock"]  # no library, no scratch


@pytest.mark.parametrize("kind", ["native", "python"])
@pytest.mark.parametrize("with_net", [True, False], ids=["netns", "no-netns"])
def test_a_box_gets_its_command_and_descriptors_in_the_sessions_namespaces(
    twins: dict[str, Twin], kind: str, with_net: bool
) -> None:
    twin = twins[kind]
    mnt, ipc, net = twin.session
    box_fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(2)]
    try:
        # (no new namespace of its own: a box cloned with CLONE_NEWNS has a copy of the
        # session's mount namespace, not the session's)
        data = pack_command(0, len(box_fds), False, b"the box's part")
        pid = twin.command(data, [*box_fds, mnt, ipc] + ([net] if with_net else []))
    finally:
        for fd in box_fds:
            os.close(fd)
    assert pid > 0
    command, count, where = twin.last_report
    assert command == data and count == len(box_fds) + 2 + with_net
    wanted = [os.readlink(f"/proc/self/fd/{fd}") for fd in (mnt, ipc, net)]
    assert where[:2] == wanted[:2]
    assert (where[2] == wanted[2]) is with_net  # else the zygote's own network
    assert twin.namespaces() == twin.home  # the zygote stepped home
    assert twin.fd_count() == twin.open_fds  # and kept none of the command's fds


@pytest.mark.parametrize("kind", ["native", "python"])
def test_the_loop_ends_when_the_master_hangs_up(twins: dict[str, Twin], kind: str) -> None:
    assert twins[kind].close() == 0


@st.composite
def commands(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    """A command as bytes, and the descriptors to send with it, by name."""
    flags = draw(st.sampled_from(FLAGS))
    count, ready = draw(st.integers(0, 4)), draw(st.sampled_from([0, 1, 7]))
    header = HEADER.pack(flags, count, ready)
    # (not empty: an empty datagram reads as the master hanging up, in both loops)
    size = draw(st.sampled_from([1, 3, 9, len(header), 64, COMMAND_MAX + 1]))
    body = (header + draw(st.binary(min_size=0, max_size=32))).ljust(size, b"x")
    body = body[:size] if size < len(header) else body
    # the descriptors the header asks for (then the session's namespaces), or any
    layout = ["null"] * count + ["pipe"] * (ready != 0) + ["mnt", "ipc"]
    names = draw(
        st.sampled_from([layout, [*layout, "net"]])
        | st.lists(st.sampled_from(["null", "mnt", "ipc", "net", "pipe"]), max_size=7)
        | st.just(["null"] * 20)  # more than a command may carry
    )
    return body, names


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(commands())
def test_the_twins_answer_every_command_alike_and_stay_home(
    twins: dict[str, Twin], command: tuple[bytes, list[str]]
) -> None:
    # Whatever arrives (a short or cut command, too few descriptors, a descriptor of the
    # wrong kind where a namespace belongs, flags clone(2) refuses, too many descriptors),
    # both loops give the same answer, and each zygote is back in its own namespaces
    # holding no descriptor it was sent.
    data, names = command
    answers = {}
    for kind, twin in twins.items():
        null = os.open(os.devnull, os.O_RDONLY)
        pipe_r, pipe_w = os.pipe()
        mnt, ipc, net = twin.session
        by_name = {"null": null, "mnt": mnt, "ipc": ipc, "net": net, "pipe": pipe_r}
        try:
            answers[kind] = twin.command(data, [by_name[name] for name in names])
        finally:
            for fd in (null, pipe_r, pipe_w):
                os.close(fd)
        assert twin.namespaces() == twin.home
        assert twin.fd_count() == twin.open_fds
    native_answer, python_answer = answers["native"], answers["python"]
    assert (native_answer > 0) == (python_answer > 0), answers
    if native_answer < 0:
        assert native_answer == python_answer, answers
        assert -native_answer in (errno.EINVAL, errno.EBADF), answers


# ----------------------------------------------------------------------------- a node


def zygotes_of(uid: int) -> dict[int, str]:
    """The zygotes running as ``uid``, and their memory maps."""
    found = template_processes(uid).items()
    return {
        pid: Path(f"/proc/{pid}/maps").read_text() for pid, name in found if name == "col-zygote"
    }


@needs_compiler
@pytest.mark.anyio
@pytest.mark.bwrap
async def test_a_templates_zygote_runs_the_native_loop(rt: LocalRuntime) -> None:
    assert rt.zygote_loop is not None and rt.info()["zygote_loop"] == "native"
    (sess,) = await sessions(rt, 1)
    try:
        await run(sess, code="print('warm')")  # (the template's processes are up)
    finally:
        await sess.close()
    zygotes = zygotes_of(SANDBOX_UID)
    assert zygotes and all("zygote_loop.so" in maps for maps in zygotes.values())


@needs_compiler
@pytest.mark.bwrap
def test_a_node_says_which_loop_its_zygotes_run(require_bwrap: None, tmp_path: Path) -> None:
    # An operator reads it in the start-up line (a machine without a compiler says "python").
    proc = serve_node(tmp_path)
    serving, out = start_up_line(proc, timeout=60)
    assert "zygote loop: native" in serving, serving + out
    assert proc.returncode == 0, out


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_a_zygote_looping_in_python_serves_a_node_alike(require_bwrap: None) -> None:
    uid = SANDBOX_UID + 10  # a uid of its own: nothing else runs as it
    rt = create_runtime("bwrap", limits=TEST_LIMITS, sandbox_uid=uid, native_zygote=False)
    await rt.start()
    try:
        assert rt.zygote_loop is None and rt.info()["zygote_loop"] == "python"
        first, second = await sessions(rt, 2)
        good = await grade_in(first, "def add(x, y):\n    return x + y\n")
        bad = await grade_in(second, "def add(x, y):\n    return x - y\n")
        assert (good.passed, bad.passed) == (1, 0)
        out = await run(first, command="echo $((6 * 7))")
        assert out.output == b"42\n" and out.exit_code == 0
        (child,) = await first.fork(["py-loop-child"])
        assert isinstance(child, LocalSession)
        assert (await run(child, code="print('forked')")).output == b"forked\n"
        running = asyncio.ensure_future(run(second, command="sleep 30"))
        await asyncio.sleep(0.5)
        await second.close()  # its box is killed: the exec ends, never as a verdict
        with pytest.raises(SessionLost):
            await running
        for sess in (first, child):
            await sess.close()
        zygotes = zygotes_of(uid)
        assert zygotes and not any("zygote_loop" in maps for maps in zygotes.values())
    finally:
        await rt.close()
    assert await until_no_process_of(uid, seconds=10) == []
