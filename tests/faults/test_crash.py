"""A node killed mid-exec and mid-fork; its restart on the same state dir and address.

Each test SIGKILLs a node it owns (no drain, no cleanup), checks the callers got
typed errors and that nothing was resent, then starts a node on the same socket
and state dir and checks the crashed run left nothing behind and the same
client objects work again.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from collimate_envs import info as keys
from collimate_envs.tasks import load_task_set
from collimate_envs.vector import GroupVectorEnv
from collimate_rl.errors import CollimateNotFoundError, CollimateTransportError
from collimate_rl.grading import UnitTestReward, grade_batch
from collimate_rl.node.runtime._recovery import claim_state_dir, sweep_orphan_state_dirs
from collimate_rl.sandbox import Sandbox
from collimate_rl.wire import CollimateClient

from ._proc import ISOLATION, NodeProcess, processes_with, session_sockets, template_master
from .conftest import CountingTransport

Make = Callable[..., NodeProcess]

ADD = UnitTestReward([{"input": [1, 2], "expected": 3}], entry="add")


def _wait_for(cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _in_background(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _sleeper(marker: str) -> str:
    """A completion that blocks in a child ``sleep <marker>`` (visible from the host)."""
    return (
        f"```python\nimport os\nos.system('sleep {marker}')\ndef add(a, b):\n    return a + b\n```"
    )


def test_node_killed_mid_exec_then_restarted(make_node: Make) -> None:
    node = make_node("--pool-size", "0").start()
    counting = CountingTransport(node.socket)
    client = CollimateClient(unix_socket=str(node.socket), transport=counting)
    sid = client.create_session("python3")["session_id"]
    thread, out = _in_background(
        lambda: client.session_exec(sid, command="sleep 30.5151; echo done", timeout_seconds=60)
    )
    _wait_for(lambda: processes_with("30.5151") != [], "the exec to run")
    run = node.snapshot()
    node.kill()
    thread.join(30)

    # The caller gets a typed transport error, and the ambiguous exec is never resent.
    assert isinstance(out.get("error"), CollimateTransportError), out
    assert counting.posts(f"/v1/sessions/{sid}/exec") == 1
    # Every process of the crashed run died with it, before any restart (unisolated,
    # a grandchild of the exec may wait for the restart's recovery).
    if ISOLATION != "none":
        run.assert_gone(cgroups=False)
        assert processes_with("30.5151") == []

    node.start()
    assert "cleared leftovers of a crashed node" in node.log_text()
    run.assert_gone()  # its memory cgroups too
    assert processes_with("30.5151") == []
    assert session_sockets(node.state) == []
    # The same client object reconnects (its first call is a POST, never resent on a
    # stale pooled connection); the dead session is a typed 404.
    with pytest.raises(CollimateNotFoundError):
        client.session_exec(sid, command="true")
    assert counting.posts(f"/v1/sessions/{sid}/exec") == 2
    assert client.health()["status"] == "ok"
    with pytest.raises(CollimateNotFoundError):
        Sandbox.attach(client, sid)
    with pytest.raises(CollimateNotFoundError):
        Sandbox.adopt(client, sid, template="python3").exec(command="true")
    fresh = client.create_session("python3")["session_id"]
    assert client.session_exec(fresh, command="echo again")["stdout"] == "again\n"
    client.close()
    assert node.stop() == 0
    node.assert_clean_stop()


def test_a_dying_node_is_an_infra_failure_for_grading_and_the_env(make_node: Make) -> None:
    node = make_node().start()
    counting = CountingTransport(node.socket)
    client = CollimateClient(unix_socket=str(node.socket), transport=counting)
    env = GroupVectorEnv(2, 2, client=client, timeout_seconds=30)
    env.reset(seed=1)
    marker = "20.7373"
    flagged = _in_background(
        lambda: grade_batch(
            client,
            "python3",
            [_sleeper(marker)] * 3,
            ADD,
            on_infra_error="zero",
            timeout_seconds=30,
        )
    )
    raised = _in_background(
        lambda: grade_batch(client, "python3", [_sleeper(marker)] * 2, ADD, timeout_seconds=30)
    )
    stepped = _in_background(lambda: env.step([_sleeper(marker)] * 2))
    _wait_for(lambda: len(processes_with(marker)) >= 7, "every grade to run")
    run = node.snapshot()
    node.kill()
    for thread, _ in (flagged, raised, stepped):
        thread.join(60)

    # grade_batch: flagged infra failures (reward 0 *with* infra_error), or a typed raise.
    results = flagged[1]["value"]
    assert [r.infra_error for r in results] == [True] * 3
    assert all(r.reward == 0.0 and r.error for r in results)
    assert isinstance(raised[1].get("error"), CollimateTransportError)
    # The env: every member flagged, no advantage computed from a non-grade.
    _, rewards, terminated, _, info = stepped[1]["value"]
    assert list(info[keys.INFRA_ERROR]) == [True, True]
    assert np.isnan(info[keys.ADVANTAGE]).all()
    assert list(rewards) == [0.0, 0.0] and terminated.all()
    # Seven execs were sent (on this node: three batch requests); none was sent twice.
    assert counting.execs() == 7 and counting.posts("/exec/batch") == 3
    if ISOLATION != "none":  # unisolated, processes the harness detached wait for the restart
        run.assert_gone(cgroups=False)

    # After a restart the same env and client carry on with real grades.
    node.start()
    run.assert_gone()
    _, infos = env.reset(seed=2)
    task = {t.task_id: t for t in load_task_set("collimate-basic")}[infos[keys.TASK_ID][0]]
    good = f"```python\n{task.reference_solution}\n```"
    _, rewards, _, _, info = env.step([good, good])
    assert list(rewards) == [1.0, 1.0] and not info[keys.INFRA_ERROR].any()
    env.close()
    assert client.list_sessions() == []
    client.close()
    assert node.stop() == 0
    node.assert_clean_stop()


def test_node_killed_mid_fork(make_node: Make) -> None:
    node = make_node("--pool-size", "0").start()
    counting = CountingTransport(node.socket)
    client = CollimateClient(unix_socket=str(node.socket), transport=counting)
    parent = Sandbox("python3", client=client).start()
    parent.exec(command="echo kept > file.txt")
    master = template_master(node)
    os.kill(master, signal.SIGSTOP)  # the fork request is now stuck inside the node
    thread, out = _in_background(lambda: parent.fork(4))
    time.sleep(0.5)
    assert thread.is_alive(), out
    run = node.snapshot()
    node.kill()
    thread.join(30)

    assert isinstance(out.get("error"), CollimateTransportError), out
    assert counting.posts("/fork") == 1
    run.assert_gone(cgroups=False)  # SIGKILL reaches the stopped master too

    node.start()
    run.assert_gone()
    assert session_sockets(node.state) == []
    with pytest.raises(CollimateNotFoundError):
        parent.exec(command="cat file.txt")
    parent.close()  # never raises, even for a session that is gone
    assert client.list_sessions() == []
    client.close()
    assert node.stop() == 0
    node.assert_clean_stop()


def test_second_node_on_a_live_state_dir_fails_and_touches_nothing(make_node: Make) -> None:
    first = make_node("--pool-size", "0", name="first").start()
    client = first.client()
    sid = client.create_session("python3")["session_id"]
    client.session_exec(sid, command="echo mine > f.txt")
    second = make_node(name="second", state=first.state)
    with pytest.raises(AssertionError, match="node exited 1"):
        second.start(timeout=60)
    assert "StateDirBusy" in second.log_text() and "in use by a live node" in second.log_text()
    assert "Traceback" not in second.log_text()
    assert not second.socket.exists()
    # The first node did not notice.
    assert client.session_exec(sid, command="cat f.txt")["stdout"] == "mine\n"
    assert first.record()["pid"] == first.pid
    client.close()
    assert first.stop() == 0
    first.assert_clean_stop()


_CRASHED_OWNER = r"""
import os, socket, subprocess, sys, time
from pathlib import Path
from collimate_rl.node.runtime._recovery import claim_state_dir
from collimate_rl.node.runtime.memcg import memcg_parent

