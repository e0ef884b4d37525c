"""Scaling: throughput vs group size and grading threads, exec latency vs live sessions.

The same as ``collimate bench --only scaling`` (see ``collimate_rl.bench.scaling``).

Run:  .venv/bin/python benchmarks/bench_scaling.py [--quick] [--json | --markdown]
"""

from __future__ import annotations

import sys

from collimate_rl.bench import main

SECTIONS = ["--only", "scaling"]

if __name__ == "__main__":
    raise SystemExit(main([*SECTIONS, *sys.argv[1:]]))
