"""The vector env's step throughput on two builds' nodes at once, episode by episode in turns.

    cd /tmp && <venv>/bin/python <checkout>/benchmarks/env_step_ab.py --against <other checkout>
        [--task-set humaneval] [--groups 4] [--size 8] [--rounds 30]

Starts two nodes (``collimate serve`` on unix sockets): this build's, and one whose Python
path starts with ``--against`` (another checkout: its node and sandbox code). The client
side (this build's SDK and env) is the same for both. One vector env per node; their
episodes alternate (A, B, B, A, ...: each pair swaps who goes first), so a shared machine's
drift hits both alike. Prints the step rate of each, the ratio of the totals, and the median
and quartiles of the per-pair ratios.

>>> _quartiles([1.0, 2.0, 3.0, 4.0, 5.0])
(2.0, 3.0, 4.0)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _local_node

from collimate_rl import CollimateClient
from collimate_rl.bench.grpo import open_vector_env, run_episodes


def _quartiles(xs: list[float]) -> tuple[float, float, float]:
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q2, q3


def _start(python_path: str | None) -> tuple[Any, str]:
    folder = tempfile.mkdtemp(prefix="collimate-ab-")
    sock = os.path.join(folder, "node.sock")
    env = dict(os.environ)
    if python_path:
        env["PYTHONPATH"] = python_path
    else:
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    node = subprocess.Popen(
        [sys.executable, "-m", "collimate_rl.node", "serve", "--socket", sock],
        cwd=folder,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    return node, sock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", required=True, type=Path, help="the other checkout")
    parser.add_argument("--task-set", default="humaneval")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args(argv)
    nodes = {"this build": _start(None), f"{args.against}": _start(str(args.against))}
    envs: dict[str, Any] = {}
    try:
        for name, (node, sock) in nodes.items():
            client = CollimateClient(unix_socket=sock, timeout=120)
            _local_node.wait_ready(client, node)
            envs[name] = open_vector_env(client, args.task_set, args.groups, args.size)
            run_episodes(envs[name], 1, warmup=False, first=10_000)  # warm both up
        seconds: dict[str, list[float]] = {name: [] for name in envs}
        order = list(envs)
        for r in range(args.rounds):
            for name in order if r % 2 == 0 else order[::-1]:
                episode = run_episodes(envs[name], 1, warmup=False, first=r)
                seconds[name].append(episode.step_seconds)
        rollouts = args.groups * args.size
        a, b = order
        pairs = [sb / sa for sa, sb in zip(seconds[a], seconds[b], strict=True)]
        print(f"{args.task_set}: {args.groups}x{args.size}, {args.rounds} episodes each, in turns")
        for name in order:
            rate = rollouts * len(seconds[name]) / sum(seconds[name])
            print(f"  {name}: step {rate:.1f} rollouts/s")
        total = sum(seconds[b]) / sum(seconds[a])
        q1, q2, q3 = _quartiles(pairs)
        print(
            f"  step rate, {a} / other: {total:.3f} (per pair: median {q2:.3f}, IQR {q1:.3f}-{q3:.3f})"
        )
    finally:
        for env in envs.values():
            env.close()
        for node, sock in nodes.values():
            _local_node.stop(node, sock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