state, workdir = Path(sys.argv[1]), Path(sys.argv[2])
claim, _ = claim_state_dir(state)
sessions = state / "t" / "1" / "sessions" / "k1"
sessions.mkdir(parents=True)
socks = state / "t" / "1" / "socks"
socks.mkdir()
for name in ("1.sock", "master.sock"):
    s = socket.socket(socket.AF_UNIX); s.bind(str(socks / name)); s.close()
quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
# a recorded host with a member of its process group, and a process living in a
# session folder (the none driver's sessions)
host = subprocess.Popen(["sh", "-c", "sleep 3131.2 & exec sleep 3131.1"], start_new_session=True, **quiet)
claim.note_host(host.pid)
subprocess.Popen(["sleep", "3131.3"], cwd=sessions, start_new_session=True, **quiet)
parent = memcg_parent()
if parent is not None:
    cg = parent / "collimate-feedf00d-t1"
    cg.mkdir()
    def enter():
        with open(cg / "cgroup.procs", "w") as fh:
            fh.write(str(os.getpid()))
    subprocess.Popen(["sleep", "3131.4"], start_new_session=True, preexec_fn=enter, **quiet)
    claim.note_memcg(parent, "feedf00d")
if os.geteuid() == 0:
    (state / "t" / "1" / "mnt").mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "stale", str(state / "t" / "1" / "mnt")], check=True)
