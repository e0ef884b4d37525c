"""HumanEval GRPO steps on an image template against the same steps on ``python3``, in turns.

One local node (``collimate serve``, bwrap) with the built-in ``python3`` template and an
image template baked from an OCI layout of Debian bookworm with python3
(``tests/_debian_images.py``'s ``bookworm-py``: the node's store pulls it). Two group vector
envs, ``gymnasium.make_vec("collimate/Code-v0", num_envs=G*K, group_size=K,
task_set="humaneval")``, one per template, take turns episode by episode (reset, then one
graded step with the reference for even members and a wrong stub for odd ones); the rate of
each is its rollouts over its step time. The image template's grades run in the image's own
``python3``: on its warm fork-server's image workers, each candidate a clone of that
fork-server in namespaces of its own (``_sandbox/image_zygote.py``), which is what this
measures against the warm ``python3`` template (issue 42's target: >= 0.8x).

Run:  COLLIMATE_TEST_IMAGE_CACHE=/work/cache/rootfs .venv/bin/python \\
          benchmarks/bench_images_humaneval.py [--episodes 10] [--groups 4] [--size 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402

from collimate_envs import info as keys  # noqa: E402
from collimate_rl.bench.workload import group_completions  # noqa: E402
from collimate_rl.node import LocalNode  # noqa: E402
from tests.node.images._rootfs import rootfs_layout  # noqa: E402


def _episode(envs: Any, seed: int) -> tuple[float, list[float]]:
    """Reset, then one graded step: the benchmark suite's completions for each group's task
    (the reference for even members, a wrong answer for odd ones); the step's seconds."""
    env = envs.unwrapped
    tasks = {task.task_id: task for task in env.tasks.tasks}
    _, infos = envs.reset(seed=seed)
    actions: list[str] = []
    for g in range(env.num_groups):
        task = tasks[str(infos[keys.TASK_ID][g * env.group_size])]
        actions += group_completions(task, env.group_size, f"{seed}.{g}")
    start = time.perf_counter()
    _, rewards, *_ = envs.step(tuple(actions))
    return time.perf_counter() - start, [float(r) for r in rewards]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--size", type=int, default=8)
    args = parser.parse_args()
    n = args.groups * args.size
    with tempfile.TemporaryDirectory() as tmp, LocalNode(image_store=Path(tmp) / "store") as node:
        client = node.client()
        layout = rootfs_layout("bookworm-py", Path(tmp) / "layout")
        client.bake_template("bench-image", [], image=f"oci:{layout}:v1")
        envs = {
            template: gym.make_vec(
                "collimate/Code-v0",
                num_envs=n,
                group_size=args.size,
                task_set="humaneval",
                template=template,
                client=client,
            )
            for template in ("python3", "bench-image")
        }
        times: dict[str, list[float]] = {t: [] for t in envs}
        rewards: dict[str, list[float]] = {t: [] for t in envs}
        for env in envs.values():  # warm-up, not counted
            _episode(env, 999)
        for r in range(args.episodes):
            for template, env in envs.items():  # the same tag: the same tasks and answers
                took, got = _episode(env, 1000 + r)
                times[template].append(took)
                rewards[template] += got
        for env in envs.values():
            env.close()
    rates = {t: n / statistics.median(v) for t, v in times.items()}
    for template, rate in rates.items():
        print(f"{template:12s} {rate:7.1f} rollouts/s (median step {n / rate * 1e3:.0f} ms)")
    print(f"image / python3: {rates['bench-image'] / rates['python3']:.2f}x")
    same = rewards["python3"] == rewards["bench-image"]
    print(
        f"rewards equal on both templates: {same} (mean {statistics.mean(rewards['python3']):.3f})"
    )


if __name__ == "__main__":
    main()
