"""SkyRL text envs that run the ``collimate_envs`` Gymnasium envs.

SkyRL builds one env per trajectory as ``Cls(env_config=..., extras=row)``,
calls ``init(prompt)``, then ``step(text)`` until ``done``, then
``get_metrics()`` and ``close()``, on worker threads. These classes translate
that protocol onto a ``collimate_envs`` env; they do no grading of their own.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

import collimate_envs  # noqa: F401  (registers the collimate/ ids)
from collimate_envs import info as keys
from collimate_rl._adapters import (
    AdapterConfig,
    RowTask,
    RowTaskSet,
    crn_key,
    get,
    ground_truth_of,
    prompt_text,
)
from collimate_rl.errors import CollimateUsageError
from collimate_rl.seeds import is_valid_seed

__all__ = ["CollimateCodeEnv", "CollimateEnv", "CollimateRepoEnv"]

#: ``env_config`` keys read besides the :class:`AdapterConfig` fields.
ENV_CONFIG_KEYS = ("env_id", "env_kwargs")


def _row_get(extras: Mapping[str, Any], name: str) -> Any:
    """A row field, from the top level of ``extras`` first, then ``extras["extra_info"]``."""
    value = extras.get(name)
    if value in (None, ""):
        value = get(extras.get("extra_info"), name)
    return value


def _accepts(env_id: str, name: str) -> bool:
    """Whether the registered env's constructor takes ``name``."""
    entry_point: Any = gym.spec(env_id).entry_point
    if isinstance(entry_point, str):
        from gymnasium.envs.registration import load_env_creator

        entry_point = load_env_creator(entry_point)
    if entry_point is None:
        return False
    params = inspect.signature(entry_point).parameters.values()
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