old = socket.socket(socket.AF_UNIX); old.bind(str(workdir / "old.sock")); old.close()
claim.note_listen_socket(workdir / "old.sock")
(state / "ready").touch()
time.sleep(3600)
"""


def _mounted_under(path: Path) -> list[str]:
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return [ln.split()[4] for ln in lines if ln.split()[4].startswith(str(path))]


def test_restart_clears_what_a_crashed_owner_left(make_node: Make, tmp_path: Path) -> None:
    import subprocess
    import sys

    state = tmp_path / "state"
    owner = subprocess.Popen(
        [sys.executable, "-c", _CRASHED_OWNER, str(state), str(tmp_path)],
        stdin=subprocess.DEVNULL,
    )
    try:
        _wait_for(lambda: owner.poll() is not None or (state / "ready").exists(), "the owner", 30)
        assert owner.poll() is None, "the crashed owner failed to set up"
        owner.kill()  # the owner crashes; its lock is released, its leftovers are not
        owner.wait(10)
        markers = ["3131.1", "3131.2", "3131.3"]
        if (state / "node.run.json").read_text().count("feedf00d"):
            markers.append("3131.4")
        assert all(processes_with(m) for m in markers)
        assert (tmp_path / "old.sock").exists()

        node = make_node("--pool-size", "0", state=state).start()
        log = node.log_text()
        assert "cleared leftovers of a crashed node" in log, log
        _wait_for(lambda: not any(processes_with(m) for m in markers), "leftovers to die", 10)
        assert _mounted_under(state) == []
        assert not (tmp_path / "old.sock").exists()
        assert not (state / "t" / "1" / "sessions" / "k1").exists()
        assert session_sockets(state) == []
        if "3131.4" in markers:
            from collimate_rl.node.runtime.memcg import memcg_parent

            parent = memcg_parent()
            assert parent is not None and not (parent / "collimate-feedf00d-t1").exists()
        client = node.client()
        assert client.exec_once("python3", command="echo ok")["stdout"] == "ok\n"
        client.close()
        assert node.stop() == 0
        node.assert_clean_stop()
    finally:
        owner.kill()
        owner.wait(10)
        record = state / "node.run.json"
        if record.exists() and json.loads(record.read_text())["pid"] == owner.pid:
            claim, _ = claim_state_dir(state)  # the test failed before the restart
            claim.release()


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    # A private TMPDIR with a short path: unix socket paths are limited to 108 bytes.
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="cf-", dir="/tmp"))
    yield path
    sweep_orphan_state_dirs(path)  # a crashed node's leftovers, if the test failed early
    shutil.rmtree(path, ignore_errors=True)


def test_default_state_dirs_of_crashed_nodes_are_swept(make_node: Make, short_tmp: Path) -> None:
    tmp = short_tmp
    decoy = tmp / "collimate-node-decoy"
    (decoy / "t").mkdir(parents=True)  # no run record: not a node's dir, never touched
    env = {"TMPDIR": str(tmp)}
    crashed = make_node(name="crashed", env=env, state_flag=False).start()
    (crashed_dir,) = [d for d in tmp.glob("collimate-node-*") if d != decoy]
    crashed.kill()
    assert crashed_dir.exists()

    live = make_node(name="live", env=env, state_flag=False).start()
    assert not crashed_dir.exists()
    (live_dir,) = [d for d in tmp.glob("collimate-node-*") if d != decoy]
    other = make_node(name="other", env=env, state_flag=False).start()
    assert live_dir.exists() and decoy.exists()  # a live node's dir is never swept
    assert other.stop() == 0 and live.stop() == 0
    assert sorted(tmp.iterdir()) == [decoy]
