"""Local node vs unisolated runners, side by side in one run.

Measures, on the same machine in the same process:

* per-exec latency (p50, p99) and closed-loop throughput (1 and 2 clients) of a
  trivial snippet and of a typical unit-test grade, through the local node's HTTP
  API (isolated: bwrap + namespaces + seccomp) and through two unisolated
  runners: a fresh ``python -S`` per exec, and a warm interpreter forked per exec
  (the floor);
* session create latency and fork-of-16 / fork-of-64 latency on the node.

Run:  .venv/bin/python benchmarks/bench_node.py [--seconds 5] [--n 200]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _baselines import SubprocessClient, WarmForkClient
from _stats import closed_loop, latencies_ms, summary, table

from collimate_rl.grading import UnitTestReward, grade
from collimate_rl.node import LocalNode

CANDIDATE = "```python\ndef add(a, b):\n    return a + b\n```"
SPEC = UnitTestReward(
    tests=[{"input": [i, i + 1], "expected": 2 * i + 1} for i in range(10)], entry="add"
)


def _runners(node_client: Any) -> dict[str, Any]:
    return {
        "local node (bwrap, isolated)": node_client,
        "warm fork, no isolation (floor)": WarmForkClient(),
        "subprocess python -S, no isolation": SubprocessClient(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200, help="sequential samples per latency row")
    parser.add_argument("--seconds", type=float, default=5.0, help="per throughput cell")
    parser.add_argument("--json", type=Path, help="also write the raw numbers here")
    args = parser.parse_args(argv)

    results: dict[str, Any] = {
        "machine": f"{platform.node()} {os.cpu_count()} cpus",
        "python": platform.python_version(),
    }
    with LocalNode() as node:
        client = node.client()
        runners = _runners(client)
        rows = []
        for name, runner in runners.items():
            print(f"measuring {name} ...", file=sys.stderr, flush=True)
            noop = lambda r=runner: r.exec_once("python3", code="pass", timeout_seconds=10)  # noqa: E731
            graded = lambda r=runner: grade(r, "python3", CANDIDATE, SPEC, timeout_seconds=10)  # noqa: E731
            assert float(graded().reward) == 1.0, f"{name}: the grade is wrong"
            lat_noop = latencies_ms(noop, args.n)
            lat_grade = latencies_ms(graded, max(20, args.n // 4))
            tp = {c: closed_loop(noop, c, args.seconds) for c in (1, 2)}
            tpg = {c: closed_loop(graded, c, args.seconds) for c in (1, 2)}
            rows.append(
                (
                    name,
                    *summary(lat_noop)[:2],
                    f"{tp[1]:.0f}",
                    f"{tp[2]:.0f}",
                    *summary(lat_grade)[:2],
                    f"{tpg[1]:.0f}",
                    f"{tpg[2]:.0f}",
                )
            )
            results[name] = {
                "noop_ms": lat_noop,
                "grade_ms": lat_grade,
                "noop_per_s": tp,
                "grade_per_s": tpg,
            }
        for runner in runners.values():
            if isinstance(runner, WarmForkClient):
                runner.close()

        create = latencies_ms(
            lambda: client.delete_session(client.create_session("python3")["session_id"]), 50
        )
        parent = client.create_session("python3")["session_id"]
        forks: dict[int, list[float]] = {}
        for width in (16, 64):
            samples = []
            for _ in range(5):
                t0 = time.perf_counter()
                children = client.fork_session(parent, width)["children"]
                samples.append((time.perf_counter() - t0) * 1e3)
                for child in children:
                    client.delete_session(child["session_id"])
            forks[width] = samples
        client.delete_session(parent)
        results["create_ms"], results["fork_ms"] = create, forks

    print(f"\n{results['machine']}, Python {results['python']}\n")
    print(
        table(
            [
                "runner",
                "no-op p50 ms",
                "no-op p99 ms",
                "no-op/s c=1",
                "no-op/s c=2",
                "grade p50 ms",
                "grade p99 ms",
                "grades/s c=1",
                "grades/s c=2",
            ],
            rows,
        )
    )
    floor = results["warm fork, no isolation (floor)"]["grade_per_s"][2]
    ours = results["local node (bwrap, isolated)"]["grade_per_s"][2]
    sub = results["subprocess python -S, no isolation"]["grade_per_s"][2]
    print(
        f"\nisolated node / floor (grades, c=2): {ours / floor:.0%};  "
        f"node / subprocess: {ours / sub:.2f}x"
    )
    print(
        "\n"
        + table(
            ["operation", "p50 ms", "p99 ms", "mean ms"],
            [
                ("session create (+ delete)", *summary(create)),
                ("fork of 16", *summary(forks[16])),
                ("fork of 64", *summary(forks[64])),
            ],
        )
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
