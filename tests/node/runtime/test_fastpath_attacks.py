"""Attacks on the fast path's new surfaces (docs/fast-path.md): boxes, pooled network
namespaces, the zygote and the workers.

Each grade here is the exec the grading layer sends (the warm stub for one payload
file), so it runs in a worker and its candidates in boxes; two members graded "at
the same time" are two such execs in flight together.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.grading import IOReward, UnitTestReward
from collimate_rl.grading.specs import Frame, RewardSpec
from collimate_rl.node.runtime import ExecSpec, LocalRuntime, LocalSession, SessionLost

from .conftest import SANDBOX_UID, rand_seed, run

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]

ADD = UnitTestReward([{"input": [1, 2], "expected": 3}], entry="add", per_test_timeout=15.0)


async def grade_in(
    sess: LocalSession, source: str, spec: RewardSpec = ADD, timeout: float = 30.0
) -> Frame:
    """Grade ``source`` in the session as the grading layer would; the verdict frame."""
    nonce = secrets.token_hex(16)
    program = spec.build(source, nonce=nonce, timeout_seconds=timeout)
    (payload,) = program.files
    out = await sess.exec(
        ExecSpec(
            seed=rand_seed(),
            timeout_seconds=timeout,
            code=program.warm_code,
            files=((payload["path"], payload["content"].encode()),),
        )
    )
    frame = spec.read_frame(out.output.decode(), nonce)
    assert frame is not None, out
    return frame


async def sessions(rt: LocalRuntime, n: int) -> list[LocalSession]:
    out = []
    for _ in range(n):
        s = await rt.create_session("python3", f"fp-{secrets.token_hex(4)}")
        assert isinstance(s, LocalSession) and s.light
        out.append(s)
    return out


def template_processes(uid: int) -> dict[int, str]:
    """Host pid -> name of the template's long-lived processes (master, zygote, workers)."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            comm = (proc / "comm").read_text().strip()
            uids = next(ln for ln in (proc / "status").read_text().splitlines() if ln[:4] == "Uid:")
        except (OSError, StopIteration):
            continue
        if int(uids.split()[1]) == uid and comm.startswith(("col-master", "col-zygote", "col-w")):
            found[int(proc.name)] = comm
    return found


async def master_stats(sess: LocalSession) -> dict[str, Any]:
    return await sess._host.master({"op": "stats"})


#: What a candidate can see and reach of everything else: the pids in its /proc,
#: the pids it can signal (a scan of the whole pid range), the /proc files it can
#: read of other processes.
PROBE = r"""
import os, signal
def _probe():
    seen = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
    signalled = []
    for pid in range(1, 32769):
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            signalled.append(pid)
        except OSError:
            pass
    readable = []
    for pid in seen:
        if pid != os.getpid():
            for name in ('environ', 'mem', 'cmdline'):
                try:
                    open('/proc/%d/%s' % (pid, name), 'rb').read(1)
                    readable.append((pid, name))
                except OSError:
                    pass
    print('PROBE', os.getpid(), os.getppid(), seen, signalled, readable, flush=True)
_probe()
"""


async def test_a_candidate_cannot_reach_the_zygote_the_worker_or_a_sibling(
    rt: LocalRuntime,
) -> None:
    a, b = await sessions(rt, 2)
    try:
        await grade_in(a, "def add(x, y):\n    return x + y\n")  # the template is warm
        before = template_processes(SANDBOX_UID)
        assert {"col-master", "col-zygote"} <= set(before.values()), before
        slow = "import time\ndef add(x, y):\n    time.sleep(2.0)\n    return x + y\n"
        sibling = asyncio.create_task(grade_in(a, slow))
        await asyncio.sleep(0.5)  # the sibling's candidate is running now
        frame = await grade_in(b, PROBE + "def add(x, y):\n    return x + y\n")
        line = next(ln for ln in frame.output_tail.splitlines() if ln.startswith("PROBE "))
        assert line == "PROBE 1 0 [1] [] []", line  # itself, and nothing else at all
        assert frame.passed == 1
        assert (await sibling).passed == 1  # untouched
        after = template_processes(SANDBOX_UID)
        assert set(before) <= set(after), (before, after)  # master, zygote, workers alive
    finally:
        await a.close()
        await b.close()


BOMB = (
    "import os, time\n"
    "def add(x, y):\n"
    "    end = time.monotonic() + 3.0\n"
    "    while time.monotonic() < end:\n"
    "        try:\n"
    "            if os.fork() == 0:\n"
    "                time.sleep(30)\n"
    "                os._exit(0)\n"
    "        except OSError:\n"
    "            pass\n"
    "    return x + y\n"
)
NEEDS_FORKS = (
    "import os, time\n"
    "def add(x, y):\n"
    "    kids = []\n"
    "    for _ in range(20):\n"
    "        kid = os.fork()\n"
    "        if kid == 0:\n"
    "            time.sleep(0.5)\n"
    "            os._exit(0)\n"
    "        kids.append(kid)\n"
    "    for kid in kids:\n"
    "        os.waitpid(kid, 0)\n"
    "    print('FORKED', len(kids), flush=True)\n"
    "    return x + y\n"
)


