"""Standby exec boxes (``_sandbox/boxes.py``): a busy session's next exec box, kept or cloned early.

A standby box must behave exactly like a box cloned on demand: the session's
files, nobody else's, nothing left behind, and never a stale view of the session
(a fork freezes the layer an older box would still write). A box kept from the
session's last exec must, besides, hold nothing of that exec but its files.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import signal
from pathlib import Path

import pytest

from collimate_rl.node.runtime import LocalRuntime, LocalSession, create_runtime

from .conftest import SANDBOX_UID, TEST_LIMITS, run
from .test_fastpath_attacks import master_stats, sessions

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


async def busy(sess: LocalSession, n: int = 2) -> None:
    """Run ``n`` execs: once the second is over, the session has a standby box."""
    for _ in range(n):
        out = await run(sess, command="true")
        assert out.exit_code == 0, out


async def stat_settles(sess: LocalSession, name: str, want: int) -> dict[str, int]:
    for _ in range(200):
        stats = await master_stats(sess)
        if stats[name] == want:
            return stats
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name} stayed {stats[name]}, want {want}: {stats}")


async def keep_a_box(sess: LocalSession) -> int:
    """Run two execs so that ``sess`` keeps its box; how many boxes the master kept so far."""
    await busy(sess)
    return int((await stat_settles(sess, "standby", 1))["kept"])


def exec_boxes() -> set[int]:
    """Host pids of the template's exec boxes (their init is named ``col-exec``)."""
    found = set()
    for proc in Path("/proc").iterdir():
        try:
            if (proc / "comm").read_text().strip() != "col-exec":
                continue
            uid = next(ln for ln in (proc / "status").read_text().splitlines() if ln[:4] == "Uid:")
        except (OSError, StopIteration):
            continue
        if int(uid.split()[1]) == SANDBOX_UID:
            found.add(int(proc.name))
    return found


async def test_a_busy_session_gets_one_standby_box_that_goes_with_it(rt: LocalRuntime) -> None:
    (sess,) = await sessions(rt, 1)
    try:
        await busy(sess, 1)
        assert (await master_stats(sess))["standby"] == 0  # one exec is no pattern yet
        await busy(sess, 3)
        await stat_settles(sess, "standby", 1)
        out = await run(sess, code="import os; print(os.getppid())")
        assert out.exit_code == 0 and out.output == b"1\n", out  # the job of a box's init
    finally:
        await sess.close()
    stats = await stat_settles(sess, "boxes", 0)
    assert stats["standby"] == 0 and stats["netns_free"] == stats["netns"], stats


async def test_files_persist_through_standby_boxes_and_stay_in_their_session(
    rt: LocalRuntime,
) -> None:
    a, b = await sessions(rt, 2)
    try:
        await busy(a)
        await busy(b)
        for i in range(3):
            assert (await run(a, command=f"echo a{i} >> /sandbox/mine")).exit_code == 0
            assert (await run(b, command=f"echo b{i} >> /sandbox/mine")).exit_code == 0
        assert (await run(a, command="cat /sandbox/mine")).output == b"a0\na1\na2\n"
        assert (await run(b, command="cat /sandbox/mine")).output == b"b0\nb1\nb2\n"
    finally:
        await a.close()
        await b.close()


async def test_a_fork_retires_the_standby_box_that_would_write_its_frozen_layer(
    rt: LocalRuntime,
) -> None:
    (parent,) = await sessions(rt, 1)
    try:
        await busy(parent)
        assert (await run(parent, command="echo before > /sandbox/f")).exit_code == 0
        await stat_settles(parent, "standby", 1)
        (kid,) = await parent.fork(["standby-kid"])
        assert isinstance(kid, LocalSession)
        try:
            # the parent's next exec must write its new upper layer, not the frozen one
            assert (await run(parent, command="echo after > /sandbox/f")).exit_code == 0
            assert (await run(kid, command="cat /sandbox/f")).output == b"before\n"
            assert (await run(parent, command="cat /sandbox/f")).output == b"after\n"
        finally:
            await kid.close()
    finally:
        await parent.close()


async def test_a_standby_box_that_died_waiting_is_never_handed_out(rt: LocalRuntime) -> None:
    # Killed as the OOM killer would, then an exec at once or a little later: the box is
    # dying, dead but not reaped yet, or gone. Its exec runs anyway, in a fresh box.
    (sess,) = await sessions(rt, 1)
    try:
        others = exec_boxes()  # other sessions' standby boxes (none, unless a test left one)
        await busy(sess)
        for delay in (0.0, 0.0, 0.001, 0.003, 0.01, 0.05):
            await stat_settles(sess, "standby", 1)
            for _ in range(200):  # the execs' own boxes exit; the standby one waits
                waiting = exec_boxes() - others
                if len(waiting) == 1:
                    break
                await asyncio.sleep(0.02)
            assert len(waiting) == 1, waiting
            os.kill(waiting.pop(), signal.SIGKILL)
            await asyncio.sleep(delay)
            out = await run(sess, command="echo alive")
            assert out.exit_code == 0 and out.output == b"alive\n", (delay, out)
    finally:
        await sess.close()


