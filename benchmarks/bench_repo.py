"""Repo-v0's costs on the local node, side by side in one run (short; the machine may be shared).

    python benchmarks/bench_repo.py [--rounds N]

* a ``bash`` tool call (``echo``) through ``env.step``, p50, beside the floor: the same
  ``echo`` as a bare ``Sandbox.exec`` in the same member;
* a file edit (``insert`` into a file the editor has viewed) through ``env.step``, p50,
  beside the SDK's byte-exact ``download`` + ``upload_bytes`` of the same file;
* prepare a task (snapshot, listing) and fork it for K = 8 members, p50;
* grading after submit vs the same tests run with ``python -m pytest`` in a plain checkout
  on the host, by the interpreter the sandbox's ``python3`` is (the node's base Python;
  interleaved, round by round), p50 and their ratio;
* 64 members (8 groups of 8) stepping together: infra errors, and sessions left after close.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

import collimate_envs  # noqa: F401
from collimate_envs.repo import apply_patch, load_repo_tasks
from collimate_envs.repo.env import TaskSandboxes


def p50(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 2)


def bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--task", default="collimate-repos__interval-set-1")
    args = parser.parse_args()
    from collimate_rl.node import LocalNode

    task = next(t for t in load_repo_tasks("collimate-repos").tasks if t.task_id == args.task)
    with LocalNode() as node:
        client = node.client()
        env = gym.make(
            "collimate/Repo-v0", task_set="collimate-repos", client=client, max_turns=10_000
        )
        env.reset(options={"task_id": task.task_id})
        echo, edit, floor, sdk = [], [], [], []
        path = next(p for p in task.files if p.endswith(".py") and not p.startswith("tests"))
        member = env.unwrapped.episode_sandbox
        full = f"{task.workdir}/{path}"
        for i in range(args.rounds):
            t = time.perf_counter()
            member.exec(command="echo hi")
            floor.append(time.perf_counter() - t)
            t = time.perf_counter()
            env.step(bash("echo hi"))
            echo.append(time.perf_counter() - t)
            t = time.perf_counter()
            member.upload_bytes(full, member.download(full))
            sdk.append(time.perf_counter() - t)
            env.step({"name": "str_replace_editor", "arguments": {"command": "view", "path": path}})
            t = time.perf_counter()
            env.step(
                {
                    "name": "str_replace_editor",
                    "arguments": {
                        "command": "insert",
                        "path": path,
                        "insert_line": 0,
                        "new_str": f"# {i}",
                    },
                }
            )
            edit.append(time.perf_counter() - t)
        env.close()
        print(f"bash echo round trip p50: {p50(echo)} ms (target < 10); bare exec: {p50(floor)} ms")
        print(
            f"file edit (insert after a view) p50: {p50(edit)} ms (target < 10); "
            f"SDK download + upload_bytes: {p50(sdk)} ms"
        )

        from collimate_envs._backend import Backend

        sandboxes = TaskSandboxes(Backend.from_kwargs(client, {}), 300)
        sandboxes.prepare(task).close()  # the template's base session, once per env
        prep = []
        for _ in range(args.rounds):
            t = time.perf_counter()
            prepared = sandboxes.prepare(task)
            members = prepared.fork(8)
            prep.append(time.perf_counter() - t)
            for m in members:
                m.close()
            prepared.close()
        print(f"prepare + fork K=8 p50: {p50(prep)} ms (target < 50)")

        # grading vs plain pytest, interleaved
        fixed = {
            **task.files,
            **{k: v for k, v in apply_patch(task.files, task.gold_patch).items() if v is not None},
        }
        hidden = apply_patch(task.files, task.test_patch)
        grade_t, plain_t = [], []
        python = getattr(sys, "_base_executable", sys.executable)  # the sandbox's python3
        with tempfile.TemporaryDirectory() as checkout:
            for rel, data in {
                **fixed,
                **{k: v for k, v in hidden.items() if v is not None},
            }.items():
                (Path(checkout) / rel).parent.mkdir(parents=True, exist_ok=True)
                (Path(checkout) / rel).write_bytes(data)
            genv = gym.make("collimate/Repo-v0", task_set="collimate-repos", client=client)
            for _ in range(max(3, args.rounds // 4)):
                genv.reset(options={"task_id": task.task_id})
                from collimate_envs.repo._workspace import write_files

                write_files(
                    genv.unwrapped.episode_sandbox,
                    task.workdir,
                    apply_patch(task.files, task.gold_patch),
                )
                t = time.perf_counter()
                _, reward, *_ = genv.step({"name": "submit"})
                grade_t.append(time.perf_counter() - t)
                assert reward == 1.0
                t = time.perf_counter()
                subprocess.run(
                    [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *task.tests],
                    cwd=checkout,
                    check=True,
                    capture_output=True,
                )
                plain_t.append(time.perf_counter() - t)
            genv.close()
        ratio = statistics.median(grade_t) / statistics.median(plain_t)
        print(
            f"grade after submit p50: {p50(grade_t)} ms; plain python -m pytest p50: {p50(plain_t)} ms; ratio {ratio:.2f} (target <= 1.2)"
        )

        before = {s["session_id"] for s in client.list_sessions()}
        envs = gym.make_vec(
            "collimate/Repo-v0",
            num_envs=64,
            group_size=8,
            task_set="collimate-repos",
            client=client,
            on_infra_error="flag",
        )
        t = time.perf_counter()
        envs.reset(seed=0)
        infra = 0
        for step in range(3):
            actions = (
                [bash("ls -R | wc -l") for _ in range(64)]
                if step < 2
                else [{"name": "submit"}] * 64
            )
            *_, infos = envs.step(actions)
            infra += int(sum(bool(x) for x in infos.get("infra_error", [])))
        wall = time.perf_counter() - t
        envs.close()
        left = {s["session_id"] for s in client.list_sessions()} - before
        sandboxes.close()
        print(
            f"64 members, 3 steps (2 bash + submit/grade): {wall:.1f} s, infra errors {infra}, sessions left {len(left)}"
        )
        client.close()


if __name__ == "__main__":
    main()
