"""verl's own reward path scores a batch with our ``compute_score``, loaded the way verl loads it.

1. ``collimate paths verl`` is the file verl's ``custom_reward_function.path`` takes;
   ``get_custom_reward_fn`` loads ``compute_score`` (and ``compute_score_batch``) from it,
   with ``reward_kwargs``, exactly as ``verl.trainer.main_ppo`` does.
2. A ``DataProto`` batch in the shape verl's rollout hands its reward manager: token ids of
   prompts (left-padded) and responses (right-padded), an attention mask, and per row the
   ``data_source``, ``reward_model.ground_truth`` and ``extra_info``.
3. ``NaiveRewardManager`` (one call per response) and ``BatchRewardManager`` (one call for
   the batch) decode the responses and write each score at the response's last token.

Rows: 3 easy tasks of ``collimate-basic`` x 4 answers (``drafts.answers``: reference,
wrong, stub, prose); ground truth: the task's asserts. No model: verl's trainer needs
GPUs and Ray workers; this runs the part of it that calls us.

Run it in an environment with verl (its pins differ from TRL's: see examples/README.md)::

    python examples/verl_reward.py

Scale it up: put the printed path in your verl config
(``reward.custom_reward_function.path=$(collimate paths verl)``,
``name=compute_score`` or ``compute_score_batch`` with ``reward_manager=batch``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from drafts import answers, asserts_ground_truth, easy_unit_tasks
from omegaconf import OmegaConf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from verl import DataProto
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.workers.reward_manager.batch import BatchRewardManager
from verl.workers.reward_manager.naive import NaiveRewardManager


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level tokenizer with no merges: any text round-trips, nothing is downloaded."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {"<pad>": 0, "<eos>": 1, **{ch: i + 2 for i, ch in enumerate(sorted(alphabet))}}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>")


def rollout_batch(tokenizer: PreTrainedTokenizerFast, tasks: list[Any]) -> DataProto:
    """The batch verl's rollout produces: prompts, responses, mask and the rows' fields."""
    prompts, responses, sources, reward_models, extra_infos = [], [], [], [], []
    for index, task in enumerate(tasks):
        for answer in answers(task):
            prompts.append(tokenizer(task.prompt)["input_ids"])
            responses.append(tokenizer(answer)["input_ids"] + [tokenizer.eos_token_id])
            sources.append("collimate-basic")
            reward_models.append({"ground_truth": asserts_ground_truth(task)})
            extra_infos.append({"index": index, "task_id": task.task_id})
    width_p, width_r = max(map(len, prompts)), max(map(len, responses))
    pad = tokenizer.pad_token_id
    prompt_ids = torch.tensor([[pad] * (width_p - len(p)) + p for p in prompts])
    response_ids = torch.tensor([r + [pad] * (width_r - len(r)) for r in responses])
    mask = torch.tensor(
        [
            [0] * (width_p - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (width_r - len(r))
            for p, r in zip(prompts, responses, strict=True)
        ]
    )
    return DataProto.from_dict(
        tensors={"prompts": prompt_ids, "responses": response_ids, "attention_mask": mask},
        non_tensors={
            "data_source": np.array(sources, dtype=object),
            "reward_model": np.array(reward_models, dtype=object),
            "extra_info": np.array(extra_infos, dtype=object),
        },
    )


def scores_at_last_token(reward_tensor: torch.Tensor, batch: DataProto) -> list[float]:
    """Each response's score: verl writes it at the response's last valid token."""
    prompt_width = batch.batch["prompts"].shape[-1]
    lengths = batch.batch["attention_mask"][:, prompt_width:].sum(-1)
    return [float(reward_tensor[i, int(n) - 1]) for i, n in enumerate(lengths)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--report", type=Path, help="write the scores here (JSON)")
    args = parser.parse_args()
    started = time.perf_counter()
    tokenizer = byte_tokenizer()
    tasks = easy_unit_tasks(args.tasks)
    # the one-liner for configs: `collimate paths verl` (here through this interpreter)
    command = [sys.executable, "-m", "collimate_rl.cli", "paths", "verl"]
    path = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()

    def load(name: str) -> Any:
        config = OmegaConf.create(
            {
                "reward": {
                    "custom_reward_function": {
                        "path": path,
                        "name": name,
                        "reward_kwargs": {"seed_mode": "crn", "timeout_seconds": 10},
                    }
                }
            }
        )
        return get_custom_reward_fn(config)

    naive = NaiveRewardManager(tokenizer, num_examine=0, compute_score=load("compute_score"))
    batch_manager = BatchRewardManager(
        tokenizer, num_examine=0, compute_score=load("compute_score_batch")
    )
    # a batch each: the managers write into the rows' extra_info
    first, second = rollout_batch(tokenizer, tasks), rollout_batch(tokenizer, tasks)
    naive_scores = scores_at_last_token(naive(first), first)
    batch_scores = scores_at_last_token(batch_manager(second), second)
    group = len(answers(tasks[0]))
    for i, task in enumerate(tasks):
        rows = slice(i * group, (i + 1) * group)
        print(f"{task.task_id:28s} naive {naive_scores[rows]}  batch {batch_scores[rows]}")
    if args.report:
        report = {
            "path": path,
            "group_size": group,
            "naive": naive_scores,
            "batch": batch_scores,
            "seconds": time.perf_counter() - started,
        }
        args.report.write_text(json.dumps(report))


if __name__ == "__main__":
    main()