async def test_a_fork_bomb_in_one_member_does_not_starve_another(rt: LocalRuntime) -> None:
    bomber, other = await sessions(rt, 2)
    try:
        bomb = asyncio.create_task(grade_in(bomber, BOMB))
        await asyncio.sleep(1.0)  # the bomb has used up its own budget by now
        frame = await grade_in(other, NEEDS_FORKS)
        assert frame.passed == 1 and "FORKED 20" in frame.output_tail, frame
        await bomb  # a verdict either way; nothing of it is left behind
        out = await run(bomber, command="ls /proc | grep -c '^[0-9]'")
        assert int(out.output) <= 4  # init, the exec, ls, grep
    finally:
        await bomber.close()
        await other.close()


UPPER_PROBE = r"""
import os
def _hunt(secret):
    hits = []
    for p in ('/sandbox/secret.txt', '/tmp/secret.txt', '/dev/shm/secret.txt'):
        try:
            if secret in open(p, 'rb').read():
                hits.append(p)
        except OSError:
            pass
    for pid in os.listdir('/proc'):
        if pid.isdigit():
            for p in ('root/sandbox/secret.txt', 'root/tmp/secret.txt', 'cwd/secret.txt'):
                try:
                    if secret in open('/proc/%s/%s' % (pid, p), 'rb').read():
                        hits.append(p)
                except OSError:
                    pass
    # a session's files live on its tmpfs, never on the host's disk: the read-only binds of
    # the host's toolchains (/usr, a pyenv tree, site-packages) are left out, or the walk
    # outlasts the candidate's load limit on a slow machine
    host_disk = os.stat('/usr').st_dev
    for top, dirs, files in os.walk('/'):
        dirs[:] = [
            d for d in dirs
            if os.path.join(top, d) not in ('/proc', '/sys', '/dev')
            and os.lstat(os.path.join(top, d)).st_dev != host_disk
        ]
        for name in files:
            try:
                if secret in open(os.path.join(top, name), 'rb').read(1 << 20):
                    hits.append(os.path.join(top, name))
            except OSError:
                pass
    print('HUNT', os.listdir('/.collimate'), hits, flush=True)
"""


async def test_a_member_cannot_read_another_members_upper_dir(rt: LocalRuntime) -> None:
    owner, thief = await sessions(rt, 2)
    secret = "TOPSECRET-" + secrets.token_hex(8)
    try:
        await run(
            owner,
            files=(("secret.txt", secret.encode()),),
            command="cp secret.txt /tmp/secret.txt && cp secret.txt /dev/shm/secret.txt",
        )
        holding = asyncio.create_task(run(owner, command="exec 3<secret.txt; sleep 2"))
        await asyncio.sleep(0.5)  # a box of the owner is live, its layers mounted
        hunt = UPPER_PROBE + f"_hunt({secret[::-1]!r}[::-1].encode())\n"
        frame = await grade_in(thief, hunt + "def add(x, y):\n    return x + y\n", timeout=60)
        lines = [ln for ln in frame.output_tail.splitlines() if ln.startswith("HUNT ")]
        assert lines == ["HUNT [] []"], frame
        assert (await holding).exit_code == 0
        assert (await run(owner, command="cat /tmp/secret.txt")).output == secret.encode()
    finally:
        await owner.close()
        await thief.close()


async def test_abstract_sockets_do_not_cross_members(rt: LocalRuntime) -> None:
    a, b = await sessions(rt, 2)
    name = "col-xmember-" + secrets.token_hex(6)
    listen = (
        "import socket, time\n"
        "def add(x, y):\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        f"    s.bind('\\0{name}')\n"
        "    s.listen(8)\n"
        "    time.sleep(2.0)\n"
        "    return x + y\n"
    )
    reach = (
        "import socket\n"
        "def add(x, y):\n"
        "    c = socket.socket(socket.AF_UNIX)\n"
        "    try:\n"
        f"        c.connect('\\0{name}'); print('CONNECTED', flush=True)\n"
        "    except OSError as e:\n"
        "        print('REFUSED', e.errno, flush=True)\n"
        f"    print('LISTED', {name!r} in open('/proc/net/unix').read(), flush=True)\n"
        "    mine = socket.socket(socket.AF_UNIX)\n"
        f"    mine.bind('\\0{name}')  # no collision either\n"
        "    return x + y\n"
    )
    try:
        listening = asyncio.create_task(grade_in(a, listen))
        await asyncio.sleep(0.7)
        frame = await grade_in(b, reach)
        assert frame.passed == 1, frame
        assert "REFUSED" in frame.output_tail and "CONNECTED" not in frame.output_tail
        assert "LISTED False" in frame.output_tail
        assert (await listening).passed == 1
    finally:
        await a.close()
        await b.close()


