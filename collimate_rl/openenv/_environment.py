"""A ``collimate_envs`` Gymnasium env behind OpenEnv's ``Environment`` interface."""

from __future__ import annotations

import uuid
from typing import Any

import gymnasium as gym
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

import collimate_envs  # noqa: F401  (registers the collimate/ ids)
from collimate_envs import info as keys
from collimate_rl import _adapters
from collimate_rl.errors import CollimateUsageError
from collimate_rl.openenv._models import CollimateAction, CollimateObservation, CollimateState

__all__ = ["CollimateEnvironment"]


class CollimateEnvironment(Environment):  # type: ignore[misc]
    """One OpenEnv session = one collimate env (its own sandbox session, for ``Shell-v0``).

    ``reset`` takes OpenEnv's ``seed`` and ``episode_id`` plus ``task_id`` (a
    task of the env's set), or ``ground_truth`` with ``prompt`` (and optionally
    ``data_source``, ``crn_key``) to run a dataset row, graded from the ground
    truth. ``step`` takes a :class:`CollimateAction`; the reward and ``done``
    (terminated or truncated) ride on the observation, the env's info in
    ``observation.info``. Infrastructure failures raise, so the client sees a
    server error, never a reward.

    Args:
        env_id: a ``collimate/`` Gymnasium id.
        env_kwargs: passed to ``gymnasium.make`` (``client``, ``unix_socket``,
            ``template``, ``max_turns``, ...).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self, env_id: str = "collimate/Code-v0", env_kwargs: dict[str, Any] | None = None
    ) -> None:
        super().__init__()
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self._env: Any = None
        self._row_env = False
        self._state = CollimateState(env_id=env_id)

    def _make(self, row: _adapters.RowTaskSet | None) -> Any:
        if self._env is not None and not self._row_env and row is None:
            return self._env
        self.close()
        kwargs = dict(self.env_kwargs)
        if row is not None:
            kwargs["task_set"] = row
        self._env = gym.make(self.env_id, disable_env_checker=True, **kwargs)
        self._row_env = row is not None
        return self._env

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        ground_truth: Any = None,
        prompt: str = "",
        data_source: str = "",
        crn_key: str | None = None,
        **kwargs: Any,
    ) -> CollimateObservation:
        row = None
        if ground_truth is not None:
            config = _adapters.AdapterConfig.resolve(None, overrides=self.env_kwargs)
            ident = _adapters.crn_key(None, crn_key, prompt).removeprefix(":")
            task = _adapters.RowTask.from_ground_truth(ident, prompt, ground_truth, config)
            row = _adapters.RowTaskSet(str(data_source), task)
        env = self._make(row)
        options = {"task_id": task_id} if task_id is not None and row is None else None
        obs, info = env.reset(seed=seed, options=options)
        self._state = CollimateState(
            episode_id=episode_id or str(uuid.uuid4()),
            step_count=0,
            env_id=self.env_id,
            task_id=info.get(keys.TASK_ID),
        )
        return CollimateObservation(text=obs, info=dict(info), done=False, reward=None)

    def step(
        self, action: CollimateAction, timeout_s: float | None = None, **kwargs: Any
    ) -> CollimateObservation:
        if self._env is None or self._state.done:
            raise CollimateUsageError("reset the environment before stepping it")
        move = action.tool_call if action.tool_call is not None else action.text
        obs, reward, terminated, truncated, info = self._env.step(move)
        done = bool(terminated or truncated)
        self._state.step_count += 1
        self._state.done = done
        return CollimateObservation(text=obs, info=dict(info), done=done, reward=float(reward))

    @property
    def state(self) -> CollimateState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=self.env_id,
            description=f"{self.env_id}: code graded in a Collimate sandbox (collimate-rl)",
        )

    def close(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            env.close()
