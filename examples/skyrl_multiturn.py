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

The same loop then runs ``collimate_repo`` (``collimate/Repo-v0``) on a bundled
``collimate-repos`` row, SWE-bench-shaped: every turn is a tool call (an OpenAI function call
as JSON text, or a fenced bash block, mini-swe-agent's protocol), its output the next user
message, and the reward comes at ``submit`` from hidden tests run in a fresh fork. Its group
of samples: one fixes the bug with the editor, one writes the fixed file from a bash block,
one edits the tests instead (a forgery: 0), one submits nothing.

Run it::

    python examples/skyrl_multiturn.py

Scale it up: ``collimate_rl.skyrl.register()`` in SkyRL's Ray entrypoint, your rows with
``env_class: collimate_code`` and ``generator.max_turns: 2`` or more.

Repository tasks the same way: rows with ``env_class: collimate_repo`` and the SWE-bench
fields, ``generator.max_turns`` the agent's turn budget.
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

from collimate_envs.repo import apply_patch, load_repo_tasks, parse_patch
from collimate_envs.tasks.repos import load_collimate_repos
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


REPO_TASK = "collimate-repos__interval-set-1"
REPO_PLANS = ("editor", "bash", "forge", "nothing")
REPO_MAX_TURNS = 12


def repo_row(swe_row: dict[str, Any]) -> dict[str, Any]:
    """A SkyRL dataset row for a repository task: the SWE-bench row rides in the extras."""
    prompt = [{"role": "user", "content": swe_row["problem_statement"]}]
    return {"data_source": "collimate-repos", "prompt": prompt, "env_class": "collimate_repo"} | {
        k: v for k, v in swe_row.items() if k != "prompt"
    }


def _call(name: str, **arguments: Any) -> str:
    return json.dumps({"name": name, "arguments": arguments})


def repo_actions(swe_row: dict[str, Any], plan: str) -> list[str]:
    """What a policy following ``plan`` sends, turn by turn (each a model's raw text)."""
    task = next(t for t in load_repo_tasks([swe_row]).tasks)
    changes = parse_patch(task.gold_patch)
    files = {path: text.encode() for path, text in swe_row["repo_files"].items()}
    fixed = apply_patch(files, task.gold_patch)
    actions = [_call("bash", command="ls -R | head -40")]
    if plan == "editor":
        for change in changes:
            actions.append(_call("str_replace_editor", command="view", path=change.path))
            for _, body in change.hunks:
                old = "".join(ln[1:].decode() + "\n" for ln in body if ln[:1] in (b" ", b"-"))
                new = "".join(ln[1:].decode() + "\n" for ln in body if ln[:1] in (b" ", b"+"))
                actions.append(
                    _call(
                        "str_replace_editor",
                        command="str_replace",
                        path=change.path,
                        old_str=old,
                        new_str=new,
                    )
                )
    elif plan == "bash":
        for path, data in fixed.items():
            assert data is not None
            body = data.decode()
            actions.append(f"I will rewrite {path}.\n```bash\ncat > {path} <<'EOF'\n{body}EOF\n```")
    elif plan == "forge":
        tests = sorted(p for p in files if p.startswith("tests/") and p.endswith(".py"))
        actions.append(_call("bash", command=f"printf 'def test_ok():\\n    pass\\n' > {tests[0]}"))
    return [*actions, _call("submit")]


async def repo_trajectory(
    pool: ThreadPoolExecutor, data: dict[str, Any], swe_row: dict[str, Any], plan: str
) -> dict[str, Any]:
    """One repository-task sample, as SkyRL's generator runs it (see :func:`trajectory`)."""
    loop = asyncio.get_running_loop()
    extras = copy.deepcopy({k: v for k, v in data.items() if k not in ("prompt", "env_class")})
    extras["max_turns"] = REPO_MAX_TURNS
    env = skyrl_gym.make(data["env_class"], env_config={}, extras=extras)
    chat, _ = await loop.run_in_executor(pool, env.init, copy.deepcopy(data["prompt"]))
    rewards: list[float] = []
    for action in repo_actions(swe_row, plan):
        out = await loop.run_in_executor(pool, env.step, action)
        chat = [*chat, {"role": "assistant", "content": action}, *out["observations"]]
        rewards.append(float(out["reward"]))
        if out["done"]:
            break
    metrics = env.get_metrics()
    await loop.run_in_executor(pool, env.close)
    return {"task_id": swe_row["instance_id"], "plan": plan, "rewards": rewards, **metrics}


async def generate_repo() -> list[dict[str, Any]]:
    swe_row = next(r for r in load_collimate_repos() if r["instance_id"] == REPO_TASK)
    data = repo_row(swe_row)
    with ThreadPoolExecutor(4) as pool:
        jobs = [repo_trajectory(pool, data, swe_row, plan) for plan in REPO_PLANS]
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
    repo_results = asyncio.run(generate_repo())
    for result in repo_results:
        turns = len(result["rewards"])
        print(
            f"{result['task_id']:36s} {result['plan']:8s} turns {turns} reward {result['rewards'][-1]}"
        )
    if args.report:
        report = {
            "group_size": len(PLANS),
            "trajectories": results,
            "repo_trajectories": repo_results,
            "seconds": time.perf_counter() - started,
        }
        args.report.write_text(json.dumps(report, default=str))


if __name__ == "__main__":
    main()
