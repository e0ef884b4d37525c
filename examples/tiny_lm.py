"""The tiny language model and the toy task set both TRL examples train on (nothing downloaded).

* :data:`TASKS`: four functions ``f(x)`` to write (``x + 1``, ``x * 2``, ``x + 2``,
  ``x * x``), as a ``collimate_envs`` task set. The prompt states the function; the
  answer is the body of ``def f(x):``, graded by running it against four unit tests in
  a sandbox (reward: the fraction passed). ``return x * 2`` passes 1 of 4 tests of
  ``x + 1`` (f(1) == 2), so near-misses earn partial credit: GRPO has a gradient.
* :func:`build_tokenizer`: a ``tokenizers`` WordLevel vocabulary of 13 tokens (code
  pieces such as ``return``, `` x``, `` +`` and digits, the prompt's ``f(x)`` and `` =``,
  and 3 special tokens), wrapped as a transformers fast tokenizer.
* :func:`build_model`: a 2-layer, 32-wide GPT-2 built from a config.
* :func:`learn_the_grammar`: a short supervised warm-up on *random* well-formed bodies
  (``return x - 3``, ``return 2``, ...), each paired with a random prompt. It stands in
  for pretraining: the model learns what a body looks like, never which body a prompt
  needs (the bodies are drawn independently of the prompt and of the tests). Without
  it a randomly initialised model almost never writes a program that parses, every
  reward is 0 and GRPO has nothing to learn from.

To scale up, replace all of this with a real model and tokenizer
(``AutoModelForCausalLM.from_pretrained(...)``) and a real task set.

>>> tokenizer = build_tokenizer()
>>> tokenizer.decode(tokenizer("return x * 2")["input_ids"])
'return x * 2'
>>> [task.task_id for task in TASKS]
['toy/x+1', 'toy/x*2', 'toy/x+2', 'toy/x*x']
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from collimate_envs.tasks import Task, TaskSet, UnitTests

SPECIAL_TOKENS = ["<pad>", "<eos>", "<unk>"]
OPERANDS = [" x", " 1", " 2", " 3"]
OPERATORS = [" +", " -", " *"]
# Every token carries its own leading space, so the Fuse decoder gives back the text.
VOCABULARY = [*SPECIAL_TOKENS, "return", *OPERANDS, *OPERATORS, "f(x)", " ="]
STARTER = "def f(x):\n"
TEST_INPUTS = (0, 1, 2, 3)

_TARGETS: dict[str, Callable[[int], int]] = {
    "x + 1": lambda x: x + 1,
    "x * 2": lambda x: x * 2,
    "x + 2": lambda x: x + 2,
    "x * x": lambda x: x * x,
}

#: The toy task set: the prompt states f, the answer is its body under ``def f(x):``.
TASKS = TaskSet(
    [
        Task(
            task_id="toy/" + formula.replace(" ", ""),
            prompt=f"f(x) = {formula}",
            entry_point="f",
            starter_code=STARTER,
            tests=UnitTests(cases=tuple(((x,), fn(x)) for x in TEST_INPUTS)),
        )
        for formula, fn in _TARGETS.items()
    ],
    name="toy-arithmetic",
)


def humaneval_ground_truth(task: Task) -> str:
    """The task as a HumanEval row (``prompt`` to complete, ``check``, ``entry_point``), as JSON.

    The rows a TRL dataset carries: ``collimate_rl.trl.reward_func`` reads this format.
    """
    asserts = "".join(
        f"    assert candidate({args[0]!r}) == {expected!r}\n"
        for args, expected in task.tests.cases
    )
    return json.dumps(
        {
            "prompt": task.starter_code,
            "test": "def check(candidate):\n" + asserts,
            "entry_point": task.entry_point,
        }
    )


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A WordLevel tokenizer over :data:`VOCABULARY`; pads on the left, as TRL wants."""
    vocab = {token: index for index, token in enumerate(VOCABULARY)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r" ?[^ ]+"), behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
    )


def build_model(tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> GPT2LMHeadModel:
    """A 2-layer, 32-wide GPT-2 from a config (no dropout: sampling and training agree)."""
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=2,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return GPT2LMHeadModel(config)


def random_body(rng: random.Random) -> str:
    """A well-formed body: ``return <operand>`` or ``return <operand> <op> <operand>``."""
    body = "return" + rng.choice(OPERANDS)
    if rng.random() < 0.8:
        body += rng.choice(OPERATORS) + rng.choice(OPERANDS)
    return body


def learn_the_grammar(
    model: GPT2LMHeadModel,
    tokenizer: PreTrainedTokenizerFast,
    *,
    steps: int = 60,
    batch_size: int = 64,
    seed: int = 1,
) -> float:
    """Supervised warm-up on random bodies after random prompts; returns the last loss.

    Only the body's tokens (and the end-of-sequence token) are in the loss.
    """
    rng = random.Random(seed)
    prompts = [task.prompt for task in TASKS]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        rows = []
        for _ in range(batch_size):
            prompt_ids = tokenizer(rng.choice(prompts))["input_ids"]
            body_ids = tokenizer(random_body(rng))["input_ids"] + [tokenizer.eos_token_id]
            rows.append((prompt_ids, body_ids))
        width = max(len(p) + len(b) for p, b in rows)
        ids, labels, mask = [], [], []
        for prompt_ids, body_ids in rows:
            pad = width - len(prompt_ids) - len(body_ids)
            ids.append([tokenizer.pad_token_id] * pad + prompt_ids + body_ids)
            labels.append([-100] * (pad + len(prompt_ids)) + body_ids)
            mask.append([0] * pad + [1] * (len(prompt_ids) + len(body_ids)))
        loss = model(
            input_ids=torch.tensor(ids),
            attention_mask=torch.tensor(mask),
            labels=torch.tensor(labels),
        ).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return float(loss.detach())
