"""A scripted agent that solves a bundled ``collimate-repos`` task through ``collimate/Repo-v0``.

It makes the calls a model would (OpenAI function calls), in a fixed order: list the
repository, view the buggy module, replace the buggy lines with the task's gold patch's
(one ``str_replace`` per hunk), run the tests it can see, submit. The env grades the
repository with the hidden tests in a fresh fork and prints the reward.

    python examples/repo_scripted_agent.py [instance_id]
"""

from __future__ import annotations

import sys

import gymnasium as gym

import collimate_envs  # noqa: F401  (registers collimate/Repo-v0)
from collimate_envs.repo import load_repo_tasks, parse_patch


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def main(instance_id: str = "collimate-repos__interval-set-1") -> float:
    task = next(t for t in load_repo_tasks("collimate-repos").tasks if t.task_id == instance_id)
    env = gym.make("collimate/Repo-v0", task_set="collimate-repos", max_turns=30)
    statement, _ = env.reset(options={"task_id": instance_id})
    print(statement[:300], "...\n")
    actions = [call("bash", command="git status 2>/dev/null; find . -name '*.py' | sort")]
    for change in parse_patch(task.gold_patch):
        actions.append(call("str_replace_editor", command="view", path=change.path))
        for _, body in change.hunks:
            old = "".join(line[1:].decode() + "\n" for line in body if line[:1] in (b" ", b"-"))
            new = "".join(line[1:].decode() + "\n" for line in body if line[:1] in (b" ", b"+"))
            actions.append(
                call(
                    "str_replace_editor",
                    command="str_replace",
                    path=change.path,
                    old_str=old,
                    new_str=new,
                )
            )
    actions += [call("bash", command="python3 -m pytest -q 2>&1 | tail -3"), call("submit")]
    reward = 0.0
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        print(
            f"> {action['name']} {info['tool_call']['arguments'] if info['tool_call'] else ''}"[
                :120
            ]
        )
        print(observation[:400] + ("\n" if observation else ""))
        if terminated or truncated:
            print("reward", reward, "tests", info["tests"])
            break
    env.close()
    return float(reward)


if __name__ == "__main__":
    sys.exit(0 if main(*sys.argv[1:2]) == 1.0 else 1)
