"""slime's reward hook path: ``--custom-rm-path`` loads our reward, and slime's rollout awaits it.

slime is not on the package index (it ships with Megatron-LM and SGLang, for GPUs), so
this script does the three things slime's rollout does with the hook, the way slime does
them (THUDM/slime, ``slime/utils/misc.py`` and ``slime/rollout/rm_hub``):

1. load it from the dotted path (``collimate paths slime``) with ``rpartition(".")``,
   ``importlib.import_module`` and ``getattr``;
2. per sample: ``await rm(args, sample)`` for each finished sample, concurrently;
3. per group (``--group-rm``): ``await rm(args, samples)`` once the group is complete.

``Sample`` below has the fields of slime's ``Sample`` the hook reads (``prompt``,
``response``, ``label``, ``metadata``); ``args`` is slime's argparse namespace, where our
options travel as ``--collimate-*`` flags (``args.collimate_seed_mode`` ...).

Run it::

    python examples/slime_reward.py

Scale it up: ``--custom-rm-path $(collimate paths slime)`` (or
``collimate_rl.slime.group_reward_func --group-rm``) on your slime command line, with the
ground truth in the dataset's ``--label-key`` column.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drafts import answers, asserts_ground_truth, easy_unit_tasks


@dataclass
class Sample:
    """The fields of ``slime.utils.types.Sample`` a reward hook reads."""

    prompt: str
    response: str
    label: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    reward: float | None = None


def load_function(path: str) -> Any:
    """slime's loader: ``module.function``, nothing else (``module:function`` fails)."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


async def rollout(args: argparse.Namespace, groups: list[list[Sample]]) -> None:
    """Reward each sample as slime's rollout does, per sample or per group."""
    rm = load_function(args.custom_rm_path)
    if args.group_rm:
        group_rewards = await asyncio.gather(*(rm(args, group) for group in groups))
        for group, rewards in zip(groups, group_rewards, strict=True):
            for sample, reward in zip(group, rewards, strict=True):
                sample.reward = reward
    else:
        samples = [sample for group in groups for sample in group]
        rewards = await asyncio.gather(*(rm(args, sample) for sample in samples))
        for sample, reward in zip(samples, rewards, strict=True):
            sample.reward = reward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--report", type=Path, help="write the rewards here (JSON)")
    options = parser.parse_args()
    started = time.perf_counter()
    # `collimate paths slime`, through this interpreter
    command = [sys.executable, "-m", "collimate_rl.cli", "paths", "slime"]
    per_sample_path = subprocess.run(command, capture_output=True, text=True, check=True)
    tasks = easy_unit_tasks(options.tasks)

    def samples() -> list[list[Sample]]:
        return [
            [
                Sample(
                    prompt=task.prompt,
                    response=answer,
                    label=asserts_ground_truth(task),
                    metadata={"data_source": "collimate-basic", "crn_key": task.task_id},
                )
                for answer in answers(task)
            ]
            for task in tasks
        ]

    report: dict[str, Any] = {"group_size": len(answers(tasks[0]))}
    for mode, path, group_rm in (
        ("per_sample", per_sample_path.stdout.strip(), False),
        ("per_group", "collimate_rl.slime.group_reward_func", True),
    ):
        args = argparse.Namespace(custom_rm_path=path, group_rm=group_rm, collimate_seed_mode="crn")
        groups = samples()
        asyncio.run(rollout(args, groups))
        report[mode] = [sample.reward for group in groups for sample in group]
        report[mode + "_path"] = path
        for task, group in zip(tasks, groups, strict=True):
            print(f"{mode:10s} {task.task_id:28s} {[s.reward for s in group]}")
    report["seconds"] = time.perf_counter() - started
    if options.report:
        options.report.write_text(json.dumps(report))


if __name__ == "__main__":
    main()
