"""TRL's GRPOTrainer teaches a tiny GPT-2 to write Python, rewarded by ``collimate_rl.trl.reward_func``.

What it shows: a real trainer loop calling our reward. Each step, ``GRPOTrainer``
samples 8 bodies for each of the 4 prompts of the toy task set (``tiny_lm.TASKS``:
write ``f(x) = x + 1``, ``x * 2``, ``x + 2``, ``x * x``); TRL calls our reward function
with the completions and the dataset's ``ground_truth`` column; each body runs under
``def f(x):`` against 4 unit tests in its own sandbox on the local node, and its reward
is the fraction that pass. The mean reward rises (about 0.21 over the first 10 steps,
about 0.43 over the last 10, seeded and repeatable): the model moves from random
well-formed bodies towards the ones that pass.
It does not learn all four functions in 40 steps; it is a smoke-scale run, not a result.

Run it (CPU, about a minute; the embedded local node starts on first use)::

    python examples/trl_grpo.py --steps 40

Scale it up: replace ``tiny_lm`` with ``AutoModelForCausalLM.from_pretrained(...)`` and
its tokenizer, your own rows (any ground truth ``reward_spec_from_ground_truth`` reads),
drop ``use_cpu``, and point ``COLLIMATE_SERVE_URL`` / ``COLLIMATE_API_KEY`` at a gateway
or run a node per machine.
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
from tiny_lm import TASKS, build_model, build_tokenizer, humaneval_ground_truth, learn_the_grammar
from trl import GRPOConfig, GRPOTrainer

from collimate_rl.trl import make_reward_func

GROUP_SIZE = 8


def train(steps: int, seed: int = 0) -> dict[str, Any]:
    """Warm up, then ``steps`` GRPO steps; returns the per-step rewards TRL logged."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    # Each op on a 32-wide model is too small to split: a second thread only adds waiting
    # (and makes the run wait on other processes' load).
    torch.set_num_threads(1)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed=seed)
    warm_up_loss = learn_the_grammar(model, tokenizer)

    # One row per task, in a fixed order: every step sees each task once (4 x 8 completions),
    # so the per-step mean reward is comparable across steps.
    rows = [{"prompt": t.prompt, "ground_truth": humaneval_ground_truth(t)} for t in TASKS]
    dataset = Dataset.from_list(rows * steps)
    # The body's fraction of tests passed (HumanEval's own verdict is all-or-nothing).
    collimate_reward = make_reward_func(all_or_nothing=False)
    batches: list[list[float | None]] = []  # every call's rewards, to report on

    def reward_func(**kwargs: Any) -> list[float | None]:
        # None marks an infrastructure failure (TRL leaves that completion out), never a 0.0
        rewards = collimate_reward(**kwargs)
        batches.append(rewards)
        return rewards

    with tempfile.TemporaryDirectory() as output_dir:
        config = GRPOConfig(
            output_dir=output_dir,
            use_cpu=True,
            seed=seed,
            max_steps=steps,
            per_device_train_batch_size=len(TASKS) * GROUP_SIZE,
            num_generations=GROUP_SIZE,
            max_completion_length=5,
            temperature=1.0,
            learning_rate=2e-3,
            lr_scheduler_type="constant",
            beta=0.0,  # no reference model: half the forward passes
            shuffle_dataset=False,
            logging_steps=1,
            report_to="none",
            save_strategy="no",
            disable_tqdm=True,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[reward_func],
            args=config,
            train_dataset=dataset,
            processing_class=tokenizer,
        )
        trainer.train()
    # TRL logs each reward function's mean as rewards/<its __name__>/mean.
    key = f"rewards/{reward_func.__name__}/mean"
    logged = [entry for entry in trainer.state.log_history if key in entry]
    return {
        "warm_up_loss": warm_up_loss,
        "mean_reward": [float(entry[key]) for entry in logged],
        "reward_std": [float(entry["reward_std"]) for entry in logged],
        "group_size": GROUP_SIZE,
        "reward_batches": batches,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", type=Path, help="write the per-step rewards here (JSON)")
    args = parser.parse_args()
    started = time.perf_counter()
    result = train(args.steps, seed=args.seed)
    result["seconds"] = time.perf_counter() - started
    rewards = result["mean_reward"]
    for step, reward in enumerate(rewards, start=1):
        print(f"step {step:3d}  mean reward {reward:.3f}")
    window = max(1, len(rewards) // 4)
    first, last = np.mean(rewards[:window]), np.mean(rewards[-window:])
    print(f"mean reward, first {window} steps: {first:.3f}; last {window} steps: {last:.3f}")
    if args.report:
        args.report.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
