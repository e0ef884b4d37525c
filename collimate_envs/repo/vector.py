"""The GRPO group vector env of ``collimate/Repo-v0``: G groups of K agents, one task per group.

``gymnasium.make_vec("collimate/Repo-v0", num_envs=G * K, group_size=K)`` builds it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from collimate_envs import info as keys
from collimate_envs._group_vector import GroupVectorBase, StepResult, group_advantages
from collimate_envs.repo._actions import TOOLS
from collimate_envs.repo._episode import Episode, first_observation, grade_info
from collimate_envs.repo._prepared import PreparedTask
from collimate_envs.repo._settings import RepoSettings
from collimate_envs.repo._task import ImageFor
from collimate_envs.repo.env import TaskSandboxes, grade_with_retry
from collimate_rl.errors import CollimateError, CollimateUsageError

__all__ = ["RepoGroupVectorEnv"]


class RepoGroupVectorEnv(GroupVectorBase):
    """``num_envs = groups * group_size`` agents; each group shares a task and its pristine sandbox.

    On reset each group draws a task, prepares it once (the snapshot written, the runner
    ready: one sandbox) and forks it ``group_size`` ways: members are copy-on-write forks,
    so K agents cost one setup. Members step independently (one ``step`` runs every
    member's action concurrently); a member whose episode ended (submitted, or out of
    budget) is graded at once in a fresh fork of the pristine state and then waits, its
    actions ignored (``info["waiting"]``), until its whole group is done. The step that
    ends a group carries, for each of its members, ``group_done``, ``group_reward`` (the
    member's grade) and ``advantage``, (reward - group mean) / (group std + 1e-6) over the
    members without an infrastructure failure (NaN for those), as in ``Code-v0``. The next
    step resets that group (gymnasium's next-step autoreset; its actions are ignored).

    Members of group ``g`` are indices ``g*K .. g*K+K-1``. Arguments: those of
    ``collimate/Repo-v0`` plus ``group_size`` and ``concurrency`` (threads driving members).
    """

    worker_name = "collimate-repo"

    def __init__(
        self,
        num_envs: int = 1,
        group_size: int | None = None,
        *,
        task_set: Any = "collimate-repos",
        image: str | None = None,
        image_for: ImageFor | None = None,
        template: str | None = None,
        workdir: str | None = None,
        test_cmd: str | None = None,
        partial: bool = False,
        max_turns: int = 50,
        max_wall_seconds: float | None = 1800.0,
        max_output_bytes: int = 1 << 20,
        max_observation_chars: int = 10000,
        command_timeout: int = 60,
        test_timeout: int = 300,
        vendor_runner: bool | None = None,
        on_infra_error: str = "flag",
        concurrency: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        unix_socket: str | None = None,
        render_mode: str | None = None,
        max_episode_steps: int | None = None,
    ) -> None:
        super().__init__(
            num_envs,
            group_size,
            on_infra_error=on_infra_error,
            client=client,
            base_url=base_url,
            api_key=api_key,
            unix_socket=unix_socket,
            render_mode=render_mode,
        )
        if AutoresetMode(autoreset_mode) != AutoresetMode.NEXT_STEP:
            raise ValueError("collimate/Repo-v0's vector env autoresets on the next step only")
        self.settings = RepoSettings(
            task_set,
            image=image,
            image_for=image_for,
            template=template,
            workdir=workdir,
            test_cmd=test_cmd,
            partial=partial,
            max_turns=max_episode_steps or max_turns,
            max_wall_seconds=max_wall_seconds,
            max_output_bytes=max_output_bytes,
            max_observation_chars=max_observation_chars,
            command_timeout=command_timeout,
            test_timeout=test_timeout,
            vendor_runner=vendor_runner,
        )
        self.tasks = self.settings.load_tasks()
        self.budgets = self.settings.budgets
        self.concurrency = concurrency or min(self.num_envs, 16)
        self.tools: list[dict[str, Any]] = [dict(tool) for tool in TOOLS]
        self._sandboxes = TaskSandboxes.for_settings(self.backend, self.settings)
        self._prepared: list[PreparedTask | None] = [None] * self.num_groups
        self._episodes: list[Episode | None] = [None] * self.num_envs
        self._done = np.zeros(self.num_envs, dtype=bool)
        self._rewards = np.zeros(self.num_envs, dtype=np.float64)
        self._infra = np.zeros(self.num_envs, dtype=bool)
        self._group_over = np.zeros(self.num_groups, dtype=bool)

    @property
    def member_sandboxes(self) -> list[Any]:
        """Each member's sandbox in the running episodes (``None`` for a member without one)."""
        return [e.member if e is not None else None for e in self._episodes]

    def _map(self, fn: Any, items: list[Any]) -> list[Any]:
        if len(items) <= 1:
            return [fn(item) for item in items]
        return list(self._workers().map(fn, items))

    # -- reset --------------------------------------------------------------------------

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        self._seed_rng(seed)
        observations = [""] * self.num_envs
        infos = self._open_groups(list(range(self.num_groups)), options, observations, {})
        return tuple(observations), infos

    def _open_groups(
        self,
        groups: list[int],
        options: dict[str, Any] | None,
        observations: list[str],
        infos: dict[str, Any],
    ) -> dict[str, Any]:
        """Reset ``groups``: each member observes its task's statement, ``infos`` its reset info."""
        for g, statement in zip(groups, self._reset_groups(groups, options), strict=False):
            for i in self._members(g):
                observations[i] = statement
            infos = self._add_group_info(infos, g, self._reset_info(g))
        return infos

    def _reset_info(self, g: int) -> dict[str, Any]:
        prepared = self._prepared[g]
        return {
            keys.TASK_ID: prepared.task.task_id if prepared else "",
            keys.GROUP: g,
            keys.TURN: 0,
        }

    def _reset_groups(self, groups: list[int], options: dict[str, Any] | None) -> list[str]:
        tasks = [self.tasks.choose(self.np_random, options) for _ in groups]
        for g in groups:
            self._close_group(g)

        def prepare(job: tuple[int, Any]) -> str:
            g, task = job
            prepared = self._prepared[g] = self._sandboxes.prepare(task)
            members = prepared.fork(self.group_size)
            for i, member in zip(self._members(g), members, strict=False):
                self._episodes[i] = Episode(prepared, member, self.budgets)
                self._done[i], self._rewards[i], self._infra[i] = False, 0.0, False
            self._group_over[g] = False
            return first_observation(prepared)

        return self._map(prepare, list(zip(groups, tasks, strict=False)))

    def _close_group(self, g: int) -> None:
        for i in self._members(g):
            episode, self._episodes[i] = self._episodes[i], None
            if episode is not None:
                episode.close()
        prepared, self._prepared[g] = self._prepared[g], None
        if prepared is not None:
            prepared.close()

    # -- step ---------------------------------------------------------------------------

    def step(self, actions: Any) -> StepResult:
        actions = self._checked_actions(actions)
        observations = [""] * self.num_envs
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        over = [g for g in range(self.num_groups) if self._group_over[g]]
        infos = self._open_groups(over, None, observations, {})
        live = [
            i
            for i in range(self.num_envs)
            if i // self.group_size not in over and not self._done[i]
        ]
        results = dict(zip(live, self._map(lambda i: self._act(i, actions[i]), live), strict=False))
        for i in range(self.num_envs):
            g = i // self.group_size
            if g in over:
                continue
            if i not in results:
                infos = self._add_info(infos, {keys.GROUP: g, "waiting": True}, i)
                continue
            observation, reward, end, info = results[i]
            observations[i], rewards[i] = observation, reward
            if end is not None:
                terminated[i], truncated[i] = end == "submitted", end != "submitted"
            info[keys.GROUP] = g
            infos = self._add_info(infos, info, i)
        for g in range(self.num_groups):
            members = list(self._members(g))
            if (
                g in over
                or not all(self._done[i] for i in members)
                or not any(i in results for i in members)
            ):
                continue
            self._group_over[g] = True
            valid = ~self._infra[members]
            advantages = group_advantages(self._rewards[members], valid)
            for k, i in enumerate(members):
                extra = {
                    "group_done": True,
                    "group_reward": float(self._rewards[i]),
                    keys.ADVANTAGE: float(advantages[k]),
                }
                infos = self._add_info(infos, extra, i)
        return tuple(observations), rewards, terminated, truncated, infos

    def _act(self, i: int, action: Any) -> tuple[str, float, str | None, dict[str, Any]]:
        episode = self._episodes[i]
        if episode is None:
            raise RuntimeError("call reset() before step()")
        task_id = episode.prepared.task.task_id
        try:
            observation, info, end = episode.act(action)
            info.update({keys.TASK_ID: task_id, keys.TURN: episode.turn})
            if end is None:
                return observation, 0.0, None, info
            grade = grade_with_retry(episode, self._sandboxes, self.settings)
        except CollimateError as exc:
            if isinstance(exc, CollimateUsageError) or self.on_infra_error == "raise":
                raise
            self._done[i], self._infra[i], self._rewards[i] = True, True, 0.0
            return (
                "",
                0.0,
                "infra_error",
                {keys.TASK_ID: task_id, keys.INFRA_ERROR: True, "error": str(exc)},
            )
        info.update(grade_info(grade, end))
        info[keys.INFRA_ERROR] = False
        self._done[i], self._rewards[i] = True, grade.reward
        return observation, float(grade.reward), end, info

    def close_extras(self, **kwargs: Any) -> None:
        for g in range(self.num_groups):
            self._close_group(g)
        self._close_workers()
        self._sandboxes.close()
