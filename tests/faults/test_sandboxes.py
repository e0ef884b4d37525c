"""Sandbox faults: a worker that dies holding sessions, and slow or stuck sandboxes.

A dead worker's sessions stay usable (``Sandbox.attach`` adopts them, closing
reaps them) and the idle ones are reaped by the TTL. A slow candidate gets a
correct grade, a hanging or self-stopping one a timeout verdict (a task
failure, never an infra error), daemons it leaves are swept, and a session
whose server is frozen can be abandoned by the caller and deleted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import anyio
import pytest

from collimate_rl.errors import CollimateNotFoundError
from collimate_rl.grading import UnitTestReward, grade_batch
from collimate_rl.sandbox import Sandbox
from collimate_rl.wire import AsyncCollimateClient

from ._proc import (
    ISOLATION,
    NodeProcess,
    children_of,
    comm,
    process_tree,
    processes_with,
    session_sockets,
    template_master,
)

Make = Callable[..., NodeProcess]

ADD = UnitTestReward(
    [{"input": [1, 2], "expected": 3}, {"input": [2, 2], "expected": 4}], entry="add"
)
GOOD = "def add(a, b):\n    return a + b\n"

_WORKER = r"""
import os, signal, sys
from collimate_rl.sandbox import Sandbox
from collimate_rl.wire import CollimateClient

client = CollimateClient(unix_socket=sys.argv[1])
for i in range(3):
    box = Sandbox("python3", client=client).start()
    box.exec(command=f"echo state-{i} > mine.txt")
    print(box.session_id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # dies holding all three
"""


def test_sessions_of_a_dead_worker_are_adopted_or_reaped(make_node: Make) -> None:
    node = make_node("--pool-size", "0", "--session-ttl", "4").start()
    # after one exec: the template's processes that outlive sessions (its master and,
    # with light sessions, the worker that runs their execs) are all there
    assert node.client().exec_once("python3", command="true")["exit_code"] == 0
    idle_tree = len(process_tree(node.pid))
    worker = subprocess.run(
        [sys.executable, "-c", _WORKER, str(node.socket)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert worker.returncode == -signal.SIGKILL, worker.stderr
    adopt, close, forget = worker.stdout.split()
    client = node.client()
    assert {s["session_id"] for s in client.list_sessions()} == {adopt, close, forget}

    # Adopt one: its files are still there, and it is ours to use and close.
    box = Sandbox.attach(client, adopt)
    assert box.template == "python3"
    assert box.exec(command="cat mine.txt").stdout == "state-0\n"
    # Reap one explicitly.
    Sandbox.attach(client, close).close()
    # The third nobody claims: the TTL reaps it; keep the adopted one busy meanwhile.
    deadline = time.monotonic() + 30
    while forget in {s["session_id"] for s in client.list_sessions()}:
        assert time.monotonic() < deadline, "the orphan was never reaped"
        box.exec(command="true")
        time.sleep(0.5)
    with pytest.raises(CollimateNotFoundError):
        Sandbox.attach(client, forget)
    with pytest.raises(CollimateNotFoundError):
        Sandbox.attach(client, close)
    box.close()
    assert client.list_sessions() == []
    assert session_sockets(node.state) == []
    deadline = time.monotonic() + 10
    while len(process_tree(node.pid)) > idle_tree and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(process_tree(node.pid)) == idle_tree  # every session process is gone
    client.close()
    assert node.stop() == 0
    node.assert_clean_stop()


HANGS = {
    "busy": "while True:\n    pass\n",
    "sleep": "import time\ntime.sleep(10**6)\n",
    "stopped": "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n",
    "in_call": "def add(a, b):\n    while True:\n        pass\n",
}


def test_slow_and_stuck_candidates_get_verdicts_not_infra_errors(make_node: Make) -> None:
    node = make_node().start()
    client = node.client()
    slow = f"import time\ntime.sleep(1.0)\n{GOOD}"
    daemon = (
        "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        os.execvp('sleep', ['sleep', '4343.21'])\n    os._exit(0)\n" + GOOD
    )
    programs = {"slow": slow, "daemon": daemon, **HANGS}
    completions = [f"```python\n{code}\n```" for code in programs.values()]
    results = dict(
        zip(
            programs,
            grade_batch(client, "python3", completions, ADD, timeout_seconds=3),
            strict=True,
        )
    )
    assert not any(r.infra_error for r in results.values()), results
    assert results["slow"].reward == 1.0 and results["daemon"].reward == 1.0
    for name in HANGS:
        assert results[name].reward == 0.0, (name, results[name])
    if ISOLATION != "none":  # the unisolated driver has no post-exec sweep (documented)
        assert processes_with("4343.21") == []  # the daemon did not outlive its exec

    # A raw exec past its timeout: exit -1, and its processes are gone.
    sid = client.create_session("python3")["session_id"]
    out = client.session_exec(sid, command="sleep 999.3131 & sleep 999.3131", timeout_seconds=1)
    assert out["exit_code"] == -1
    assert processes_with("999.3131") == []
    assert client.session_exec(sid, command="echo alive")["stdout"] == "alive\n"
    client.delete_session(sid)
    assert client.list_sessions() == []
    client.close()
    assert node.stop() == 0
    node.assert_clean_stop()


@pytest.mark.anyio
@pytest.mark.parametrize("template", ["python3-net", "python3"], ids=["server", "light"])
async def test_a_frozen_session_can_be_abandoned_and_deleted(
    make_node: Make, template: str
) -> None:
    if ISOLATION == "none" and template.endswith("-net"):
        pytest.skip("networked templates need the bwrap driver")
    node = make_node("--pool-size", "0").start()
    master = template_master(node)
    before = children_of(master)
    async with AsyncCollimateClient(unix_socket=str(node.socket), retries=0) as client:
        sid = (await client.create_session(template))["session_id"]
        if template == "python3" and ISOLATION != "none":
            # a light session has no server: the process that answers its execs is
            # the template's worker (started by the first one)
            assert (await client.session_exec(sid, command="true"))["exit_code"] == 0
        # the session's server, or the worker (not the exec's box, which may still be going)
        (server,) = {p for p in children_of(master) - before if comm(p) != "col-exec"}
        os.kill(server, signal.SIGSTOP)  # the sandbox is wedged: no reply will ever come
        try:
            with anyio.fail_after(3):
                await client.session_exec(sid, command="echo never", timeout_seconds=5)
            raise AssertionError("a frozen session answered")
        except TimeoutError:
            pass  # the caller gave up; nothing was retried behind its back
        assert (await client.delete_session(sid))["deleted"] is True
        for _ in range(200):  # the abandoned exec frees its slot once its session is gone
            if (await client.health())["running"] == 0:
                break
            await anyio.sleep(0.05)
        assert (await client.health())["running"] == 0
        for _ in range(200):  # SIGKILLed with its session; it may take a moment to go
            if server not in children_of(master):
                break
            await anyio.sleep(0.02)
        assert server not in children_of(master)
        assert await client.list_sessions() == []
        assert (await client.exec_once("python3", command="echo fine"))["stdout"] == "fine\n"
    assert session_sockets(node.state) == []
    assert node.stop() == 0
    node.assert_clean_stop()
