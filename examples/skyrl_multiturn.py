"""SkyRL's multi-turn loop over our env, through skyrl-gym's registry.

The loop has the shape of SkyRL's generator (``skyrl/train/generators/skyrl_gym_generator.py``):
for each dataset row and each of its ``n_samples_per_prompt`` samples, it

1. deep-copies the row's extras and sets ``max_turns`` from the generator's config;
2. ``skyrl_gym.make(row["env_class"], env_config=..., extras=extras)``;
3. ``env.init(prompt)``, then ``env.step(answer)`` until ``done``, each turn's
   observations appended to the chat;
4. ``env.get_metrics()`` and ``env.close()``;

running ``init``/``step``/``close`` on worker threads, as SkyRL does. The env class is
``collimate_code`` (``collimate_rl.skyrl.register()``): with ``max_turns > 1`` it is
``collimate/CodeFeedback-v0``, so a failing answer's test report comes back as the next
user message. Rows are SkyRL-shaped (``prompt``, ``env_class``, ``reward_spec``), made
from 3 easy tasks of ``collimate-basic``.

What stands in is the policy: each sample follows a fixed plan of answers
(``drafts.PLANS``) instead of a model's generations, so the rewards differ within a group.

Run it::

    python examples/skyrl_multiturn.py

Scale it up: ``collimate_rl.skyrl.register()`` in SkyRL's Ray entrypoint, your rows with
``env_class: collimate_code`` and ``generator.max_turns: 2`` or more.

FOLLOW-UP: ``collimate/Repo-v0`` (a repository task env, being built on another branch)
is not registered with skyrl-gym yet; when it lands, add it to ``collimate_rl.skyrl``'s
``ENV_IDS`` and a repository row here.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import skyrl_gym
from drafts import PLANS, answer, asserts_ground_truth, easy_unit_tasks

from collimate_rl import skyrl

MAX_TURNS = 2


def row(task: Any) -> dict[str, Any]:
    """A SkyRL dataset row."""
    return {
        "data_source": "collimate-basic",
        "prompt": [{"role": "user", "content": task.prompt}],
        "env_class": "collimate_code",
        "reward_spec": {"method": "rule", "ground_truth": asserts_ground_truth(task)},
        "extra_info": {"crn_key": task.task_id},
    }


async def trajectory(
    pool: ThreadPoolExecutor, task: Any, data: dict[str, Any], plan: tuple[str, ...]
) -> dict[str, Any]:
    """One sample, as SkyRL's generator runs it."""
    loop = asyncio.get_running_loop()
    extras = copy.deepcopy({k: v for k, v in data.items() if k not in ("prompt", "env_class")})
    extras["max_turns"] = MAX_TURNS
    env = skyrl_gym.make(data["env_class"], env_config={}, extras=extras)
    chat, _ = await loop.run_in_executor(pool, env.init, copy.deepcopy(data["prompt"]))
    rewards, done, turn = [], False, 0
    while not done:
        action = answer(task, plan[min(turn, len(plan) - 1)])
        out = await loop.run_in_executor(pool, env.step, action)
        chat = [*chat, {"role": "assistant", "content": action}, *out["observations"]]
        rewards.append(float(out["reward"]))
        done, turn = bool(out["done"]), turn + 1
    metrics = env.get_metrics()
    await loop.run_in_executor(pool, env.close)
    return {"task_id": task.task_id, "plan": plan, "rewards": rewards, "chat": chat, **metrics}


async def generate(tasks: list[Any]) -> list[dict[str, Any]]:
    with ThreadPoolExecutor(16) as pool:
        jobs = [trajectory(pool, task, row(task), plan) for task in tasks for plan in PLANS]
        return list(await asyncio.gather(*jobs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--report", type=Path, help="write the trajectories here (JSON)")
    args = parser.parse_args()
    started = time.perf_counter()
    skyrl.register()
    results = asyncio.run(generate(easy_unit_tasks(args.tasks)))
    for result in results:
        turns = len(result["rewards"])
        print(
            f"{result['task_id']:28s} {'+'.join(result['plan']):18s} turns {turns} rewards {result['rewards']}"
        )
    if args.report:
        report = {
            "group_size": len(PLANS),
            "trajectories": results,
            "seconds": time.perf_counter() - started,
        }
        args.report.write_text(json.dumps(report, default=str))


if __name__ == "__main__":
    main()
