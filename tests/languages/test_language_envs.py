"""``collimate/Code-v0`` and its GRPO vector env on every language template."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest

import collimate_envs  # noqa: F401  (registers the envs)
from collimate_envs import info as keys

from ._programs import FENCE, LANGUAGES, fenced

pytestmark = pytest.mark.bwrap

TASK = "polyglot/fizzbuzz"
#: Seconds per grade: the build's share of the default 10 s ran out once on a loaded CI machine
#: (Go); these tests check the wiring, not the speed.
TIMEOUT = 60


@pytest.mark.parametrize("lang", LANGUAGES)
def test_code_env_and_make_vec_grade_the_language(lang: str, local_client: Any, need: Any) -> None:
    need(lang)
    env = gym.make(
        "collimate/Code-v0",
        task_set="collimate-polyglot",
        template=lang,
        client=local_client,
        timeout_seconds=TIMEOUT,
        render_mode="ansi",
    )
    prompt, info = env.reset(seed=0, options={"task_id": TASK})
    assert info[keys.TASK_ID] == TASK and f"```{FENCE[lang]} block" in prompt
    chosen = next(t for t in env.unwrapped.tasks.tasks if t.task_id == TASK)
    _, reward, terminated, _, step_info = env.step(fenced(chosen.solution(lang), FENCE[lang]))
    assert reward == 1.0 and terminated and not step_info[keys.INFRA_ERROR], env.render()
    env.close()

    envs = gym.make_vec(
        "collimate/Code-v0",
        num_envs=2,
        group_size=2,
        task_set="collimate-polyglot",
        template=lang,
        client=local_client,
        timeout_seconds=TIMEOUT,
    )
    prompts, _ = envs.reset(seed=0, options={"task_id": TASK})
    assert prompts[0] == prompts[1] == prompt
    actions = (
        fenced(chosen.solution(lang), FENCE[lang]),
        fenced(chosen.wrong_solution_in(lang), FENCE[lang]),
    )
    _, rewards, _, _, infos = envs.step(actions)
    assert rewards[0] == 1.0 and rewards[1] < 1.0
    assert infos[keys.ADVANTAGE][0] > infos[keys.ADVANTAGE][1]
    envs.close()
