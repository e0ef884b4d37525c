"""Standby exec boxes (``_sandbox/boxes.py``): a busy session's next exec box, cloned early.

A standby box must behave exactly like a box cloned on demand: the session's
files, nobody else's, nothing left behind, and never a stale view of the session
(a fork freezes the layer an older box would still write).
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from collimate_rl.node.runtime import LocalRuntime, LocalSession

from .conftest import SANDBOX_UID, run
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
        out = await run(sess, code="import os; print(os.getpid())")
        assert out.exit_code == 0 and out.output == b"2\n", out  # the job of a box's init
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