#: Leaves abstract sockets alive only through a cycle of in-flight SCM_RIGHTS
#: messages (each pair's sockets sit in each other's receive queue) and exits.
LEAVE_NAMES = (
    "import array, socket\n"
    "def add(x, y):\n"
    "    for i in range(16):\n"
    "        named = socket.socket(socket.AF_UNIX)\n"
    "        named.bind(('\\0%s-%d' % (NAME, i)))\n"
    "        a, b = socket.socketpair()\n"
    "        fds = array.array('i', [a.fileno(), b.fileno(), named.fileno()])\n"
    "        a.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])\n"
    "        b.sendmsg([b'y'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])\n"
    "        for s in (a, b, named):\n"
    "            s.close()\n"
    "    return x + y\n"
)


async def test_a_pooled_netns_left_dirty_is_not_reused(rt: LocalRuntime) -> None:
    a, b = await sessions(rt, 2)
    name = "col-left-" + secrets.token_hex(6)
    look = (
        "def add(x, y):\n"
        f"    print('LEFT', {name!r} in open('/proc/net/unix').read(), flush=True)\n"
        "    return x + y\n"
    )
    try:
        for _ in range(3):  # the next box takes the namespace this one gave back, if clean
            assert (await grade_in(a, f"NAME = {name!r}\n" + LEAVE_NAMES)).passed == 1
            frame = await grade_in(b, look)
            assert "LEFT False" in frame.output_tail, frame
        stats = await master_stats(a)
        assert stats["netns"] >= 1 and stats["netns_free"] <= stats["netns"], stats
    finally:
        await a.close()
        await b.close()


#: Counts copies of the (reversed) argument in this process's own memory and in
#: the memory of every process it can see (it never builds the marker itself).
SCANNER = r"""
import os
def _hits(data, head, tail):
    hits, at = 0, data.find(head)
    while at >= 0:
        hits += data[at + 20 : at + 20 + len(tail)] == tail
        at = data.find(head, at + 1)
    return hits
def scan(masked):
    head, tail = masked[-1:-21:-1].encode(), masked[-21::-1].encode()
    hits = 0
    for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
        try:
            maps = open('/proc/%s/maps' % pid).read().splitlines()
            mem = open('/proc/%s/mem' % pid, 'rb', 0)
        except OSError:
            continue
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split('-'))
            if 'r' in line.split()[1] and not line.endswith(('[vvar]', '[vsyscall]')):
                try:
                    mem.seek(lo)
                    hits += _hits(mem.read(hi - lo), head, tail)
                except (OSError, ValueError, OverflowError):
                    pass
    return hits
"""


async def test_a_candidate_cannot_read_the_tests(rt: LocalRuntime) -> None:
    (sess,) = await sessions(rt, 1)
    marker = "SECRET-" + secrets.token_hex(16)
    spec = UnitTestReward([{"input": [1, 2], "expected": marker}], entry="add")
    code = (
        SCANNER
        + f"print('HITS', scan({marker[::-1]!r}), flush=True)\n"
        + f"def add(a, b):\n    return 'HITS %d' % scan({marker[::-1]!r})\n"
    )
    try:
        frame = await grade_in(sess, code, spec)
        assert frame.passed == 0 and "HITS 0" in frame.output_tail, frame
        assert "HITS 1" not in frame.output_tail and marker not in frame.output_tail
        assert frame.tests[0]["detail"] == "got 'HITS 0'", frame.tests
    finally:
        await sess.close()


async def test_a_box_that_cannot_start_is_an_infra_error(rt: LocalRuntime) -> None:
    # The session vanishes (as if its records were dropped) between two candidate
    # processes of one grade: the next spawn is refused, and the grade is an
    # infrastructure error, never a verdict.
    (sess,) = await sessions(rt, 1)
    spec = IOReward([{"input": "1", "output": "1"}, {"input": "2", "output": "2"}])
    slow = "import time\ntime.sleep(1.5)\nprint(input())\n"
    grading = asyncio.create_task(grade_in(sess, slow, spec))
    await asyncio.sleep(0.6)
    await sess._host.master({"op": "kill", "keys": [sess._key]})
    with pytest.raises(SessionLost):
        await grading
    await sess.close()


async def test_nothing_is_left_behind(rt: LocalRuntime) -> None:
    (sess,) = await sessions(rt, 1)
    try:
        await grade_in(sess, "def add(x, y):\n    return x + y\n")
        await run(sess, command="sleep 30 & echo started")
    finally:
        await sess.close()
    for _ in range(100):
        stats = await master_stats(sess)
        if stats["boxes"] == 0 and stats["box_conns"] == 0:
            break
        await asyncio.sleep(0.05)
    assert stats["boxes"] == 0 and stats["box_conns"] == 0, stats
    assert stats["netns_free"] == stats["netns"], stats  # every namespace is back
