"""TRL's ``rollout_func`` hook drives our GRPO group vector env: the env owns the groups and the grading.

TRL 1.x has two hooks for environments (both marked experimental by TRL):

* ``environment_factory``: the env's methods become *tools* the model calls during
  generation (it needs a chat template with tool calling and a model trained to call
  tools); not a fit for a code-writing env whose action is the whole answer;
* ``rollout_func(prompts, trainer)``: the trainer hands over the prompts (each repeated
  ``num_generations`` times, in groups) and takes back token ids; extra keys reach the
  reward functions. This one fits, and is used here.

For each group of prompts the rollout resets ``GroupVectorEnv`` (``collimate/Code-v0``'s
vector env: one task per group, its members copy-on-write forks of one warm sandbox) on
that task, samples one body per member from the policy, and ``step`` grades all members
concurrently. The env's rewards go to TRL through ``env_reward``; an infrastructure
failure (``info["infra_error"]``) becomes ``None``, which TRL leaves out, never a 0.0.
Task set, model and tokenizer are the ones of ``trl_grpo.py`` (``tiny_lm``).

Run it (CPU)::

    python examples/trl_rollout_env.py --steps 10

Scale it up: generate with vLLM inside the rollout (``trainer.vllm_generation``), a real
model and task set, and ``GroupVectorEnv(..., base_url=...)`` on a gateway. Multi-turn
rollouts (``collimate/CodeFeedback-v0``) return the feedback tokens with an ``env_mask``
of 0 so they are not trained on.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from tiny_lm import TASKS, build_model, build_tokenizer, learn_the_grammar
from trl import GRPOConfig, GRPOTrainer

from collimate_envs import GroupVectorEnv
from collimate_envs import info as keys

GROUP_SIZE = 8
MAX_COMPLETION_TOKENS = 5
TASK_BY_PROMPT = {task.prompt: task.task_id for task in TASKS}


def make_rollout(envs: GroupVectorEnv, batches: list[list[float | None]]) -> Any:
    """The ``rollout_func``: generate per group, grade with the vector env."""

    def rollout_func(prompts: list[str], trainer: GRPOTrainer) -> dict[str, Any]:
        tokenizer = trainer.processing_class
        model = trainer.accelerator.unwrap_model(trainer.model)
        eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "env_reward": []}
        for start in range(0, len(prompts), GROUP_SIZE):
            group = prompts[start : start + GROUP_SIZE]
            if len(set(group)) != 1:
                raise ValueError("rollout_func expects each prompt repeated num_generations times")
            observations, _ = envs.reset(options={"task_id": TASK_BY_PROMPT[group[0]]})
            encoded = tokenizer(list(observations), return_tensors="pt", padding=True)
            with torch.no_grad():
                generated = model.generate(
                    **encoded,
                    do_sample=True,
                    temperature=1.0,
                    max_new_tokens=MAX_COMPLETION_TOKENS,
                    eos_token_id=eos,
                    pad_token_id=pad,
                )
            width = encoded["input_ids"].shape[1]
            for i in range(len(group)):
                prompt_ids = encoded["input_ids"][i][encoded["attention_mask"][i].bool()]
                completion = generated[i, width:].tolist()
                if eos in completion:  # keep the end token, drop the padding after it
                    completion = completion[: completion.index(eos) + 1]
                out["prompt_ids"].append(prompt_ids.tolist())
                out["completion_ids"].append(completion)
            texts = tokenizer.batch_decode(
                out["completion_ids"][-len(group) :], skip_special_tokens=True
            )
            _, rewards, _, _, infos = envs.step(texts)
            infra = infos.get(keys.INFRA_ERROR, np.zeros(len(group), dtype=bool))
            out["env_reward"] += [
                None if bad else float(r) for r, bad in zip(rewards, infra, strict=True)
            ]
        batches.append(list(out["env_reward"]))
        return {**out, "logprobs": None}  # TRL recomputes the log-probabilities itself

    return rollout_func


def env_reward(
    completions: list[Any], env_reward: list[float | None], **kwargs: Any
) -> list[float | None]:
    """The env's grade of each completion (the rollout put it in the ``env_reward`` field)."""
    return list(env_reward)


def train(steps: int, seed: int = 0) -> dict[str, Any]:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(1)  # a 32-wide model: a second thread only adds waiting
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed=seed)
    learn_the_grammar(model, tokenizer)
    dataset = Dataset.from_list([{"prompt": task.prompt} for task in TASKS] * steps)
    batches: list[list[float | None]] = []
    envs = GroupVectorEnv(
        num_envs=GROUP_SIZE, group_size=GROUP_SIZE, task_set=TASKS, timeout_seconds=10
    )
    try:
        with tempfile.TemporaryDirectory() as output_dir:
            config = GRPOConfig(
                output_dir=output_dir,
                use_cpu=True,
                seed=seed,
                max_steps=steps,
                per_device_train_batch_size=len(TASKS) * GROUP_SIZE,
                num_generations=GROUP_SIZE,
                max_completion_length=MAX_COMPLETION_TOKENS,
                learning_rate=2e-3,
                lr_scheduler_type="constant",
                beta=0.0,
                shuffle_dataset=False,
                logging_steps=1,
                report_to="none",
                save_strategy="no",
                disable_tqdm=True,
            )
            trainer = GRPOTrainer(
                model=model,
                reward_funcs=[env_reward],
                args=config,
                train_dataset=dataset,
                processing_class=tokenizer,
                rollout_func=make_rollout(envs, batches),
            )
            trainer.train()
    finally:
        envs.close()
    key = f"rewards/{env_reward.__name__}/mean"
    logged = [entry for entry in trainer.state.log_history if key in entry]
    return {
        "mean_reward": [float(entry[key]) for entry in logged],
        "group_size": GROUP_SIZE,
        "reward_batches": batches,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", type=Path, help="write the per-step rewards here (JSON)")
    args = parser.parse_args()
    started = time.perf_counter()
    result = train(args.steps, seed=args.seed)
    result["seconds"] = time.perf_counter() - started
    for step, reward in enumerate(result["mean_reward"], start=1):
        print(f"step {step:3d}  mean env reward {reward:.3f}")
    if args.report:
        args.report.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
