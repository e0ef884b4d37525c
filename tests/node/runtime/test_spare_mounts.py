"""Reused member mount namespaces (``_sandbox/spare_mounts.py``): never a trace of a session.

A dead session's mount namespace serves the next session only when nothing in it
changed. Each test here leaves a trace the way a program could (a file made and
removed, a mode, a time, an extended attribute, a pty, a write racing the delete)
and checks that the next session's view is a fresh one's: the same names, inodes,
modes, owners, attributes and plausible times of ``/sandbox``, ``/tmp``, ``/dev/shm`` and ``/dev/pts``.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest

from collimate_rl.node.runtime import LocalRuntime, LocalSession

from .conftest import run
from .test_fastpath_attacks import master_stats, sessions
from .test_standby_boxes import stat_settles

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]

#: What a session sees of what a box can change in its namespace (a Python exec's own
#: code file in /tmp aside).
VIEW = r"""
import os
for p in ('/sandbox', '/tmp', '/dev/shm', '/dev/pts', '/dev/pts/ptmx'):
    st = os.lstat(p)
    names = None
    if os.path.isdir(p):
        names = sorted(n for n in os.listdir(p) if not n.startswith('colcode_'))
    xattrs = {n: os.getxattr(p, n) for n in os.listxattr(p)}
    recent = st.st_mtime > 1.7e9 and st.st_atime > 1.7e9  # (no time set by hand)
    print(p, st.st_ino, oct(st.st_mode), st.st_uid, st.st_gid, names, xattrs, recent)
"""

#: Traces a session can leave in its namespace, each of which makes it unfit for reuse.
TRACES: dict[str, dict[str, Any]] = {
    "a file left": {"command": "echo secret > /sandbox/left"},
    "a tmp file made and removed": {"command": "echo secret > /tmp/f && rm /tmp/f"},
    "a shm file made and removed": {"command": "echo secret > /dev/shm/f && rm /dev/shm/f"},
    "a dir made and removed": {"command": "mkdir /sandbox/d && rmdir /sandbox/d"},
    "a mode": {"command": "chmod 700 /tmp"},
    "a time": {"command": "touch -d @12345 /sandbox"},
    "an xattr": {"code": "import os; os.setxattr('/sandbox', 'user.k', b'secret')"},
    "a pty": {"code": "import os; m, s = os.openpty(); os.write(m, b'secret')"},
    "a Python exec (its code file)": {"code": "pass"},
}


async def view(sess: LocalSession) -> str:
    out = await run(sess, code=VIEW)
    assert out.exit_code == 0, out
    return out.output.decode()


async def settled(sess: LocalSession) -> dict[str, Any]:
    """The master's stats once every box is reaped (a dropped session's namespace is then
    reused or closed)."""
    return await stat_settles(sess, "boxes", 0)


async def fresh_view(rt: LocalRuntime) -> str:
    """The view of a session whose namespace was built, not reused: sessions take spares
    until one builds its own."""
    held = []
    try:
        while True:
            (sess,) = await sessions(rt, 1)
            held.append(sess)
            before = (await master_stats(sess))["mounts_reused"]
            await run(sess, command="true")
            if (await master_stats(sess))["mounts_reused"] == before:
                return await view(sess)
    finally:
        for sess in held:
            await sess.close()


async def next_view(rt: LocalRuntime) -> tuple[str, dict[str, Any]]:
    """The view of the next session, and the master's stats after its first exec."""
    (sess,) = await sessions(rt, 1)
    try:
        seen = await view(sess)
        return seen, await master_stats(sess)
    finally:
        await sess.close()


async def test_an_untouched_namespace_serves_the_next_session_as_new(rt: LocalRuntime) -> None:
    fresh = await fresh_view(rt)
    (a,) = await sessions(rt, 1)
    await run(a, command="true")
    await a.close()
    before = await settled(a)
    (b,) = await sessions(rt, 1)
    try:
        assert await view(b) == fresh
        after = await master_stats(b)
        assert after["mounts_reused"] == before["mounts_reused"] + 1, (before, after)
        # and it is b's now: its files persist across its execs
        assert (await run(b, command="echo mine > /sandbox/f && echo x > /tmp/t")).exit_code == 0
        out = await run(b, command="cat /sandbox/f /tmp/t")
        assert out.output == b"mine\nx\n", out
    finally:
        await b.close()
    assert (await settled(b))["mounts_dirty"] == after["mounts_dirty"] + 1


@pytest.mark.parametrize("trace", list(TRACES))
async def test_a_namespace_with_a_trace_is_never_reused(rt: LocalRuntime, trace: str) -> None:
    fresh = await fresh_view(rt)
    (a,) = await sessions(rt, 1)
    out = await run(a, **TRACES[trace])
    assert out.exit_code == 0, out
    start = await master_stats(a)
    await a.close()
    end = await settled(a)
    assert end["mounts_dirty"] == start["mounts_dirty"] + 1, (start, end)
    assert end["mount_spares"] == start["mount_spares"], (start, end)
    seen, _ = await next_view(rt)
    assert seen == fresh


async def test_the_namespace_is_looked_at_once_the_sessions_boxes_are_dead(
    rt: LocalRuntime,
) -> None:
    """A session deleted while its program writes: nothing it wrote reaches the next one."""
    fresh = await fresh_view(rt)
    (a,) = await sessions(rt, 1)
    writer = asyncio.create_task(
        run(a, command="i=0; while :; do echo $i > /tmp/w$((i % 3)); i=$((i+1)); done")
    )
    await asyncio.sleep(0.5)
    before = await master_stats(a)
    await a.close()
    await asyncio.gather(writer, return_exceptions=True)
    await settled(a)
    seen, after = await next_view(rt)
    assert seen == fresh
    assert after["mounts_dirty"] == before["mounts_dirty"] + 1, (before, after)


async def test_a_reused_namespace_forks_and_is_then_never_reused(rt: LocalRuntime) -> None:
    """A fork freezes the parent's layer in its (reused) namespace and the children build
    theirs from it, so the parent's must never become another session's."""
    (donor,) = await sessions(rt, 1)
    await run(donor, command="true")
    await donor.close()
    await settled(donor)
    (parent,) = await sessions(rt, 1)
    reused = (await master_stats(parent))["mounts_reused"]
    out = await run(parent, command="echo from-parent > /sandbox/p")
    assert out.exit_code == 0, out
    assert (await master_stats(parent))["mounts_reused"] == reused + 1  # the donor's namespace
    (kid,) = await parent.fork([f"kid-{secrets.token_hex(3)}"])
    assert isinstance(kid, LocalSession)
    try:
        before = await master_stats(parent)
        await parent.close()
        after = await settled(parent)
        # not offered at all (it would count as dirty: it holds a file)
        assert after["mount_spares"] == before["mount_spares"], (before, after)
        assert after["mounts_dirty"] == before["mounts_dirty"], (before, after)
        (other,) = await sessions(rt, 1)
        try:
            await run(other, command="echo other > /sandbox/f")
            out = await run(kid, command="cat /sandbox/p; echo kid > /sandbox/f; cat /sandbox/f")
            assert out.output == b"from-parent\nkid\n", out
            assert (await run(other, command="cat /sandbox/f; ls /sandbox")).output == b"other\nf\n"
        finally:
            await other.close()
    finally:
        await kid.close()
