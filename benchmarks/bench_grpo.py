"""GRPO group throughput: the isolated vector env vs skyrl-gym's grader and unisolated runners.

The same as ``collimate bench --only grpo`` (see ``collimate_rl.bench.grpo``).

Run:  .venv/bin/python benchmarks/bench_grpo.py [--quick] [--task-sets humaneval] [--json]
"""

from __future__ import annotations

import sys

from collimate_rl.bench import main

SECTIONS = ["--only", "grpo"]

if __name__ == "__main__":
    raise SystemExit(main([*SECTIONS, *sys.argv[1:]]))