async def test_a_busy_sessions_exec_boxes_serve_its_next_execs(rt: LocalRuntime) -> None:
    (sess,) = await sessions(rt, 1)
    try:
        others = exec_boxes()
        kept = await keep_a_box(sess)
        pids = []
        for i in range(5):
            out = await run(sess, command=f"echo {i}")
            assert out.exit_code == 0 and out.output == f"{i}\n".encode(), out
            out = await run(sess, commands=(("echo", str(i * 2)),))
            assert out.exit_code == 0 and out.output == f"{i * 2}\n".encode(), out
            out = await run(sess, code="import os; print(os.getpid(), os.getppid())")
            assert out.exit_code == 0, out
            pid, parent = map(int, out.output.split())
            assert parent == 1, out
            pids.append(pid)
        # two boxes served all fifteen: the one that read the shell jobs, and one whose
        # init read no job, forking each Python job in turn (pids 2, 3, ...)
        assert len(exec_boxes() - others) == 2
        assert pids == list(range(pids[0], pids[0] + 5)), pids
        assert (await master_stats(sess))["kept"] == kept + 15
    finally:
        await sess.close()
    for _ in range(200):  # and they go with the session
        if not exec_boxes() - others:
            break
        await asyncio.sleep(0.02)
    assert not exec_boxes() - others


#: An exec that tries to outlive itself in its box, and to reach the box's init.
LINGER = r"""
sleep 600 &
setsid sleep 600 &
(trap '' HUP TERM INT; exec sleep 600) &
python3 -c 'import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(0.3)
        open("/sandbox/late", "w").write("written after the exec ended")
        time.sleep(600)' &
kill -STOP 1; kill -KILL 1; kill -TERM 1
ls /proc/1/fd > /dev/null 2>&1 && echo "read the init's fds"
cat /proc/1/environ > /dev/null 2>&1 && echo "read the init's environ"
echo "left" > /sandbox/mine
"""

#: What the next exec in the kept box sees: the processes of its box, and its files.
LOOK = r"""
cd /proc && set -- [0-9]* && echo "$# $1 $([ "$2" = "$$" ] && echo self)"
cat /sandbox/mine; [ -e /sandbox/late ] && echo late || echo none
"""


async def test_nothing_an_exec_started_outlives_it_in_a_kept_box(rt: LocalRuntime) -> None:
    (sess,) = await sessions(rt, 1)
    try:
        await busy(sess)
        for _ in range(3):
            kept = (await stat_settles(sess, "standby", 1))["kept"]
            out = await run(sess, command=LINGER)
            assert out.exit_code == 0 and out.output == b"", out  # the init shrugged it off
            await stat_settles(sess, "kept", kept + 1)  # and it was kept
            await asyncio.sleep(0.5)  # the grandchild would have written by now
            out = await run(sess, command=LOOK)
            assert out.exit_code == 0 and out.output == b"2 1 self\nleft\nnone\n", out
            await stat_settles(sess, "kept", kept + 2)
            assert (await run(sess, command="rm -f /sandbox/late")).exit_code == 0
    finally:
        await sess.close()


async def test_each_exec_in_a_kept_box_starts_as_in_a_fresh_one(rt: LocalRuntime) -> None:
    # the init takes a spawned exec's limits and writes its files: the next exec, spawned
    # or forked, must not see a trace of the last one but its files
    probe = "ulimit -a; umask; pwd; echo ${MINE-unset} $COLLIMATE_SEED; ls /sandbox"
    (fresh, busy_one) = await sessions(rt, 2)
    try:
        await keep_a_box(busy_one)
        seen = []
        for sess in (fresh, busy_one, busy_one):
            await run(sess, command="umask 077; cd /tmp; ulimit -n 20", env=(("MINE", "x"),))
            out = await run(sess, command=probe, seed="7")
            assert out.exit_code == 0 and out.seed_ack == "verified", out
            seen.append(out.output)
            out = await run(sess, code="import os; print(os.getcwd(), oct(os.umask(0)))")
            assert out.output == b"/sandbox 0o22\n", out
        assert seen[0] == seen[1] == seen[2], seen
        assert b"unset 7" in seen[0]
    finally:
        await fresh.close()
        await busy_one.close()


