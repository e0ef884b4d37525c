"""``collimate demo``: one GRPO group rollout on the embedded local node.

A scripted stand-in for a policy answers each task with a mix of completions —
correct, wrong, crashing, hanging and hostile (forging a reward line, exiting
early) — and the group vector env grades them in forked sandboxes. The table
shows each member's reward and group-relative advantage.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from collimate_envs import info as keys
from collimate_envs.vector import GroupVectorEnv

__all__ = ["main", "scripted_completions"]

_HOSTILE = (
    "import os, sys\n"
    'print(\'COLLIMATE_RESULT {"passed": 99, "total": 99}\')\n'
    "print(1.0)\n"
    "sys.stdout.flush()\n"
    "os._exit(0)\n"
)


def _fence(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def scripted_completions(task: Any, size: int) -> list[tuple[str, str]]:
    """``size`` (kind, completion) pairs for ``task``, cycling through the kinds."""
    reference = task.reference_solution or "pass"
    wrong = getattr(task, "wrong_solution", None) or reference.replace(
        "return", "return None and", 1
    )
    kinds = [
        ("correct", _fence(reference)),
        ("wrong", _fence(wrong)),
        ("correct", "Sure! Here it is:\n" + _fence(reference)),
        ("crash", _fence("raise RuntimeError('model bug')")),
        ("hostile", _fence(_HOSTILE)),
        ("hang", _fence("while True:\n    pass")),
    ]
    return [kinds[i % len(kinds)] for i in range(size)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="collimate demo", description=__doc__)
    parser.add_argument("--groups", type=int, default=2, help="GRPO groups (default 2)")
    parser.add_argument("--group-size", type=int, default=6, help="members per group (default 6)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=int, default=3, help="per-exec timeout in seconds")
    args = parser.parse_args(argv)

    import gymnasium as gym

    import collimate_envs  # noqa: F401  (registers the ids)

    print("starting the embedded local sandbox node ...", flush=True)
    envs = gym.make_vec(
        "collimate/Code-v0",
        num_envs=args.groups * args.group_size,
        group_size=args.group_size,
        seed_mode="crn",
        timeout_seconds=args.timeout,
    )
    try:
        env = envs.unwrapped
        assert isinstance(env, GroupVectorEnv)
        started = time.perf_counter()
        envs.reset(seed=args.seed)
        actions, kinds = [], []
        for g in range(env.num_groups):
            for kind, completion in scripted_completions(env._group_tasks[g], env.group_size):
                actions.append(completion)
                kinds.append(kind)
        graded_at = time.perf_counter()
        _, rewards, _, _, infos = envs.step(tuple(actions))
        done = time.perf_counter()
    finally:
        envs.close()

    print(f"\n{'group':>5} {'task':<28} {'member':<8} {'reward':>6} {'adv':>6} {'tests':>7} exit")
    for i, kind in enumerate(kinds):
        tests = f"{infos[keys.PASSED][i]}/{infos[keys.TOTAL][i]}"
        print(
            f"{infos[keys.GROUP][i]:>5} {str(infos[keys.TASK_ID][i])[:28]:<28} {kind:<8} "
            f"{rewards[i]:>6.2f} {infos[keys.ADVANTAGE][i]:>6.2f} {tests:>7} {infos[keys.EXIT_CODE][i]}"
        )
    hostile = [rewards[i] for i, k in enumerate(kinds) if k == "hostile"]
    print(
        f"\n{len(actions)} rollouts graded in {done - graded_at:.2f}s "
        f"(reset incl. forks: {graded_at - started:.2f}s); "
        f"hostile completions scored {max(hostile, default=0.0):.2f} at most."
    )
    return 0 if not any(np.asarray(hostile) > 0) else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
