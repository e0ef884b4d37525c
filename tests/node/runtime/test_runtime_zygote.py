# (the tests inspect the host with plain blocking calls on purpose)
"""The pristine factory F: warm request-free processes for every exec (factory.py).

F belongs to sessions with a server of their own (networked ones, services, and
every session of a runtime with ``light_sessions=False``, which these tests use);
light sessions' grades get their candidates from the master instead (boxes, see
``test_fastpath_attacks.py``)."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.node.runtime import LocalRuntime, LocalSession, create_runtime

from .conftest import SANDBOX_UID, TEST_LIMITS, run
from .test_runtime_lifecycle import procs_of_uid, until_no_process_of

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


@pytest.fixture(scope="module")
async def rt(require_bwrap: None) -> AsyncIterator[LocalRuntime]:
    """A runtime whose sessions each have a server (and so a factory F)."""
    runtime = create_runtime(
        "bwrap", limits=TEST_LIMITS, sandbox_uid=SANDBOX_UID, light_sessions=False
    )
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.close()


#: Exec-side client of the factory protocol; ``spawn(program)`` -> (reply, output).
SPAWN = r"""
import json, os, socket
_F = socket.socket(fileno=int(os.environ["COLLIMATE_ZYGOTE_FD"]))

def spawn(program, seed="ab" * 32, env=None, wait=True):
    r, w = os.pipe()
    out_r, out_w = os.pipe()
    req = {"op": "spawn", "seed": seed, "env": env or {}, "code": "source"}
    socket.send_fds(_F, [json.dumps(req).encode()], [r, out_w, out_w])
    os.close(r)
    os.close(out_w)
    reply = json.loads(_F.recv(65536))
    os.write(w, program.encode())
    os.close(w)
    data = b""
    while wait:
        chunk = os.read(out_r, 65536)
        if not chunk:
            break
        data += chunk
    return reply, data.decode()
