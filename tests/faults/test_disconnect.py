"""A client that dies mid-request: its execs are cancelled, not left to their timeouts.

A trainer killed in the middle of a ``grade_batch`` closes its connections;
the node cancels every exec those connections were waiting for (running or
queued), kills their processes and frees their admission slots at once, so a
restarted trainer does not queue behind them. The abandoned execs here would
run for an hour: the fresh client getting a slot at all (within pytest's
timeout) is what proves the cancellation; how long it waited is printed as a
benchmark figure (see docs/reliability.md), never asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from collimate_rl.node.runtime import SANDBOX_UID_BASE, resolve_sandbox_uid

from ._proc import (
    ISOLATION,
    NodeProcess,
    alive,
    process_tree,
    processes_with,
    standby_exec_boxes,
)

Make = Callable[..., NodeProcess]

#: In the abandoning worker: one session exec and six grades that would each
#: run for an hour (sleeping children with a marker, and busy loops).
_ABANDONER = r"""
import sys, threading
from collimate_rl.grading import UnitTestReward, grade_batch
from collimate_rl.wire import CollimateClient

# The markers are computed, so this process's own command line does not carry them.
mark = 3600 + 0.4242
client = CollimateClient(unix_socket=sys.argv[1], retries=0)
spec = UnitTestReward([{"input": [1, 2], "expected": 3}], entry="add")
sleeper = f"```python\nimport subprocess\nsubprocess.run(['sleep', '{mark}'])\n```"
busy = "```python\nwhile True:\n    pass\n```"
threading.Thread(
    target=client.session_exec,
    args=(sys.argv[2],),
    kwargs={"command": f"sleep {mark + 0.0001:.4f}", "timeout_seconds": 3600},
    daemon=True,
).start()
grade_batch(client, "python3", [sleeper, busy] * 3, spec, timeout_seconds=3600, concurrency=6)
"""


def _wait(what: str, ok: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for: {what}"
        time.sleep(0.05)


def test_a_killed_client_frees_its_slots_and_processes_at_once(make_node: Make) -> None:
    node = make_node("--max-inflight", "2", "--queue", "64", "--pool-size", "0").start()
    client = node.client()
    sid = client.create_session("python3")["session_id"]
    # one exec first: the session's pristine factory starts with its first request and
    # then belongs to the session for its whole life, not to the work abandoned below
    assert client.session_exec(sid, command="true")["exit_code"] == 0
    idle = process_tree(node.pid)

    worker = subprocess.Popen(
        [sys.executable, "-c", _ABANDONER, str(node.socket), sid],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        # Both slots taken and the five other requests queued behind them.
        _wait(
            "2 running, 5 queued",
            lambda: (h := client.health())["running"] == 2 and h["queued"] == 5,
        )
        _wait("a hanging process", lambda: bool(processes_with("3600.424")))
        if ISOLATION != "none" and os.geteuid() == 0:
            # ... running as the node's dedicated sandbox uid, not root and not nobody
            status = Path(f"/proc/{processes_with('3600.424')[0]}/status").read_text()
            uid = int(status.split("\nUid:")[1].split()[0])
            assert uid == resolve_sandbox_uid(None) and uid >= SANDBOX_UID_BASE
        busy = process_tree(node.pid) - idle
        assert busy, "the abandoned execs have processes"

        worker.kill()  # a trainer crash: no goodbye, the kernel closes its sockets
        killed = time.monotonic()
        fresh = node.client(retries=0)
        out = fresh.exec_once("python3", code="print('fresh')", timeout_seconds=10)
        waited = time.monotonic() - killed
        assert out["stdout"] == "fresh\n"
        print(f"\nfresh client's exec done {waited * 1e3:.0f} ms after the kill")
    finally:
        worker.kill()
        worker.wait()

    # Nothing of the abandoned work is left: slots, queue, processes, sessions.
    _wait("an idle node", lambda: (h := client.health())["running"] == 0 and h["queued"] == 0)
    # what may stay is the session's standby exec box (the next exec's): it goes with the session
    _wait(
        "the abandoned processes gone",
        lambda: not alive(busy) - standby_exec_boxes(busy),
        timeout=10,
    )
    assert len(standby_exec_boxes(busy)) <= 1
    assert processes_with("3600.424") == []
    assert [s["session_id"] for s in client.list_sessions()] == [sid]
    # The session whose exec was cancelled is still usable; the result was dropped.
    assert client.session_exec(sid, command="echo alive")["stdout"] == "alive\n"
    assert client.get_session(sid)["exec_count"] == 3
    client.delete_session(sid)
    _wait("the session's standby exec box gone", lambda: not alive(busy), timeout=10)
    fresh.close()
    client.close()
    assert node.stop() == 0
    node.assert_clean_stop()
