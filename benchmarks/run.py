"""Run the whole benchmark suite: the same as ``collimate bench``.

Run:  .venv/bin/python benchmarks/run.py [--quick] [--json | --markdown] [--only SECTIONS]
"""

from __future__ import annotations

from collimate_rl.bench import main

if __name__ == "__main__":
    raise SystemExit(main())
