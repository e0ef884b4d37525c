"""An agent loop against our env server, through openenv-core's client.

1. Start the server as its own process, as a container would run it:
   ``python -m collimate_rl.openenv --env-id collimate/CodeFeedback-v0 --port PORT``
   (openenv-core's FastAPI app; each WebSocket session gets its own env and sandbox).
2. Each agent opens a session with ``CollimateEnvClient`` (openenv-core's ``EnvClient``),
   ``reset(task_id=...)`` for a task of ``collimate-basic``, then ``step`` until ``done``:
   a failing answer's test report is the next observation.
3. The agents of a group run concurrently, one session each.

What stands in is the policy: each agent follows a plan of answers (``drafts.PLANS``)
instead of a model's generations, so the rewards differ within a group.

Run it::

    python examples/openenv_agent.py

Scale it up: run the server where the sandboxes are (``--host`` on a private network:
see docs/security.md), point ``CollimateEnvClient(base_url=...)`` at it from the trainer,
and replace the plan with your model's generations.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from drafts import PLANS, answer, easy_unit_tasks

from collimate_rl.openenv import CollimateAction, CollimateEnvClient

ENV_ID = "collimate/CodeFeedback-v0"
READY_TIMEOUT_SECONDS = 180
#: The first reset starts the server's sandbox node; a loaded machine takes its time.
MESSAGE_TIMEOUT_SECONDS = 300


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(port: int) -> subprocess.Popen[bytes]:
    """The env server in its own process; returns once ``/health`` answers."""
    command = [sys.executable, "-m", "collimate_rl.openenv", "--env-id", ENV_ID]
    server = subprocess.Popen([*command, "--port", str(port)], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the env server exited with {server.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    server.kill()
    raise RuntimeError(f"the env server did not answer within {READY_TIMEOUT_SECONDS} s")


async def agent(url: str, task: Any, plan: tuple[str, ...]) -> dict[str, Any]:
    """One episode over one WebSocket session."""
    rewards: list[float] = []
    async with CollimateEnvClient(base_url=url, message_timeout_s=MESSAGE_TIMEOUT_SECONDS) as env:
        result = await env.reset(task_id=task.task_id)
        turn = 0
        while not result.done:
            action = CollimateAction(text=answer(task, plan[min(turn, len(plan) - 1)]))
            result = await env.step(action)
            rewards.append(float(result.reward))
            turn += 1
        info = result.observation.info
    return {
        "task_id": task.task_id,
        "plan": plan,
        "rewards": rewards,
        "passed": info.get("passed"),
        "total": info.get("total"),
    }


async def run_agents(url: str, tasks: list[Any]) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(agent(url, task, plan) for task in tasks for plan in PLANS)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--report", type=Path, help="write the episodes here (JSON)")
    args = parser.parse_args()
    started = time.perf_counter()
    port = free_port()
    server = start_server(port)
    try:
        episodes = asyncio.run(run_agents(f"http://127.0.0.1:{port}", easy_unit_tasks(args.tasks)))
    finally:
        server.terminate()
        server.wait(timeout=30)
    for episode in episodes:
        plan = "+".join(episode["plan"])
        print(f"{episode['task_id']:28s} {plan:18s} rewards {episode['rewards']}")
    if args.report:
        report = {
            "group_size": len(PLANS),
            "episodes": episodes,
            "server_exit": server.returncode,
            "seconds": time.perf_counter() - started,
        }
        args.report.write_text(json.dumps(report))


if __name__ == "__main__":
    main()
