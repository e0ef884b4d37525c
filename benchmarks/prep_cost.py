"""What preparing a grade costs the client: extracting the code and building the exec, no I/O.

    cd /tmp && <venv>/bin/python <checkout>/benchmarks/prep_cost.py [--task-set humaneval]

For every task of the set, the benchmark's two completions (the reference solution and a
wrong one, fenced as a model writes them), the client's CPU per rollout (thread time, best
of ``--rounds``) of code extraction alone, of building the exec from the extracted code
alone, and of both in turn, as ``grade`` and the vector env do. Run it against another
checkout with ``PYTHONPATH=<checkout>`` (from outside any checkout) to compare builds.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task-set", default="humaneval")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from collimate_envs.tasks import load_task_set
    from collimate_rl.bench.workload import group_completions
    from collimate_rl.grading._binding import extract_source

    pairs: list[tuple[Any, str]] = []
    for task in load_task_set(args.task_set):
        if task.reference_solution is None:
            continue
        spec = task.to_reward_spec()
        pairs += [(spec, completion) for completion in group_completions(task, 2)]
    extracted = {completion: extract_source(spec, completion) for spec, completion in pairs}

    def best(work: Callable[[Any, str], object]) -> float:
        fastest = float("inf")
        for _ in range(args.rounds):
            start = time.thread_time()
            for spec, completion in pairs:
                work(spec, completion)
            fastest = min(fastest, time.thread_time() - start)
        return fastest / len(pairs) * 1e6

    nonce = "0" * 32
    rows = {
        "extract": best(lambda spec, c: extract_source(spec, c)),
        "build": best(lambda spec, c: spec.build(extracted[c], nonce=nonce)),
        "extract + build": best(lambda spec, c: spec.build(extract_source(spec, c), nonce=nonce)),
    }
    print(f"{args.task_set}: {len(pairs)} rollouts; client CPU per rollout (us, best of rounds)")
    print("  ".join(f"{name} {value:.0f}" for name, value in rows.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
