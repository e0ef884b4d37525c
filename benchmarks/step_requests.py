"""How a GRPO step's members go to the node: one request, or smaller ones prepared and sent in turn.

    cd /tmp && <venv>/bin/python <checkout>/benchmarks/step_requests.py [--groups 4] [--size 8]
        [--chunks 4,8] [--episodes 60]

The vector env's step prepares every member's grade (code extraction, the exec's program),
then sends them in requests of up to 64 items, one after another (``grade_items``); the node
idles while the client prepares, and the client while the node grades. Against that, each
``--chunks`` size: the members prepared a chunk at a time, each chunk's request sent (from a
thread) as soon as it is ready, every request in flight at once, so the node starts on the
first chunk while the client prepares the next. One node, one vector env; the ways take turns
episode by episode (a G x K HumanEval step each, every reward checked), so the machine's
drift falls on all of them alike. Prints each way's median rate and the median, over
episodes, of its rate against the env's own way in the same turn.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import _local_node

import collimate_envs.vector as vector
from collimate_rl.bench import grpo
from collimate_rl.errors import CollimateError
from collimate_rl.grading import _batched
from collimate_rl.wire import CollimateClient
from collimate_rl.wire._operations import drive

GradeItems = Callable[..., Any]


def in_chunks(per: int, pool: ThreadPoolExecutor) -> GradeItems:
    """``grade_items`` preparing and sending ``per`` members at a time, all in flight."""

    def grade_items(
        client: Any,
        template: str,
        items: Sequence[_batched.BatchItem],
        *,
        timeout_seconds: float,
        recorder: Any = None,
    ) -> list[Any]:
        chunks: list[_batched.Chunk] = []
        futures = {}
        for start in range(0, len(items), per):
            jobs = _batched.prepare_items(template, items[start : start + per], timeout_seconds)
            chunks.append((start, jobs))
            futures[pool.submit(drive, _batched._request(client, jobs), client)] = chunks[-1]
        answers = _batched._Answers(chunks, recorder, None)
        _batched.take_as_completed(
            futures, lambda chunk, done: answers.take(chunk, done.result()), lambda: False
        )
        outcomes = answers.result() or []
        return [o if o is not None else CollimateError("not graded") for o in outcomes]

    return grade_items


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument(
        "--chunks", default="4,8", help="member counts per request, comma-separated"
    )
    parser.add_argument("--episodes", type=int, default=60, help="per way")
    args = parser.parse_args()

    pool = ThreadPoolExecutor(16)
    ways: dict[str, GradeItems] = {"as the env sends them": vector.grade_items}
    for per in (int(c) for c in args.chunks.split(",")):
        ways[f"chunks of {per}, all in flight"] = in_chunks(per, pool)
    rates: dict[str, list[float]] = {name: [] for name in ways}
    node, sock = _local_node.start("collimate-step-requests-")
    try:
        client = CollimateClient(unix_socket=sock)
        _local_node.wait_ready(client, node)
        envs = grpo.open_vector_env(client, "humaneval", args.groups, args.size)
        try:
            grpo.run_episodes(envs, 1, warmup=True, first=0)
            episode = 1
            for _ in range(args.episodes):
                for name, way in ways.items():
                    vector.grade_items = way
                    run = grpo.run_episodes(envs, 1, warmup=False, first=episode)
                    episode += 1
                    expected = [float(r.should_pass) for r in run.rollouts]
                    if run.rewards != expected:
                        raise SystemExit(f"{name}: rewards {run.rewards} != {expected}")
                    rates[name].append(len(run.rollouts) / run.step_seconds)
        finally:
            envs.close()
    finally:
        _local_node.stop(node, sock)
        pool.shutdown()
    members = args.groups * args.size
    print(
        f"HumanEval G={args.groups} x K={args.size} ({members} members), {args.episodes} steps per way"
    )
    base = rates["as the env sends them"]
    for name, values in rates.items():
        against = statistics.median(v / b for v, b in zip(values, base, strict=True))
        print(f"  {name:32} {statistics.median(values):6.1f} rollouts/s   {against:.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
