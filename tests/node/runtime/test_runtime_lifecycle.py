# ruff: noqa: ASYNC240
# (the tests inspect the host with plain blocking calls on purpose)
"""No leaks after many sessions, execs, failures and close; bake; the none driver."""

from __future__ import annotations

import asyncio
import os
import secrets
import warnings
from pathlib import Path

import pytest

from collimate_rl.node.runtime import (
    BUILTIN_TEMPLATE,
    BwrapStatus,
    Isolation,
    LocalRuntime,
    LocalSession,
    create_runtime,
    detect_bwrap,
)

from .conftest import SANDBOX_UID, TEST_LIMITS, run

pytestmark = [pytest.mark.anyio]


def procs_of_uid(uid: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            for line in (p / "status").read_text().splitlines():
                if line.startswith("Uid:"):
                    if int(line.split()[1]) == uid:
                        out.append(int(p.name))
                    break
        except OSError:
            continue
    return out


async def until_no_process_of(uid: int, seconds: float = 2.0) -> list[int]:
    """Wait (at most ``seconds``) for every process of ``uid`` to be gone; those left."""
    for _ in range(int(seconds / 0.02)):
        if not procs_of_uid(uid):
            break
        await asyncio.sleep(0.02)
    return procs_of_uid(uid)


def mounts_mentioning(text: str) -> list[str]:
    return [ln for ln in Path("/proc/self/mountinfo").read_text().splitlines() if text in ln]


@pytest.mark.bwrap
@pytest.mark.parametrize("light", [True, False], ids=["light", "servers"])
async def test_no_leaks_after_heavy_use_and_close(
    require_bwrap: None, tmp_state: Path, light: bool
) -> None:
    uid = SANDBOX_UID + 1  # a uid of its own: nothing else runs as it
    assert procs_of_uid(uid) == []
    rt = create_runtime(
        "bwrap", state_dir=tmp_state, limits=TEST_LIMITS, sandbox_uid=uid, light_sessions=light
    )
    await rt.start()
    try:
        assert procs_of_uid(uid)  # the template host runs as the sandbox uid
        sessions = [await rt.create_session("python3", f"leak{i}") for i in range(12)]
        await asyncio.gather(*[run(s, command="echo hi > f; sleep 0.1 &") for s in sessions])
        await run(sessions[0], command="sleep 10", timeout=0.3)  # timeout
        await run(sessions[1], code="raise RuntimeError('x')")  # failure
        await run(
            sessions[2],
            code="import os\nwhile True:\n    try: os.fork()\n    except OSError: pass",
            timeout=1,
        )
        await run(sessions[3], command="yes", timeout=30)  # flood
        await run(
            sessions[4],
            code="import os\nif os.fork() == 0:\n    os.setsid(); import time; time.sleep(60)\n",
        )
        kids = await sessions[5].fork([f"leak-k{i}" for i in range(6)])
        await asyncio.gather(*[run(k, command="cat f") for k in kids])  # type: ignore[arg-type]
        for s in sessions[:6]:
            await s.close()
        socks = list(tmp_state.rglob("*.sock"))
        assert {p.name for p in socks} >= {"master.sock"}
        (host,) = rt._hosts.values()
        if light:  # records in the master: no socket, no process of their own
            assert {p.name for p in socks} == {"master.sock"}
            assert (await host.master({"op": "stats"}))["light"] == 6 + 6
        else:
            assert len(socks) == 1 + 6 + 6  # master + open sessions + kids
        for k in kids:
            await k.close()
        if not light:
            assert len(list(tmp_state.rglob("*.sock"))) == 1 + 6
        # 6 live sessions: each is exactly two processes (its server and its
        # factory), or none (light: the template's zygote and workers are its only
        # other processes); closed ones are SIGKILLed and reaped asynchronously
        expected = 3 + (1 + host.workers.size if light else 2 * 6)  # bwrap x2 + master + ...
        for _ in range(100):
            host_pids = procs_of_uid(uid)
            if len(host_pids) <= expected:
                break
            await asyncio.sleep(0.02)
        assert len(host_pids) <= expected, host_pids
        if light:
            stats = await host.master({"op": "stats"})
            assert stats["light"] == 6 and stats["boxes"] == 0, stats
    finally:
        await rt.close()
    assert await until_no_process_of(uid) == []
    assert not tmp_state.exists()
    assert mounts_mentioning(str(tmp_state)) == []
    assert mounts_mentioning("collimate") == []


@pytest.mark.bwrap
async def test_runtime_default_state_dir_is_removed(require_bwrap: None) -> None:
    rt = create_runtime("bwrap", sandbox_uid=SANDBOX_UID + 2)
    await rt.start()
    state = rt.state_dir
    assert state.is_dir()
    s = await rt.create_session(BUILTIN_TEMPLATE, "x")
    assert (await run(s, command="echo ok")).output == b"ok\n"
    await rt.close()
    await rt.close()  # idempotent
    assert not state.exists()


@pytest.mark.bwrap
async def test_bake_custom_template(rt: LocalRuntime) -> None:
    spec = await rt.bake(
        "baked-" + secrets.token_hex(3),
        "python3",
        [
            # the user site of the sandbox's Python (the node's version, whatever it is)
            "d=$(python3 -c 'import site; print(site.getusersitepackages())')/bakedmod"
            " && mkdir -p $d && echo 'VALUE = 42' > $d/__init__.py",
            "echo baked > /sandbox/baked.txt",
            "python3 -c 'print(1+1)'",
        ],
        network=False,
    )
    assert spec.template_id in rt.templates()
    assert len(spec.layers) == 1
    s = await rt.create_session(spec.template_id, "b1")
    try:
        out = await run(s, command="cat baked.txt")
        assert out.output == b"baked\n"
        out = await run(s, code="import sys, bakedmod; print(bakedmod.VALUE)")
        assert out.output == b"42\n", out.output
        await run(s, command="echo mine > baked.txt")
        (k,) = await s.fork(["b2"])
        assert (await run(k, command="cat baked.txt")).output == b"mine\n"  # type: ignore[arg-type]
        await k.close()
        s2 = await rt.create_session(spec.template_id, "b3")
        assert (await run(s2, command="cat baked.txt")).output == b"baked\n"
        await s2.close()
        # a bake stacks on a baked base
        spec2 = await rt.bake(
            spec.template_id + "-2", spec.template_id, ["echo two > two.txt"], network=False
        )
        assert len(spec2.layers) == 2
        s3 = await rt.create_session(spec2.template_id, "b4")
        assert (await run(s3, command="cat baked.txt two.txt")).output == b"baked\ntwo\n"
        await s3.close()
    finally:
        await s.close()
    with pytest.raises(Exception, match="bake"):
        await rt.bake("bad-bake", "python3", ["exit 7"], network=False)
    assert "bad-bake" not in rt.templates()


@pytest.mark.bwrap
async def test_bake_setup_without_network_cannot_reach_out(rt: LocalRuntime) -> None:
    with pytest.raises(Exception, match="bake"):
        await rt.bake(
            "netless",
            "python3",
            ["python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=2)\""],
            network=False,
        )


def test_detect_bwrap_reports() -> None:
    status = detect_bwrap(SANDBOX_UID)
    assert isinstance(status, BwrapStatus)
    assert status.reason
    if status.usable:
        assert status.path and status.version


def test_auto_picks_bwrap_or_explains() -> None:
    status = detect_bwrap()
    if status.usable:
        rt = create_runtime()
        assert rt.isolation is Isolation.BWRAP
    else:
        with pytest.raises(Exception, match="isolation='none'"):
            create_runtime()


async def test_none_driver_warns_and_runs(tmp_state: Path) -> None:
    rt = create_runtime("none", state_dir=tmp_state, limits=TEST_LIMITS)
    assert rt.isolation is Isolation.NONE
    with pytest.warns(RuntimeWarning, match="WITHOUT ANY ISOLATION"):
        await rt.start()
    try:
        s = await rt.create_session("python3", "n1")
        out = await run(s, files=(("f.txt", b"abc\x00"),), command="cat f.txt; echo; exit 2")
        assert out.output == b"abc\x00\n" and out.exit_code == 2
        out = await run(
            s,
            seed="11" * 32,
            code="import random, os; print(random.random(), os.environ['COLLIMATE_SEED'][:4])",
        )
        out2 = await run(
            s,
            seed="11" * 32,
            code="import random, os; print(random.random(), os.environ['COLLIMATE_SEED'][:4])",
        )
        assert out.output == out2.output and out.output.endswith(b" 1111\n")
        out = await run(s, command="echo x; sleep 20", timeout=0.5)
        assert out.exit_code == -1 and out.output == b"x\ntimeout after 0.5s"
        out = await run(s, commands=(("echo", "a b"),))
        assert out.output == b"a b\n"
        await run(s, command="echo p > p.txt")
        (k,) = await s.fork(["n2"])
        assert isinstance(k, LocalSession)
        await run(k, command="echo k > p.txt")
        assert (await run(s, command="cat p.txt")).output == b"p\n"
        assert (await run(k, command="cat p.txt")).output == b"k\n"
        await k.close()
        await s.close()
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await rt.close()
    assert not tmp_state.exists()


@pytest.mark.bwrap
async def test_sessions_survive_many_execs(rt: LocalRuntime) -> None:
    s = await rt.create_session("python3", "many")
    try:
        outs = await asyncio.gather(*[run(s, code=f"print({i})") for i in range(40)])
        assert [o.output for o in outs] == [f"{i}\n".encode() for i in range(40)]
        assert await _alive(s)
    finally:
        await s.close()
    assert not await _alive(s)


def _masters_below(root: int) -> list[int]:
    """The template masters below process ``root``: a ``col-master`` whose parent is not
    one (a session server forked from the master keeps its name)."""

    def comm(pid: int) -> str:
        return (Path("/proc") / str(pid) / "comm").read_text().strip()

    def parent(pid: int) -> int:
        return int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])

    found = []
    for p in Path("/proc").iterdir():
        try:
            if not p.name.isdigit() or comm(int(p.name)) != "col-master":
                continue
            if comm(parent(int(p.name))) == "col-master":
                continue
            pid = int(p.name)
            while pid > 1 and pid != root:
                pid = parent(pid)
            if pid == root:
                found.append(int(p.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


@pytest.mark.parametrize("driver", ["bwrap", "none"])
async def test_a_master_reads_its_config_from_stdin_not_argv(
    driver: str, tmp_state: Path, request: pytest.FixtureRequest
) -> None:
    # The config (with the warm harness's code, ~90 KB) on the command line cost every
    # process forked from the master ~1.8 MiB: the interpreter keeps argv as wide strings.
    if driver == "bwrap":
        request.getfixturevalue("require_bwrap")
    rt = create_runtime(driver, state_dir=tmp_state, limits=TEST_LIMITS, sandbox_uid=SANDBOX_UID)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the none driver says it is unisolated
        await rt.start()
    try:
        s = await rt.create_session("python3", "cfg")
        assert (await run(s, code="print(6 * 7)")).output == b"42\n"  # it read it all
        host = rt._hosts["python3"].proc  # the template's container (or its master)
        assert host is not None
        (master,) = _masters_below(host.pid)
        argv = (Path("/proc") / str(master) / "cmdline").read_bytes().split(b"\0")[:-1]
        assert argv[-1] == b"-" and len(b" ".join(argv)) < 512, argv
        assert os.readlink(f"/proc/{master}/fd/0") == "/dev/null"  # read, then /dev/null again
        await s.close()
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await rt.close()


async def _alive(s: object) -> bool:
    """Whether the session's template master still has it (a record or a server)."""
    assert isinstance(s, LocalSession)
    reply = await s._host.master({"op": "alive", "keys": [s._key]})
    return bool(reply["alive"])


@pytest.mark.bwrap
async def test_memory_cgroup_safety_net(require_bwrap: None, tmp_state: Path) -> None:
    from collimate_rl.node.runtime.memcg import memcg_parent

    if memcg_parent() is None:
        pytest.skip("no writable cgroup-v1 memory controller (needs root)")
    rt = create_runtime(
        "bwrap",
        state_dir=tmp_state,
        sandbox_uid=SANDBOX_UID + 3,
        memory_limit_bytes=192 << 20,
    )
    await rt.start()
    try:
        assert rt.info()["memory_cgroup"]
        (host,) = rt._hosts.values()
        assert host.memcg is not None
        cg = host.memcg.path
        assert (cg / "memory.limit_in_bytes").read_text().strip() == str(192 << 20)
        s = await rt.create_session("python3", "mem")
        out = await run(s, code="a = bytearray(150 << 20); b = bytearray(150 << 20); print('x')")
        assert out.exit_code == -9  # OOM-killed inside the cgroup, not the host
        assert (await run(s, code="print('ok')")).output == b"ok\n"
    finally:
        await rt.close()
    assert not cg.exists()


@pytest.mark.bwrap
async def test_template_host_crash_is_reported(rt: LocalRuntime) -> None:
    from collimate_rl.node.runtime import RuntimeError_, SessionLost, TemplateSpec

    await rt.add_template(TemplateSpec("crashy"))
    s = await rt.create_session("crashy", "c1")
    host = rt._hosts["crashy"]
    assert host.proc is not None
    host.proc.kill()  # the whole container dies
    host.proc.wait()
    with pytest.raises(SessionLost):
        await run(s, command="true")
    with pytest.raises(RuntimeError_):
        await rt.create_session("crashy", "c2")
    await s.close()
    # other templates are unaffected
    other = await rt.create_session("python3", "after-crash")
    assert (await run(other, command="echo ok")).output == b"ok\n"
    await other.close()


@pytest.mark.bwrap
async def test_close_during_exec(require_bwrap: None, tmp_state: Path) -> None:
    from collimate_rl.node.runtime import SessionLost

    rt = create_runtime("bwrap", state_dir=tmp_state, sandbox_uid=SANDBOX_UID + 4)
    await rt.start()
    s = await rt.create_session("python3", "x")
    task = asyncio.create_task(run(s, command="sleep 30"))
    await asyncio.sleep(0.3)
    await rt.close()
    with pytest.raises(SessionLost):
        await asyncio.wait_for(task, 10)
    assert not tmp_state.exists()
    for _ in range(100):
        if not procs_of_uid(SANDBOX_UID + 4):
            break
        await asyncio.sleep(0.02)
    assert procs_of_uid(SANDBOX_UID + 4) == []