async def test_a_box_killed_at_its_deadline_is_not_kept(rt: LocalRuntime) -> None:
    (sess,) = await sessions(rt, 1)
    try:
        others = exec_boxes()
        kept = await keep_a_box(sess)
        (box,) = exec_boxes() - others
        out = await run(sess, command="sleep 30", timeout=0.5)
        assert out.timed_out, out
        stats = await stat_settles(sess, "standby", 1)  # a fresh one
        assert stats["kept"] == kept and box not in exec_boxes(), stats
        out = await run(sess, command="echo fine")
        assert out.exit_code == 0 and out.output == b"fine\n", out
    finally:
        await sess.close()


#: Write this process's anonymous memory (heap and anonymous mappings) to a file.
DUMP = r"""
import os
out = os.open("/tmp/dump", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
mem = os.open("/proc/self/mem", os.O_RDONLY)
for line in open("/proc/self/maps"):
    fields = line.split()
    if fields[1].startswith("rw") and (len(fields) == 5 or fields[5] == "[heap]"):
        start, end = (int(x, 16) for x in fields[0].split("-"))
        try:
            os.write(out, os.pread(mem, end - start, start))
        except OSError:
            pass
"""


async def test_python_code_never_inherits_what_earlier_jobs_carried(rt: LocalRuntime) -> None:
    # An init that read earlier jobs holds them in freed memory (it is not zeroed), and
    # Python code runs in a fork of the init: after Python and shell jobs that carried a
    # secret, a Python job's memory must not hold it. (Checked against two broken builds:
    # one whose init reads Python jobs itself, and one that lets Python code into the box
    # that read the shell jobs; the shell job goes last, so that box read it last.)
    secret = secrets.token_hex(16)
    (sess,) = await sessions(rt, 1)
    try:
        await keep_a_box(sess)
        for copies in (16, 256, 4096):  # (freed blocks of several sizes: some stay unused)
            for job in ({"code": f"# {secret}"}, {"command": f": {secret}"}):
                out = await run(
                    sess,
                    env=(("SECRET", secret),),
                    files=(("/tmp/s", secret.encode() * copies),),  # (only memory counts)
                    **job,
                )
                assert out.exit_code == 0, out
        out = await run(sess, code=DUMP)
        assert out.exit_code == 0, out
        out = await run(sess, command=f"wc -c < /tmp/dump; grep -c {secret} /tmp/dump")
        size, found = out.output.split()
        assert int(size) > 1 << 20 and found == b"0", out
    finally:
        await sess.close()


async def test_an_init_that_forked_a_program_takes_no_python_job(require_bwrap: None) -> None:
    # A one-process limit: the init cannot spawn a shell job, so it reads it and forks it
    # (the fork execs the shell). It read the job all the same: no Python code may run in
    # a fork of it afterwards.
    limits = dataclasses.replace(TEST_LIMITS, processes=1)
    rt = create_runtime("bwrap", limits=limits, sandbox_uid=SANDBOX_UID + 5)
    await rt.start()
    try:
        sess = await rt.create_session("python3", "one-process")
        assert isinstance(sess, LocalSession)
        secret = secrets.token_hex(16)
        await keep_a_box(sess)
        for copies in (16, 256, 4096):
            out = await run(
                sess,
                command=f": {secret}",
                env=(("SECRET", secret),),
                files=(("/tmp/s", secret.encode() * copies),),
            )
            assert out.exit_code == 0, out
        assert (await run(sess, code=DUMP)).exit_code == 0
        count = f"print(open('/tmp/dump', 'rb').read().count({secret.encode()!r}))"
        out = await run(sess, code=count)
        assert out.exit_code == 0 and out.output == b"0\n", out
        await sess.close()
    finally:
        await rt.close()


#: Shell jobs that attack the box they run in; each ends by itself (a deadline or an output
#: cap would end the box instead, tested above).
HOSTILE = (
    "for i in $(seq 200); do sleep 30 & done 2>/dev/null; true",  # up to the process limit
    "kill -9 -1",  # everything it may signal, itself included
    "kill -9 1; kill -STOP 1; kill -TERM 1; sleep 0.1",  # the init ignores them
    "exec 1>&-; exec 2>&-; sleep 30 < /dev/null > /dev/null 2>&1 & true",  # outputs closed early
    "yes | head -c 100000 > /dev/null; ulimit -p 1; ulimit -n 3; true",  # its own limits only
)


async def test_a_kept_box_serves_on_after_hostile_jobs(rt: LocalRuntime) -> None:
    (sess,) = await sessions(rt, 1)
    try:
        others = exec_boxes()
        kept = await keep_a_box(sess)
        for job in HOSTILE * 2:
            out = await run(sess, command=job)
            assert not out.timed_out, (job, out)
            out = await run(
                sess, command="cd /proc && set -- [0-9]* && echo $#; ulimit -p; ulimit -n"
            )
            assert out.exit_code == 0 and out.output == b"2\n48\n256\n", (job, out)
        assert len(exec_boxes() - others) == 1  # one box served every job
        await stat_settles(sess, "kept", kept + 4 * len(HOSTILE))
    finally:
        await sess.close()
