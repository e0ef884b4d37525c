"""Load faults: a drain while a GRPO batch is in flight, and a burst past admission.

The promises: in-flight work finishes with real grades; work the node refuses
(``draining``, ``at_capacity``) reaches the caller as a typed error or a
flagged ``infra_error`` result, never as a plain reward of 0; a refused exec
is never run, and a retried one never runs twice; nothing is left afterwards.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import numpy as np
import pytest

from collimate_envs import info as keys
from collimate_envs.tasks import load_task_set
from collimate_envs.vector import GroupVectorEnv
from collimate_rl.errors import (
    CollimateCapacityError,
    CollimateDrainingError,
    CollimateTransportError,
)
from collimate_rl.grading import UnitTestReward, grade_batch
from collimate_rl.wire import AsyncCollimateClient, CollimateClient

from ._proc import NodeProcess, session_sockets

Make = Callable[..., NodeProcess]

ADD = UnitTestReward([{"input": [1, 2], "expected": 3}], entry="add")
TASKS = {t.task_id: t for t in load_task_set("collimate-basic")}


def _slow(code: str, marker: str) -> str:
    """``code`` as a completion that first blocks in a child ``sleep <marker>``."""
    return f"```python\nimport os\nos.system('sleep {marker}')\n{code}\n```"


def _wait_for(cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_drain_lets_an_in_flight_grpo_batch_finish(make_node: Make) -> None:
    node = make_node("--drain-timeout", "60").start()
    client = node.client()
    env = GroupVectorEnv(4, 4, client=client, timeout_seconds=20)
    _, infos = env.reset(seed=3)
    task = TASKS[infos[keys.TASK_ID][0]]
    marker = "4.4141"
    good = _slow(task.reference_solution, marker)
    bad = _slow(task.wrong_solution or f"def {task.entry_point}(*a):\n    return None", marker)
    out: dict[str, Any] = {}
    worker = threading.Thread(
        target=lambda: out.setdefault("step", env.step([good, good, bad, bad]))
    )
    worker.start()
    _wait_for(lambda: client.health()["running"] == 4, "the batch to be in flight")
    run = node.snapshot()
    os.kill(node.pid, signal.SIGTERM)
    _wait_for(lambda: client.health()["status"] == "draining", "the drain", 10)

    # Work arriving during the drain is refused before it runs: flagged, or a typed raise.
    late = CollimateClient(unix_socket=str(node.socket), retries=0)
    flagged = grade_batch(late, "python3", ["```python\ndef add(a, b): return a + b\n```"], ADD,
                          on_infra_error="zero")  # fmt: skip
    assert flagged[0].infra_error and "draining" in (flagged[0].error or "")
    with pytest.raises(CollimateDrainingError):
        grade_batch(late, "python3", ["```python\ndef add(a, b): return a + b\n```"], ADD)
    late.close()

    worker.join(60)
    _, rewards, terminated, _, info = out["step"]
    assert not info[keys.INFRA_ERROR].any()  # the in-flight batch got real grades
    assert rewards[0] == rewards[1] == 1.0 and max(rewards[2:]) < 1.0
    assert terminated.all() and not np.isnan(info[keys.ADVANTAGE]).any()
    # The next episode meets the drain. Its members may have been forked ahead (then the
    # autoreset succeeds), but no grade comes back as a reward: a typed error, or flags.
    try:
        env.step([good] * 4)  # the autoreset step
        _, rewards, _, _, info = env.step([good] * 4)
    except (CollimateDrainingError, CollimateTransportError):
        pass
    else:
        assert info[keys.INFRA_ERROR].all() and np.isnan(info[keys.ADVANTAGE]).all()
        assert (rewards == 0.0).all()
    env.close()
    assert node.proc is not None and node.proc.wait(60) == 0
    run.assert_gone()
    node.assert_clean_stop()
    client.close()


def test_a_burst_past_admission_is_shed_never_scored(make_node: Make) -> None:
    node = make_node("--max-inflight", "1", "--queue", "1", "--pool-size", "0").start()
    no_retry = CollimateClient(unix_socket=str(node.socket), retries=0)
    correct = _slow("def add(a, b):\n    return a + b", "0.3131")

    results = grade_batch(
        no_retry, "python3", [correct] * 8, ADD, concurrency=8, on_infra_error="zero"
    )
    shed = [r for r in results if r.infra_error]
    graded = [r for r in results if not r.infra_error]
    assert shed and graded and len(shed) + len(graded) == 8
    assert all("CollimateCapacityError" in (r.error or "") and r.reward == 0.0 for r in shed)
    assert all(r.reward == 1.0 for r in graded)
    with pytest.raises(CollimateCapacityError):
        grade_batch(no_retry, "python3", [correct] * 8, ADD, concurrency=8)

    # A client that retries resends only the shed items (they never ran) until all grade.
    retrying = CollimateClient(unix_socket=str(node.socket), retries=6, backoff=0.05)
    results = grade_batch(retrying, "python3", [correct] * 4, ADD, concurrency=8)
    assert [r.reward for r in results] == [1.0] * 4
    retrying.close()

    # The vector env flags shed members and leaves them out of the group's advantage.
    env = GroupVectorEnv(4, 4, client=no_retry, concurrency=4, timeout_seconds=20)
    _, infos = env.reset(seed=4)
    good = _slow(TASKS[infos[keys.TASK_ID][0]].reference_solution, "0.3131")
    _, rewards, _, _, info = env.step([good] * 4)
    flags = np.asarray(info[keys.INFRA_ERROR])
    assert flags.any() and not flags.all()
    assert (rewards[~flags] == 1.0).all() and np.isnan(info[keys.ADVANTAGE][flags]).all()
    env.close()
    assert no_retry.list_sessions() == []

    # Retried execs never run twice: each logs its id once per *run* into one session.
    retrying = CollimateClient(unix_socket=str(node.socket), retries=6, backoff=0.05)
    sid = retrying.create_session("python3")["session_id"]
    outcomes: dict[int, str] = {}

    def one(i: int) -> None:
        try:
            retrying.session_exec(sid, command=f"echo run{i} >> ran.txt; sleep 0.2")
            outcomes[i] = "ok"
        except CollimateCapacityError:
            outcomes[i] = "shed"

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ran = retrying.session_exec(sid, command="cat ran.txt")["stdout"].split()
    assert sorted(ran) == sorted(f"run{i}" for i, o in outcomes.items() if o == "ok")
    assert len(ran) == len(set(ran))
    health = retrying.health()
    assert health["running"] == 0 and health["queued"] == 0
    retrying.delete_session(sid)
    assert session_sockets(node.state) == []
    retrying.close()
    no_retry.close()
    assert node.stop() == 0
    node.assert_clean_stop()


@pytest.mark.anyio
async def test_burst_through_the_async_client(make_node: Make) -> None:
    node = make_node("--max-inflight", "1", "--queue", "0", "--pool-size", "0").start()
    async with AsyncCollimateClient(unix_socket=str(node.socket), retries=0) as client:
        statuses: list[str] = []

        async def one() -> None:
            try:
                await client.exec_once("python3", command="sleep 0.3")
                statuses.append("ok")
            except CollimateCapacityError:
                statuses.append("shed")

        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(one)
        assert "ok" in statuses and "shed" in statuses and len(statuses) == 6
        assert await client.list_sessions() == []
    assert node.stop() == 0
    node.assert_clean_stop()
