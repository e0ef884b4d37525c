"""The GRPO group vector env: G groups of K members, one task per group per episode.

``gymnasium.make_vec("collimate/Code-v0", num_envs=G * K, group_size=K)`` builds it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from collimate_envs import info as keys
from collimate_envs._grading import grade_or_flag
from collimate_envs._group_vector import GroupVectorBase, StepResult, group_advantages
from collimate_envs._groups import GroupSessions, MemberForker, SessionLedger
from collimate_envs._language import prompt_for
from collimate_envs._seeding import SeedMode, episode_seed, validate_seed_mode
from collimate_envs._tasks import TaskChooser
from collimate_envs.code import grade_info
from collimate_rl.grading import GradeResult
from collimate_rl.grading._batched import grade_items

__all__ = ["GroupVectorEnv", "group_advantages"]


class GroupVectorEnv(GroupVectorBase):
    """``num_envs = groups * group_size`` members; each group shares a task and a warm sandbox.

    On reset, each group draws one task and gets ``group_size`` fresh members:
    copy-on-write forks of one parent session the env created from the
    template and never runs anything in. Members do not depend on the task,
    so the next reset's are forked in the background while this episode
    runs, and old ones are deleted in the background. Member ``i`` of a
    group grades in its own fork, so one member's files, crash or timeout
    never touch another. One ``step`` grades every member concurrently.
    Members of group ``g`` are indices ``g*K .. g*K+K-1``.

    ``info`` holds per-member arrays (``task_id``, ``passed``, ``total``,
    ``exit_code``, ``seed``, ``infra_error``, ``group``) with ``_key`` masks, and
    ``advantage``: (reward - group mean) / (group std + 1e-6) over the members
    whose grade was not an infrastructure failure (NaN for those).

    Seeds: ``seed_mode="crn"`` (the default here) gives every member of a group
    the same exec seed, so randomized graders draw the same inputs for all of
    them; ``vanilla`` gives each member its own; ``deterministic`` a fixed one.

    Autoreset follows gymnasium's ``AutoresetMode``: ``NEXT_STEP`` (default),
    ``SAME_STEP`` and ``DISABLED`` (then ``reset(options={"reset_mask": m})``,
    where ``m`` must cover whole groups).

    Example:
        >>> import gymnasium as gym
        >>> envs = gym.make_vec("collimate/Code-v0", num_envs=8, group_size=4)  # doctest: +SKIP
        >>> prompts, infos = envs.reset(seed=0)  # doctest: +SKIP
    """

    worker_name = "collimate-grade"

    def __init__(
        self,
        num_envs: int = 1,
        group_size: int | None = None,
        *,
        task_set: Any = "collimate-basic",
        difficulty: str | None = None,
        template: str = "python3",
        seed_mode: SeedMode = "crn",
        base_seed: str | None = None,
        timeout_seconds: int = 10,
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
        self.tasks = TaskChooser.load(task_set, difficulty=difficulty)
        self.template = template
        self.seed_mode = validate_seed_mode(seed_mode, base_seed)
        self.base_seed = base_seed
        self.timeout_seconds = timeout_seconds
        # A client over several nodes offers capacity(): grade enough at once to fill them.
        offered = getattr(client, "capacity", None)
        capacity = int(offered()) if callable(offered) else 0
        self.concurrency = concurrency or min(self.num_envs, max(16, capacity))
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.metadata = {**self.metadata, "autoreset_mode": self.autoreset_mode}
        self._ledger: SessionLedger | None = None
        self._forker: MemberForker | None = None
        self._groups: list[GroupSessions | None] = [None] * self.num_groups
        self._group_tasks: list[Any] = [None] * self.num_groups
        self._group_keys: list[str] = [""] * self.num_groups
        self._ended = np.zeros(self.num_groups, dtype=bool)
        self._obs: list[str] = [""] * self.num_envs

    # -- lifecycle -----------------------------------------------------------------

    @property
    def ledger(self) -> SessionLedger:
        if self._ledger is None:
            self._ledger = SessionLedger(self.backend.client)
            self._ledger.attach_to(self)
        return self._ledger

    @property
    def forker(self) -> MemberForker:
        if self._forker is None:
            self._forker = MemberForker(self.ledger, self.template)
        return self._forker

    def close_extras(self, **kwargs: Any) -> None:
        self._close_workers()
        if self._forker is not None:
            self._forker.close()
            self._forker = None
        if self._ledger is not None:
            self._ledger.reap_all()
        self._groups = [None] * self.num_groups

    # -- reset ---------------------------------------------------------------------

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        self._seed_rng(seed)
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        groups = self._groups_from_mask(mask) if mask is not None else range(self.num_groups)
        infos: dict[str, Any] = {}
        self._reset_groups(list(groups), options)
        for g in groups:
            infos = self._add_group_info(infos, g, self._reset_info(g))
        return tuple(self._obs), infos

    def _groups_from_mask(self, mask: Any) -> list[int]:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
            raise ValueError(f"reset_mask must be a bool array of shape ({self.num_envs},)")
        if not mask.any():
            raise ValueError("reset_mask must select at least one env")
        by_group = mask.reshape(self.num_groups, self.group_size)
        if not (by_group.all(axis=1) | ~by_group.any(axis=1)).all():
            raise ValueError("reset_mask must cover whole groups (members share one task)")
        return [g for g in range(self.num_groups) if by_group[g, 0]]

    def _reset_groups(self, groups: list[int], options: dict[str, Any]) -> None:
        """New episodes for ``groups``: a task each, fresh members (old ones retired)."""
        if not groups:
            return
        old: list[GroupSessions] = []
        for g in groups:
            sessions, self._groups[g] = self._groups[g], None
            if sessions is not None:
                old.append(sessions)
        for g in groups:  # the RNG draws, in group order: task, then CRN key
            task = self.tasks.choose(self.np_random, options)
            self._group_tasks[g] = task
            # CRN key: shared by the group's members, fresh for every episode, and
            # replayable because the nonce comes from the env's seeded RNG.
            self._group_keys[g] = f"{self.tasks.key(task)}:{self.np_random.bytes(8).hex()}"
        self.forker.retire(*(sid for sessions in old for sid in sessions.members))
        opened = self.forker.open(len(groups), self.group_size)
        for g, sessions in zip(groups, opened, strict=True):
            self._groups[g] = sessions
            self._ended[g] = False
            prompt = prompt_for(self._group_tasks[g], self.template)
            for i in self._members(g):
                self._obs[i] = prompt

    def _reset_info(self, g: int) -> dict[str, Any]:
        return {keys.TASK_ID: self._group_tasks[g].task_id, keys.GROUP: g}

    # -- step ----------------------------------------------------------------------

    def step(self, actions: Any) -> StepResult:
        actions = self._checked_actions(actions)
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}

        to_reset = [g for g in range(self.num_groups) if self._ended[g]]
        if to_reset and self.autoreset_mode == AutoresetMode.DISABLED:
            raise RuntimeError(
                f"groups {to_reset} have ended; with autoreset disabled call "
                "reset(options={'reset_mask': ...}) first"
            )
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            self._reset_groups(to_reset, {})
            for g in to_reset:
                infos = self._add_group_info(infos, g, self._reset_info(g))
        stepping = [g for g in range(self.num_groups) if g not in to_reset]
        results = self._grade_groups(stepping, actions)
        if any(result.infra_error for result in results.values()):
            # The node may have lost sessions (a crash, a restart): members forked
            # ahead on it are suspect, so the next reset forks fresh ones.
            self.forker.invalidate()

        for g in stepping:
            task_id = self._group_tasks[g].task_id
            members = list(self._members(g))
            group_rewards = np.array([float(results[i].reward) for i in members])
            valid = np.array([not results[i].infra_error for i in members])
            advantages = group_advantages(group_rewards, valid)
            for k, i in enumerate(members):
                rewards[i] = group_rewards[k]
                terminated[i] = True
                step_info = grade_info(task_id, results[i])
                step_info[keys.GROUP] = g
                step_info[keys.ADVANTAGE] = float(advantages[k])
                if self.autoreset_mode == AutoresetMode.SAME_STEP:
                    infos = self._add_info(
                        infos, {"final_obs": self._obs[i], "final_info": step_info}, i
                    )
                else:
                    infos = self._add_info(infos, step_info, i)
            self._ended[g] = True
            if self.autoreset_mode != AutoresetMode.SAME_STEP:
                for i in members:
                    self._obs[i] = ""
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            self._reset_groups(stepping, {})
            for g in stepping:
                infos = self._add_group_info(infos, g, self._reset_info(g))
        return tuple(self._obs), rewards, terminated, truncated, infos

    def _grade_groups(self, groups: list[int], actions: tuple[Any, ...]) -> dict[int, Any]:
        jobs = []
        for g in groups:
            sessions = self._groups[g]
            if sessions is None:
                raise RuntimeError("call reset() before step()")
            task = self._group_tasks[g]
            spec = task.to_reward_spec()
            group_key = self._group_keys[g]
            for i, session_id in zip(self._members(g), sessions.members, strict=True):
                seed = episode_seed(self.seed_mode, self.np_random, group_key, self.base_seed)
                jobs.append((i, session_id, spec, seed, str(actions[i])))
        client = self.backend.client
        try:
            batched = self._grade_batched(client, jobs)
        except BaseException:
            self._drop_groups(groups)
            raise
        if batched is not None:
            return batched

        def run(job: tuple[int, str, Any, str, str]) -> tuple[int, Any]:
            i, session_id, spec, seed, completion = job
            return i, grade_or_flag(
                client,
                self.template,
                completion,
                spec,
                seed=seed,
                timeout_seconds=self.timeout_seconds,
                policy=self.on_infra_error,
                session_id=session_id,
            )

        try:
            return dict(self._workers().map(run, jobs))
        except BaseException:
            self._drop_groups(groups)
            raise

    def _grade_batched(
        self, client: Any, jobs: list[tuple[int, str, Any, str, str]]
    ) -> dict[int, Any] | None:
        """Every member's grade in one request to our node (None: no batch route there)."""
        outcomes = grade_items(
            client,
            self.template,
            [
                (completion, spec, seed, session_id)
                for _, session_id, spec, seed, completion in jobs
            ],
            timeout_seconds=self.timeout_seconds,
        )
        if outcomes is None:
            return None
        out: dict[int, Any] = {}
        for (i, _, _, seed, _), outcome in zip(jobs, outcomes, strict=True):
            if isinstance(outcome, GradeResult):
                out[i] = outcome
            elif self.on_infra_error == "raise":
                raise outcome
            else:
                out[i] = GradeResult(reward=0.0, infra_error=True, error=str(outcome), seed=seed)
        return out

    def _drop_groups(self, groups: list[int]) -> None:
        """The groups' sandboxes are in an unknown state: reap them now."""
        for g in groups:
            sessions, self._groups[g] = self._groups[g], None
            if sessions is not None:
                self.ledger.delete(*sessions.members)
            self._ended[g] = True
