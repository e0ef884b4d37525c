"""``grade_batch`` on our node: one batch request at a time against several in flight.

    cd /tmp && <venv>/bin/python <checkout>/benchmarks/grade_batch_window.py [--rounds 2]

A batch request answers when its slowest item is done. Two workloads, graded in turns by
both ways of sending them (``_batched.request_window``: four requests of a quarter of
``concurrency`` in flight; against one request of ``concurrency`` items after another),
on one node:

* ``mutants``: ``notebooks/05``'s candidates of ``collimate-basic`` (each task's reference,
  its wrong answer and six mutants of the reference: some loop until their time limit);
* ``humaneval``: each HumanEval task's reference and a wrong answer (nothing hangs).

Prints the wall time, the rate and how busy the machine was (``/proc/stat``).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import _local_node

from collimate_envs.tasks import load_task_set, mutants
from collimate_rl import grade_batch, seed_from_key
from collimate_rl.bench.workload import group_completions
from collimate_rl.grading import _batched, _grade_batch
from collimate_rl.wire import CollimateClient

Workload = tuple[list[str], list[Any], list[str | None]]


def mutant_candidates() -> Workload:
    """The candidates ``notebooks/05`` grades (the same draw of mutants)."""
    rng = random.Random(0)
    completions, specs, seeds = [], [], []
    for task in load_task_set("collimate-basic"):
        found = mutants(task.reference_solution)
        programs = [task.reference_solution, task.wrong_solution]
        programs += [m.source for m in rng.sample(found, min(6, len(found)))]
        for program in programs:
            completions.append(f"```python\n{program}\n```")
            specs.append(task.to_reward_spec())
            seeds.append(seed_from_key(task.task_id))
    return completions, specs, seeds


def humaneval_candidates() -> Workload:
    completions, specs = [], []
    for task in load_task_set("humaneval"):
        for completion in group_completions(task, 2, "w"):
            completions.append(completion)
            specs.append(task.to_reward_spec())
    return completions, specs, [None] * len(completions)


@contextmanager
def one_request_at_a_time() -> Iterator[None]:
    """The way before: requests of ``concurrency`` items, one after another."""
    window = _grade_batch.request_window  # what grade_batch calls
    _grade_batch.request_window = lambda concurrency: (min(_batched.BATCH_ITEMS, concurrency), 1)
    try:
        yield
    finally:
        _grade_batch.request_window = window


def _busy() -> tuple[int, int]:
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, idle


def measure(client: Any, workload: Workload, concurrency: int) -> str:
    completions, specs, seeds = workload
    busy0, idle0 = _busy()
    start = time.perf_counter()
    results = grade_batch(
        client, "python3", completions, specs, seeds=seeds, concurrency=concurrency
    )
    wall = time.perf_counter() - start
    busy1, idle1 = _busy()
    busy = (busy1 - busy0) / max(1, busy1 - busy0 + idle1 - idle0)
    passed = sum(r.reward == 1.0 for r in results)
    return f"{wall:6.1f} s  {len(results) / wall:6.1f} grades/s  busy {busy:4.0%}  passed {passed}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    workloads = {"mutants": mutant_candidates(), "humaneval": humaneval_candidates()}
    ways: dict[str, Callable[[], Any]] = {
        "one at a time": one_request_at_a_time,
        "in flight": nullcontext,
    }
    node, sock = _local_node.start("collimate-gbw-")
    try:
        client = CollimateClient(unix_socket=sock)
        _local_node.wait_ready(client, node)
        completions, specs, _ = workloads["humaneval"]
        grade_batch(client, "python3", completions[:32], specs[:32])  # warm the node up
        for round_ in range(args.rounds):
            for name, workload in workloads.items():
                for way, arm in ways.items():
                    with arm():
                        line = measure(client, workload, args.concurrency)
                    print(f"round {round_ + 1}  {name:<9}  {way:<13}  {line}", flush=True)
    finally:
        _local_node.stop(node, sock)


if __name__ == "__main__":
    main()