class CollimateEnv(BaseTextEnv):  # type: ignore[misc]
    """Any ``collimate/`` Gymnasium env as a SkyRL ``BaseTextEnv``.

    The row (SkyRL's ``extras``) chooses the task: its
    ``reward_spec.ground_truth`` (any format
    :func:`~collimate_rl.grading.reward_spec_from_ground_truth` reads) becomes
    the episode's task, graded by the env; without one, ``task_id`` picks a task
    of the env's own task set. ``extras["max_turns"]`` (SkyRL sets it from
    ``generator.max_turns``) bounds the turns and is passed to envs that take it.

    ``env_config`` (a dict or an omegaconf ``DictConfig``): ``env_id`` (default
    ``"collimate/Code-v0"``), ``env_kwargs`` (passed to the env), and the
    :class:`~collimate_rl.skyrl.AdapterConfig` fields (``template``,
    ``timeout_seconds``, ``seed_mode``, ``base_seed``, ``entry``, ``format``,
    ``all_or_nothing``, ``base_url``, ``api_key``, ``unix_socket``), each
    falling back to ``COLLIMATE_<NAME>``.

    Seeds: ``crn`` uses the row's ``crn_seed`` if valid, else the key
    ``"<data_source>:<crn_key | uid | index | prompt text>"`` (the key the slime
    hooks use too).

    Infrastructure failures raise out of ``step`` (never a 0.0 reward): SkyRL
    has no per-trajectory "not a grade" channel, and a silent 0.0 would bias the
    group's advantages. Opting into ``env_kwargs={"on_infra_error": "flag"}``
    keeps the trainer alive instead: the step's metadata carries
    ``infra_error=True`` and the episode's metrics ``collimate_infra_errors``.
    """

    default_env_id = "collimate/Code-v0"

    def __init__(
        self,
        env_config: Any = None,
        extras: Mapping[str, Any] | None = None,
        *,
        env_id: str | None = None,
    ) -> None:
        super().__init__()
        self.extras: Mapping[str, Any] = extras or {}
        self.max_turns = int(self.extras.get("max_turns") or 1)
        self.config = AdapterConfig.resolve(env_config)
        self.env_id = str(get(env_config, "env_id") or env_id or self._choose_env_id())
        kwargs = get(env_config, "env_kwargs") or {}
        self.env_kwargs: dict[str, Any] = {str(k): v for k, v in dict(kwargs).items()}
        self.data_source = str(self.extras.get("data_source") or "")
        self.ground_truth = self._ground_truth()
        self.env: Any = None
        self.rewards: list[float] = []
        self.infra_errors = 0
        self.last_info: dict[str, Any] = {}

    def _choose_env_id(self) -> str:
        return self.default_env_id

    def _ground_truth(self) -> Any:
        reward_spec = self.extras.get("reward_spec")
        if get(reward_spec, "ground_truth") in (None, ""):
            return None
        return ground_truth_of(None, reward_spec)

    def _make(self, prompt: Any) -> tuple[Any, dict[str, Any] | None]:
        seed_mode, base_seed = self.config.seed_mode, self.config.base_seed
        explicit = _row_get(self.extras, "crn_seed")
        if seed_mode == "crn" and is_valid_seed(explicit):
            seed_mode, base_seed = "deterministic", str(explicit)
        offered: dict[str, Any] = {
            "template": self.config.template,
            "timeout_seconds": self.config.timeout_seconds,
            "client": self.config.client(),
            "seed_mode": seed_mode,
            "base_seed": base_seed,
            "max_turns": self.max_turns,
        }
        kwargs = {k: v for k, v in offered.items() if _accepts(self.env_id, k)}
        kwargs.update(self.env_kwargs)
        options: dict[str, Any] | None = None
        if self.ground_truth is not None:
            key = crn_key(None, self._row_key(), prompt).removeprefix(":")
            task = RowTask.from_ground_truth(
                key, prompt_text(prompt), self.ground_truth, self.config
            )
            kwargs["task_set"] = RowTaskSet(self.data_source, task)
        elif _row_get(self.extras, "task_id") is not None:
            options = {"task_id": _row_get(self.extras, "task_id")}
        return gym.make(self.env_id, disable_env_checker=True, **kwargs), options

    def _row_key(self) -> Any:
        for name in ("crn_key", "uid", "index"):
            value = _row_get(self.extras, name)
            if value not in (None, ""):
                return value
        return None

    def init(self, prompt: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the wrapped env; the dataset prompt is kept, or the env's first observation."""
        if self.env is not None:
            self.env.close()
        self.env, options = self._make(prompt)
        self.turns = 0
        self.rewards = []
        self.infra_errors = 0
        obs, info = self.env.reset(options=options)
        self.last_info = dict(info)
        if prompt:
            return prompt, dict(info)
        return [{"role": "user", "content": obs}], dict(info)

    def _advance(self, action: str) -> tuple[Any, float, bool, dict[str, Any]]:
        """Step the env once and keep count: ``(observation, reward, ended, info)``."""
        if self.env is None:
            raise CollimateUsageError("call init(prompt) before step()")
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        self.rewards.append(float(reward))
        self.infra_errors += int(bool(info.get(keys.INFRA_ERROR)))
        self.last_info = dict(info)
        return obs, float(reward), bool(terminated or truncated), info

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """One turn: the env grades ``action``; a non-final turn's observation becomes a user message."""
        obs, reward, ended, info = self._advance(action)
        done = ended or self.turns >= self.max_turns
        observations = [] if done or not obs else [{"role": "user", "content": obs}]
        return BaseTextEnvStepOutput(
            observations=observations, reward=float(reward), done=done, metadata=dict(info)
        )

    def get_metrics(self) -> dict[str, Any]:
        """Per-episode metrics (averaged across episodes by SkyRL's default aggregation)."""
        if not self.rewards:
            return {}
        info = self.last_info
        metrics: dict[str, Any] = {
            "collimate_return": sum(self.rewards),
            "collimate_turns": self.turns,
        }
        total = info.get(keys.TOTAL)
        if total:
            metrics["collimate_pass_rate"] = info.get(keys.PASSED, 0) / total
            metrics["collimate_solved"] = float(info.get(keys.PASSED) == total)
        if self.infra_errors:
            # only with env_kwargs={"on_infra_error": "flag"}: those 0.0 rewards are not grades
            metrics["collimate_infra_errors"] = self.infra_errors
        if info.get(keys.SEED_ACK):
            metrics["collimate_seed_ack_verified"] = float(info[keys.SEED_ACK] == "verified")
        return metrics

    def close(self) -> None:
        """Close the wrapped env (its sessions, if any); idempotent."""
        env, self.env = self.env, None
        if env is not None:
            env.close()


class CollimateCodeEnv(CollimateEnv):
    """Code grading: ``collimate/Code-v0``, or ``collimate/CodeFeedback-v0`` when ``max_turns > 1``.

    With ``max_turns > 1`` a failing attempt's test feedback comes back as the
    next user message, until every test passes or the turns run out.

    >>> import skyrl_gym  # doctest: +SKIP
    >>> env = skyrl_gym.make("collimate_code", env_config={},
    ...                      extras={"reward_spec": {"ground_truth": ["assert f() == 1"]}})  # doctest: +SKIP
    """

    def _choose_env_id(self) -> str:
        return "collimate/CodeFeedback-v0" if self.max_turns > 1 else "collimate/Code-v0"


class CollimateRepoEnv(CollimateEnv):
    """``collimate/Repo-v0`` for SkyRL: a multi-turn agent with tool calls on a repository task.

    The row (``extras``) is the task itself when it carries an ``instance_id`` and a
    ``problem_statement`` (a SWE-bench, R2E-Gym or SWE-smith row; ``repo_files`` and
    ``template`` for a snapshot), else ``task_id`` picks a task of ``env_kwargs["task_set"]``
    (default ``collimate-repos``). Each model turn is one action: a function call as JSON
    (``{"name": ..., "arguments": {...}}``) or text with one fenced bash block; the tool's
    output comes back as the next user message. ``extras["max_turns"]`` is the turn budget;
    the reward arrives on the last turn (submit, or the budget spent). The tool schemas for
    the chat template are :data:`collimate_envs.repo.TOOLS`.

    >>> import skyrl_gym  # doctest: +SKIP
    >>> env = skyrl_gym.make("collimate_repo", env_config={}, extras=swe_row)  # doctest: +SKIP
    """

    default_env_id = "collimate/Repo-v0"

    def _ground_truth(self) -> Any:
        return None  # a repository row is graded by its hidden tests, not a ground truth

    def _make(self, prompt: Any) -> tuple[Any, dict[str, Any] | None]:
        kwargs: dict[str, Any] = {
            "client": self.config.client(),
            "max_turns": max(self.max_turns, 1),
            "command_timeout": self.config.timeout_seconds,
        }
        kwargs.update(self.env_kwargs)
        options: dict[str, Any] | None = None
        if self.extras.get("instance_id") and self.extras.get("problem_statement"):
            row = {k: v for k, v in self.extras.items() if k not in ("max_turns", "prompt")}
            kwargs["task_set"] = [row]
        elif _row_get(self.extras, "task_id") is not None:
            options = {"task_id": _row_get(self.extras, "task_id")}
        return gym.make(self.env_id, disable_env_checker=True, **kwargs), options

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """One tool call; its output is the next user message until the episode ends."""
        obs, reward, done, info = self._advance(action)
        observations = [] if done else [{"role": "user", "content": obs}]
        metadata = {k: v for k, v in info.items() if k not in ("log_tail",)}
        return BaseTextEnvStepOutput(
            observations=observations, reward=float(reward), done=done, metadata=metadata
        )
