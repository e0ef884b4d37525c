# (the tests inspect the host with plain blocking calls on purpose)
"""Copy-on-write fork semantics, busy/lost errors and the fork-depth limit."""

from __future__ import annotations

import asyncio

import pytest

from collimate_rl.node.runtime import (
    MAX_FORK_DEPTH,
    LocalRuntime,
    LocalSession,
    RuntimeError_,
    SessionBusy,
    SessionLost,
)

from .conftest import run

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


async def test_children_see_parent_files_and_writes_stay_private(rt: LocalRuntime) -> None:
    parent = await rt.create_session("python3", "fp")
    kids: list[LocalSession] = []
    try:
        await run(
            parent, files=(("a.txt", b"A"), ("del.txt", b"D")), command="mkdir d && echo x > d/x"
        )
        kids = [k for k in await parent.fork(["f0", "f1", "f2"]) if isinstance(k, LocalSession)]
        assert [k.session_id for k in kids] == ["f0", "f1", "f2"]
        for i, k in enumerate(kids):
            out = await run(k, command="cat a.txt d/x del.txt")
            assert out.output == b"Ax\nD"
            await run(k, command=f"echo {i} > mine.txt; echo -n {i} >> a.txt; rm del.txt")
        for i, k in enumerate(kids):
            out = await run(k, command="cat a.txt mine.txt; ls")
            assert out.output == f"A{i}{i}\na.txt\nd\nmine.txt\n".encode()
        out = await run(parent, command="cat a.txt del.txt; ls")
        assert out.output == b"ADa.txt\nd\ndel.txt\n"
        # the parent keeps writing privately too
        await run(parent, command="echo p > p.txt")
        assert b"No such" in (await run(kids[0], command="cat p.txt 2>&1")).output
        # grandchildren see their own parent's state
        gkids = await kids[1].fork(["g0", "g1"])
        try:
            for g in gkids:
                assert isinstance(g, LocalSession) and g.fork_depth == 2
                out = await run(g, command="cat a.txt mine.txt")
                assert out.output == b"A11\n"
            await run(gkids[0], command="echo g > g.txt")
            assert b"No such" in (await run(gkids[1], command="cat g.txt 2>&1")).output
            assert b"No such" in (await run(kids[1], command="cat g.txt 2>&1")).output
        finally:
            for g in gkids:
                await g.close()
    finally:
        await parent.close()
        for k in kids:
            await k.close()


async def test_children_survive_parent_close(rt: LocalRuntime) -> None:
    parent = await rt.create_session("python3", "fp2")
    await run(parent, command="echo data > f.txt")
    kids = await parent.fork(["s0", "s1"])
    try:
        await parent.close()
        for k in kids:
            out = await run(k, command="cat f.txt; sleep 0.2; echo ok")  # type: ignore[arg-type]
            assert out.output == b"data\nok\n"
        # and a sweep in one child (an exec ending) does not touch its sibling
        t = asyncio.create_task(run(kids[0], command="sleep 1; echo slow"))  # type: ignore[arg-type]
        await asyncio.sleep(0.2)
        await run(kids[1], command="true")  # type: ignore[arg-type]
        assert (await t).output == b"slow\n"
    finally:
        for k in kids:
            await k.close()


async def test_fork_a_session_repeatedly_and_wide(rt: LocalRuntime) -> None:
    parent = await rt.create_session("python3", "wide")
    try:
        for gen in range(3):
            await run(parent, command=f"echo {gen} > gen.txt")
            kids = await parent.fork([f"w{gen}-{i}" for i in range(8)])
            outs = await asyncio.gather(*[run(k, command="cat gen.txt") for k in kids])  # type: ignore[arg-type]
            assert all(o.output == f"{gen}\n".encode() for o in outs)
            for k in kids:
                await k.close()
    finally:
        await parent.close()


async def test_fork_while_exec_runs_is_busy(rt: LocalRuntime) -> None:
    s = await rt.create_session("python3", "busy")
    try:
        t = asyncio.create_task(run(s, command="sleep 0.5"))
        await asyncio.sleep(0.1)
        with pytest.raises(SessionBusy):
            await s.fork(["nope"])
        await t
        kids = await s.fork(["yes"])
        await kids[0].close()
    finally:
        await s.close()


async def test_forked_children_are_isolated_processes(rt: LocalRuntime) -> None:
    s = await rt.create_session("python3", "iso")
    kids = await s.fork(["i0", "i1"])
    try:
        out = await run(kids[0], command="ls /proc | grep -c '^[0-9]'")  # type: ignore[arg-type]
        assert int(out.output) <= 5  # server, factory, exec child, ls, grep
        out = await run(kids[0], code="import os; print(os.listdir('/.collimate'))")  # type: ignore[arg-type]
        assert out.output == b"[]\n"
    finally:
        for k in kids:
            await k.close()
        await s.close()


async def test_closed_session_is_lost(rt: LocalRuntime) -> None:
    s = await rt.create_session("python3", "lost")
    await s.close()
    await s.close()  # idempotent
    with pytest.raises(SessionLost):
        await run(s, command="true")
    with pytest.raises(SessionLost):
        await s.fork(["x"])


async def test_session_whose_server_died_is_lost(rt: LocalRuntime) -> None:
    s = await rt.create_session("python3", "dies")
    assert isinstance(s, LocalSession)
    host = s._host
    await host.master({"op": "kill", "keys": [s._key]})  # as if it crashed
    with pytest.raises(SessionLost):
        await run(s, command="true")
    await s.close()


async def test_fork_depth_limit(rt: LocalRuntime) -> None:
    s = await rt.create_session("python3", "deep")
    chain: list[LocalSession] = [s]  # type: ignore[list-item]
    try:
        await run(s, command="echo 0 > depth.txt")
        cur = chain[0]
        for d in range(1, MAX_FORK_DEPTH + 1):
            (nxt,) = await cur.fork([f"deep{d}"])
            assert isinstance(nxt, LocalSession)
            chain.append(nxt)
            cur = nxt
        out = await run(cur, command="cat depth.txt; echo x >> depth.txt; cat depth.txt")
        assert out.output == b"0\n0\nx\n"
        with pytest.raises(RuntimeError_, match="fork depth"):
            await cur.fork(["too-deep"])
    finally:
        for c in chain:
            await c.close()


async def test_unknown_template(rt: LocalRuntime) -> None:
    with pytest.raises(KeyError):
        await rt.create_session("no-such-template", "x")
    assert "python3" in rt.templates() and "py" in rt.templates()
    s = await rt.create_session("py", "alias")
    assert (await run(s, command="echo ok")).output == b"ok\n"
    await s.close()
