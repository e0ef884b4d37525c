"""``collimate/Code-v0``: one task, one completion, one grade."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

from collimate_envs import info as keys
from collimate_envs._backend import Backend
from collimate_envs._checks import check_infra_mode, check_render_mode
from collimate_envs._grading import grade_or_flag
from collimate_envs._language import prompt_for
from collimate_envs._seeding import SeedMode, episode_seed, validate_seed_mode
from collimate_envs._tasks import TaskChooser
from collimate_envs.spaces import completion_space, prompt_space

__all__ = ["CodeEnv"]


class CodeEnv(gym.Env[str, str]):
    """Single-turn code generation graded in a sandbox.

    ## Description
    Each episode shows one programming task; the agent answers with one
    completion (chat text with a fenced code block, or bare code); the
    completion runs in a fresh copy-on-write fork of the template's warm
    sandbox against the task's tests, and the episode ends.

    ## Action Space
    ``Text`` of any printable characters, up to 131,072 of them: the completion.

    ## Observation Space
    ``Text`` of any printable characters, up to 65,536: the task prompt.

    ## Rewards
    The grade in ``[0, 1]``: the fraction of tests passed (all-or-nothing if the
    task's spec says so). A wrong answer, an exception, a crash or a timeout
    scores what it honestly passed. Infrastructure failures are never rewards:
    they raise (``on_infra_error="raise"``, the default) or give reward 0.0 with
    ``info["infra_error"] = True`` (``on_infra_error="flag"``).

    ## Starting State
    A task drawn uniformly from the task set by the env's RNG
    (``reset(seed=...)`` makes the draw reproducible), or the one named by
    ``reset(options={"task_id": ...})``.

    ## Episode End
    Terminates after one step; never truncates.

    ## Info
    ``task_id``, ``passed``, ``total``, ``exit_code``, ``seed`` (the exec seed
    used), ``seed_ack``, ``infra_error`` (see :mod:`collimate_envs.info`).

    ## Arguments
    ``task_set`` (a bundled set name, a JSONL path or a ``TaskSet``; default
    ``"collimate-basic"``), ``difficulty`` (filter), ``template`` (default
    ``"python3"``; a language template such as ``"cpp"`` grades that language, with
    stdin/stdout task sets such as ``"collimate-polyglot"``), ``seed_mode`` (``vanilla`` | ``crn`` | ``deterministic``),
    ``base_seed``, ``timeout_seconds``, ``on_infra_error``, ``client`` or
    ``base_url`` / ``api_key`` / ``unix_socket`` (default: the embedded local
    node), ``render_mode`` (``"ansi"``).

    ## Version History
    * v0: initial version.

    Example:
        >>> import gymnasium as gym
        >>> import collimate_envs
        >>> env = gym.make("collimate/Code-v0")  # doctest: +SKIP
        >>> prompt, info = env.reset(seed=0)  # doctest: +SKIP
        >>> _, reward, terminated, _, info = env.step("```python\\ndef solve(): ...\\n```")  # doctest: +SKIP
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        task_set: Any = "collimate-basic",
        *,
        difficulty: str | None = None,
        template: str = "python3",
        seed_mode: SeedMode = "vanilla",
        base_seed: str | None = None,
        timeout_seconds: int = 10,
        on_infra_error: str = "raise",
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        unix_socket: str | None = None,
        render_mode: str | None = None,
    ) -> None:
        check_render_mode(render_mode, self.metadata)
        check_infra_mode(on_infra_error)
        self.render_mode = render_mode
        self.tasks = TaskChooser.load(task_set, difficulty=difficulty)
        self.template = template
        self.seed_mode = validate_seed_mode(seed_mode, base_seed)
        self.base_seed = base_seed
        self.timeout_seconds = timeout_seconds
        self.on_infra_error = on_infra_error
        self.backend = Backend.from_kwargs(
            client, {"base_url": base_url, "api_key": api_key, "unix_socket": unix_socket}
        )
        self.observation_space = prompt_space()
        self.action_space = completion_space()
        self._task: Any = None
        self._last: dict[str, Any] = {}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._task = self.tasks.choose(self.np_random, options)
        prompt = prompt_for(self._task, self.template)
        self._last = {"prompt": prompt}
        return prompt, {keys.TASK_ID: self._task.task_id}

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._task is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        task = self._task
        seed = episode_seed(self.seed_mode, self.np_random, self.tasks.key(task), self.base_seed)
        result = grade_or_flag(
            self.backend.client,
            self.template,
            action,
            task.to_reward_spec(),
            seed=seed,
            timeout_seconds=self.timeout_seconds,
            policy=self.on_infra_error,
        )
        info = grade_info(task.task_id, result)
        self._last.update(completion=action, result=result)
        self._task = None
        return "", float(result.reward), True, False, info

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        from collimate_envs._render import render_grade

        return render_grade(self._last)


def grade_info(task_id: str, result: Any) -> dict[str, Any]:
    """The step ``info`` for one grade (no timings, so a seeded replay compares equal)."""
    return {
        keys.TASK_ID: task_id,
        keys.PASSED: int(result.passed),
        keys.TOTAL: int(result.total),
        keys.EXIT_CODE: int(result.exit_code) if result.exit_code is not None else -1,
        keys.SEED: result.seed or "",
        keys.SEED_ACK: result.seed_ack or "",
        keys.INFRA_ERROR: bool(result.infra_error),
    }
