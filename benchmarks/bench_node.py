"""The node's own costs: no-op exec latency, fork-group latency, memory per idle session.

The same as ``collimate bench --only latency,forks,memory`` (see ``collimate_rl.bench``).

Run:  .venv/bin/python benchmarks/bench_node.py [--quick] [--json | --markdown]
"""

from __future__ import annotations

import sys

from collimate_rl.bench import main

SECTIONS = ["--only", "latency,forks,memory"]

if __name__ == "__main__":
    raise SystemExit(main([*SECTIONS, *sys.argv[1:]]))