"""

REPORT = r"""
import json, os, random, sys
print(json.dumps({
    "pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0),
    "env": dict(os.environ), "cwd": os.getcwd(), "argv": sys.argv,
    "fds": sorted(int(f) for f in os.listdir("/proc/self/fd")),
    "random": random.random(), "name": __name__,
    "collimate": os.path.exists("/.collimate/sup"),
    "pidns": os.readlink("/proc/self/ns/pid"),
}))
"""


def _report(out: bytes) -> dict[str, Any]:
    line = [ln for ln in out.decode().splitlines() if ln.startswith("REPORT ")][-1]
    return json.loads(line[len("REPORT ") :])  # type: ignore[no-any-return]


async def _spawn_report(sess: LocalSession, seed: str = "ab" * 32) -> dict[str, Any]:
    code = SPAWN + (
        f"reply, text = spawn({REPORT!r}, seed={seed!r}, env={{'XTRA': '1'}})\n"
        "info = json.loads(text)\n"
        "info['reply'] = reply\n"
        "info['exec_pid'] = os.getpid()\n"
        "print('REPORT ' + json.dumps(info))\n"
    )
    out = await run(sess, code=code)
    assert out.exit_code == 0, out.output
    return _report(out.output)


async def test_exec_gets_a_warm_pristine_process(sess: LocalSession) -> None:
    seed = secrets.token_hex(32)
    info = await _spawn_report(sess, seed)
    assert info["reply"] == {"ok": True, "pid": info["pid"], "marshal": False}
    assert info["ppid"] not in (1, info["exec_pid"])  # F's child, not the exec's
    assert info["sid"] == info["pid"]  # its own session and process group
    assert info["env"]["COLLIMATE_SEED"] == seed and info["env"]["XTRA"] == "1"
    assert info["env"]["HOME"] == "/sandbox" and "COLLIMATE_ZYGOTE_FD" not in info["env"]
    assert info["cwd"] == "/sandbox" and info["argv"] == ["-"] and info["name"] == "__main__"
    assert info["fds"] == [0, 1, 2, 3]  # 0..2 and the listdir fd: nothing of F's
    assert info["collimate"] is False  # F hides /.collimate like an exec child
    import random

    random.seed(int(seed, 16))
    assert info["random"] == random.random()  # seeded like a warm exec


async def test_factory_speaks_marshal_of_its_own_build(sess: LocalSession) -> None:
    code = SPAWN + (
        "import marshal, sys\n"
        "tag = f'{sys.implementation.cache_tag}-{sys.hexversion:x}'\n"
        "for t in (tag, 'other-build'):\n"
        "    r, w = os.pipe(); o_r, o_w = os.pipe()\n"
        "    req = {'op': 'spawn', 'seed': 'cd' * 32, 'code': 'marshal', 'tag': t}\n"
        "    socket.send_fds(_F, [json.dumps(req).encode()], [r, o_w])\n"
        "    os.close(r); os.close(o_w)\n"
        "    reply = json.loads(_F.recv(4096))\n"
        "    prog = \"print('hello', __name__)\"\n"
        "    os.write(w, marshal.dumps(compile(prog, 'x', 'exec')) if reply['marshal'] else prog.encode())\n"
        "    os.close(w)\n"
        "    print(reply['marshal'], os.read(o_r, 100).decode().strip())\n"
        "for bad in (b'not json', json.dumps({'op': 'spawn', 'seed': 'zz'}).encode()):\n"
        "    socket.send_fds(_F, [bad], [0])\n"
        "    print(json.loads(_F.recv(4096))['ok'])\n"
        "print(spawn('print(6 * 7)')[1].strip())\n"
    )
    out = await run(sess, code=code)
    assert out.output.decode().split("\n") == [
        "True hello __main__",
        "False hello __main__",
        "False",
        "False",
        "42",
        "",
    ], out.output


async def test_factory_survives_the_sweep_and_leftovers_do_not(sess: LocalSession) -> None:
    first = await _spawn_report(sess)
    # a daemonized leftover and a warm child that never exits
    code = SPAWN + (
        "spawn('import time; time.sleep(60)', wait=False)\n"
        "if os.fork() == 0:\n"
        "    os.setsid(); import time; time.sleep(60)\n"
    )
    assert (await run(sess, code=code)).exit_code == 0
    second = await _spawn_report(sess)
    assert second["ppid"] == first["ppid"]  # the same F
    procs = await run(
        sess, code="import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
    )
    alive = json.loads(procs.output)
    assert 1 in alive and first["ppid"] in alive
    assert len(alive) == 3, alive  # server, F and this exec: the leftovers are gone


async def test_a_stopped_factory_is_continued_by_the_sweep(sess: LocalSession) -> None:
    f_pid = (await _spawn_report(sess))["ppid"]
    await run(sess, code=f"import os, signal\nos.kill({f_pid}, signal.SIGSTOP)\n")
    assert (await _spawn_report(sess))["ppid"] == f_pid


async def test_a_dead_factory_is_not_recreated_from_the_used_server(sess: LocalSession) -> None:
    # The server has read requests by now: a fork of it would not be pristine,
    # so execs simply get no factory and callers fall back.
    f_pid = (await _spawn_report(sess))["ppid"]
    out = await run(sess, code=f"import os, signal\nos.kill({f_pid}, signal.SIGKILL)\n")
    assert out.exit_code == 0
    probe = (
        "import os\nprint(os.environ.get('COLLIMATE_ZYGOTE_FD'),"
        " sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
    )
    seen = []
    for _ in range(20):  # F may take a moment to die (SIGKILL is asynchronous)
        out = await run(sess, code=probe)
        fd, procs = out.output.decode().split(" ", 1)
        seen.append(fd)
        if fd == "None" and seen.count("None") == 3:
            break
        await asyncio.sleep(0.05)
    assert seen[-3:] == ["None"] * 3, seen  # and it stays gone
    assert len(json.loads(procs)) == 2, out.output  # the server and this exec


#: ``scan(masked)`` counts the copies of ``masked[::-1]`` in the process's own
#: memory (via /proc/self/mem) without ever building that string itself: it
#: looks for its first 20 characters and compares the rest separately.
SCAN = r"""
def scan(masked):
    head = masked[-1:-21:-1].encode()
    tail = masked[-21::-1].encode()
    hits = 0
    maps = open('/proc/self/maps').read().splitlines()
    with open('/proc/self/mem', 'rb', 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if 'r' not in perms or line.endswith(('[vvar]', '[vsyscall]')):
                continue
            lo, hi = (int(x, 16) for x in span.split('-'))
            try:
                mem.seek(lo)
                region = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            at = region.find(head)
            while at >= 0:
                if region[at + 20 : at + 20 + len(tail)] == tail:
                    hits += 1
                at = region.find(head, at + 1)
    return hits
"""


async def test_spawned_process_does_not_hold_the_exec_files(sess: LocalSession) -> None:
    marker = "SECRET-" + secrets.token_hex(16)
    masked = marker[::-1]  # the programs below carry only this
    child = SCAN + f"print('CHILD', scan({masked!r}))\n"
    code = (
        SPAWN
        + SCAN
        + "data = open('secret.txt').read()\n"
        + f"reply, text = spawn({child!r})\n"
        + f"print(text.strip())\nprint('EXEC', scan({masked!r}) > 0)\n"
        + "if os.fork() == 0:\n"  # a plain fork would be no good
        + f"    print('FORK', scan({masked!r}) > 0, flush=True)\n"
        + "    os._exit(0)\n"
        + "os.wait()\n"
    )
    out = await run(sess, code=code, files=(("secret.txt", marker.encode()),))
    lines = out.output.decode().splitlines()
    assert "EXEC True" in lines, out.output  # the scanner works: the exec holds it
    assert "FORK True" in lines, out.output  # and a fork of the exec inherits it
    assert "CHILD 0" in lines, out.output


async def test_forked_sessions_have_their_own_factory(rt: LocalRuntime) -> None:
    parent = await rt.create_session("python3", "zf-p")
    kids: list[LocalSession] = []
    try:
        p_info = await _spawn_report(parent)
        kids = [k for k in await parent.fork(["zf-k0", "zf-k1"]) if isinstance(k, LocalSession)]
        infos = [await _spawn_report(k) for k in kids]
        assert len({i["pidns"] for i in [p_info, *infos]}) == 3
        # killing the parent's F leaves the children's alone
        await run(parent, code=f"import os\nos.kill({p_info['ppid']}, 9)\n")
        for k, info in zip(kids, infos, strict=True):
            assert (await _spawn_report(k))["ppid"] == info["ppid"]
    finally:
        for k in kids:
            await k.close()
        await parent.close()


async def test_closing_a_session_kills_its_factory(require_bwrap: None, tmp_state: Path) -> None:
    uid = SANDBOX_UID + 7  # a uid of its own: nothing else runs as it
    rt = create_runtime(
        "bwrap", state_dir=tmp_state, limits=TEST_LIMITS, sandbox_uid=uid, light_sessions=False
    )
    await rt.start()
    try:
        base = len(procs_of_uid(uid))  # bwrap x2 + master
        s = await rt.create_session("python3", "zl")
        assert isinstance(s, LocalSession)
        await _spawn_report(s)
        assert len(procs_of_uid(uid)) == base + 2  # the server and F
        await s.close()
        for _ in range(100):
            if len(procs_of_uid(uid)) == base:
                break
            await asyncio.sleep(0.02)
        assert len(procs_of_uid(uid)) == base
    finally:
        await rt.close()
    assert await until_no_process_of(uid) == []


async def test_the_none_driver_has_no_factory(tmp_state: Path) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rt = create_runtime("none", state_dir=tmp_state, limits=TEST_LIMITS)
        await rt.start()
    try:
        s = await rt.create_session("python3", "zn")
        out = await run(s, code="import os\nprint(os.environ.get('COLLIMATE_ZYGOTE_FD'))")
        assert out.output == b"None\n"
    finally:
        await rt.close()
