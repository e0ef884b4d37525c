"""A trainer killed mid-``grade_batch``: how long a fresh client then waits for a slot.

On one local node (bwrap, ``--max-inflight 2``), side by side in one run:

* idle: a fresh client's ``exec_once("print(1)")`` on an idle node;
* abandoned: a worker process runs ``grade_batch`` of 8 candidates that would
  each hang for an hour (2 running, 6 queued), and is SIGKILLed; the same
  fresh exec is timed from the kill. Without cancellation it would wait for
  the abandoned execs' own timeout (here 3600 s).

Also reported: from the kill until the node reports nothing running or
queued, and until no process of the abandoned grades is left.

Run:  .venv/bin/python benchmarks/bench_disconnect.py [--n 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from collimate_rl.node import LocalNode

WORKER = r"""
import sys
from collimate_rl.grading import UnitTestReward, grade_batch
from collimate_rl.wire import CollimateClient

client = CollimateClient(unix_socket=sys.argv[1], retries=0)
spec = UnitTestReward([{"input": [1, 2], "expected": 3}], entry="add")
hang = "```python\nwhile True:\n    pass\n```"
grade_batch(client, "python3", [hang] * 8, spec, timeout_seconds=3600, concurrency=8)
"""


def _until(ok: object, timeout: float = 60.0) -> float:
    start = time.monotonic()
    while not ok():  # type: ignore[operator]
        if time.monotonic() - start > timeout:
            raise RuntimeError("timed out")
        time.sleep(0.002)
    return time.monotonic()


def _descendants(root: int) -> int:
    """How many processes descend from ``root`` (the node's sessions, execs, candidates)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    count, todo = 0, [root]
    while todo:
        kids = parents.get(todo.pop(), [])
        count += len(kids)
        todo.extend(kids)
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10, help="samples of each")
    args = parser.parse_args(argv)
    idle_ms: list[float] = []
    fresh_ms: list[float] = []
    freed_ms: list[float] = []
    with LocalNode(max_inflight=2, queue=64, pool_size=0) as node:
        client = node.client(retries=0)
        client.exec_once("python3", code="print(1)")  # warm-up
        assert node.pid is not None
        baseline = _descendants(node.pid)
        for _ in range(args.n):
            start = time.monotonic()
            client.exec_once("python3", code="print(1)")
            idle_ms.append((time.monotonic() - start) * 1e3)

            worker = subprocess.Popen(
                [sys.executable, "-c", WORKER, str(node.socket_path)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            _until(lambda: (h := client.health())["running"] == 2 and h["queued"] == 6)
            worker.kill()
            killed = time.monotonic()
            client.exec_once("python3", code="print(1)")
            fresh_ms.append((time.monotonic() - killed) * 1e3)
            idle = _until(lambda: (h := client.health())["running"] + h["queued"] == 0)
            gone = _until(lambda: _descendants(node.pid or 0) <= baseline)
            freed_ms.append((max(idle, gone) - killed) * 1e3)
            worker.wait()

    def row(name: str, values: list[float]) -> str:
        p50 = statistics.median(values)
        return (
            f"| {name} | {p50:.1f} | {max(values):.1f} | {p50 / statistics.median(idle_ms):.2f} |"
        )

    load = os.getloadavg()[0]
    print(f"\n{args.n} samples each; 1-min load {load:.2f}; max-inflight 2, 6 queued behind them\n")
    print("| measurement | p50 ms | max ms | x idle exec |")
    print("|---|---|---|---|")
    print(row("fresh exec_once, idle node", idle_ms))
    print(row("fresh exec_once after the worker's kill", fresh_ms))
    print(row("kill -> nothing running or queued, no process left", freed_ms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
