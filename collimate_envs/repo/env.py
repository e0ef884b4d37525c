"""``collimate/Repo-v0``: an agent fixes a repository with tools; hidden tests grade its changes."""

from __future__ import annotations

import threading
from typing import Any, SupportsFloat

import gymnasium as gym

from collimate_envs import info as keys
from collimate_envs._backend import Backend
from collimate_envs._checks import check_infra_mode, check_render_mode
from collimate_envs._groups import SessionLedger
from collimate_envs.repo._actions import TOOLS
from collimate_envs.repo._base import TemplateBase
from collimate_envs.repo._episode import Episode, first_observation, grade_info
from collimate_envs.repo._grader import RepoGrade
from collimate_envs.repo._prepared import PreparedTask, prepare_task
from collimate_envs.repo._settings import RepoSettings
from collimate_envs.repo._task import ImageFor, RepoTask
from collimate_envs.repo._templates import template_for
from collimate_envs.spaces import completion_space, prompt_space
from collimate_rl.errors import (
    CollimateError,
    CollimateNotFoundError,
    CollimateSessionGoneError,
    CollimateUsageError,
)
from collimate_rl.sandbox import Sandbox

__all__ = ["RepoEnv", "TaskSandboxes"]


class TaskSandboxes:
    """Base sessions per template and prepared tasks, for one env (closed with it)."""

    def __init__(self, backend: Backend, timeout: int, vendor_runner: bool | None = None) -> None:
        self.backend = backend
        self.timeout = timeout
        self.vendor_runner = vendor_runner
        self.bases: dict[str, TemplateBase] = {}
        self.handles: dict[str, Any] = {}
        self._lock = threading.Lock()  # the vector env prepares its groups from threads

    @classmethod
    def for_settings(cls, backend: Backend, settings: RepoSettings) -> TaskSandboxes:
        """The sandboxes of an env configured with ``settings``."""
        return cls(backend, timeout=settings.setup_timeout, vendor_runner=settings.vendor_runner)

    def prepare(self, task: RepoTask) -> PreparedTask:
        client = self.backend.client
        key = task.image or f"template:{task.template}"
        with self._lock:
            if key not in self.handles:
                self.handles[key] = template_for(task, client)
            template = self.handles[key][0]
            base = self.bases.get(template)
            if base is None:
                base = self.bases[template] = TemplateBase(
                    client, template, timeout=self.timeout, vendor_runner=self.vendor_runner
                )
        return prepare_task(base, task, timeout=self.timeout)

    def close(self) -> None:
        for base in self.bases.values():
            base.close()
        self.bases.clear()
        handles, self.handles = list(self.handles.values()), {}
        for _, handle in handles:
            release = getattr(handle, "release", None)
            if callable(release):
                release()


def grade_with_retry(
    episode: Episode, sandboxes: TaskSandboxes, settings: RepoSettings
) -> RepoGrade:
    """Grade as ``settings`` say.

    A pristine parent the node reaped meanwhile (idle TTL) is made again, once.
    """

    def grade() -> RepoGrade:
        return episode.grade(
            partial=settings.partial,
            test_cmd=settings.test_cmd,
            test_timeout=settings.test_timeout,
        )

    try:
        return grade()
    except (CollimateNotFoundError, CollimateSessionGoneError):
        old = episode.prepared
        episode.prepared = sandboxes.prepare(old.task)
        old.close()
        return grade()


class RepoEnv(gym.Env[str, Any]):
    """SWE-style repository tasks: many tool calls, one grade by hidden tests.

    ## Description
    Each episode is one task: a repository with a bug and an issue text. The agent
    explores and edits the repository with tools, in its own sandbox (a copy-on-write
    fork of the task's pristine sandbox), and submits. Its changes are then graded by
    the task's hidden tests in a fresh fork of the pristine state.

    ## Action Space
    A tool call, ``{"name": ..., "arguments": {...}}`` as a dict or a JSON string (OpenAI's
    function-call format; ``env.unwrapped.tools`` has the schemas), or a model's raw text
    with exactly one fenced ``bash`` block (mini-swe-agent's protocol). Tools: ``bash``
    (``command``, optional ``timeout``), ``str_replace_editor`` (``view``, ``create``,
    ``str_replace``, ``insert``, ``undo_edit``) and ``submit``. A malformed action is not
    an error: the observation says what was wrong.

    ## Observation Space
    ``Text``: first the task statement, then each tool's output, cut past
    ``max_observation_chars`` around a ``[... N characters truncated ...]`` marker.

    ## Rewards
    0 until the episode ends; then 1.0 if every FAIL_TO_PASS and PASS_TO_PASS test
    passes, else 0.0 (``partial=True``: the fraction). A change to what decides how tests
    run (test files, ``conftest.py``, pytest settings, start-up hooks) scores 0 with
    ``info["rejected"]``. Infrastructure failures raise (``on_infra_error="raise"``) or
    give 0.0 with ``info["infra_error"] = True`` (``"flag"``): never a grade.

    ## Episode End
    Terminates on ``submit``. Truncates when a budget is spent: ``max_turns``,
    ``max_wall_seconds``, ``max_output_bytes`` (the repository is graded as it stands).

    ## Info
    Every step: ``task_id``, ``turn``, ``tool_call`` (the parsed call, or ``None``),
    ``action_error``, ``exit_code``. The last step adds ``passed``, ``total``, ``tests``
    (id -> outcome), ``diff``, ``rejected``, ``forgeable`` (always ``True``: see
    docs/repo-tasks.md), ``log_tail``, ``end`` (``submitted`` or the budget) and ``infra_error``.

    ## Arguments
    ``task_set`` (``"collimate-repos"``, a JSONL path, or rows in the SWE-bench,
    R2E-Gym or SWE-smith format), ``image`` / ``image_for`` (the image of every row / a
    function of the row), ``template`` (for snapshot rows; default ``python3``),
    ``workdir``, ``test_cmd`` (over every row's), ``partial``, the budgets (``max_turns``,
    ``max_wall_seconds``, ``max_output_bytes``, ``max_observation_chars``,
    ``command_timeout``), ``test_timeout``, ``vendor_runner`` (``None``: copy the host's
    pytest into the sandbox only when the template's Python lacks it; ``True``: always;
    ``False``: never), ``on_infra_error``, ``client`` or
    ``base_url`` / ``api_key`` / ``unix_socket``, ``render_mode`` (``"ansi"``).

    ## Version History
    * v0: initial version.

    Example:
        >>> import gymnasium as gym
        >>> env = gym.make("collimate/Repo-v0", task_set=rows)  # doctest: +SKIP
        >>> statement, info = env.reset(seed=0)  # doctest: +SKIP
        >>> obs, *_ = env.step({"name": "bash", "arguments": {"command": "ls"}})  # doctest: +SKIP
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        task_set: Any = "collimate-repos",
        *,
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
        self.settings = RepoSettings(
            task_set,
            image=image,
            image_for=image_for,
            template=template,
            workdir=workdir,
            test_cmd=test_cmd,
            partial=partial,
            max_turns=max_turns,
            max_wall_seconds=max_wall_seconds,
            max_output_bytes=max_output_bytes,
            max_observation_chars=max_observation_chars,
            command_timeout=command_timeout,
            test_timeout=test_timeout,
            vendor_runner=vendor_runner,
        )
        self.tasks = self.settings.load_tasks()
        self.budgets = self.settings.budgets
        self.on_infra_error = on_infra_error
        self.backend = Backend.from_kwargs(
            client, {"base_url": base_url, "api_key": api_key, "unix_socket": unix_socket}
        )
        self.observation_space = prompt_space()
        self.action_space = completion_space()
        self.tools: list[dict[str, Any]] = [dict(tool) for tool in TOOLS]
        self._sandboxes: TaskSandboxes | None = None
        self._ledger: SessionLedger | None = None
        self._prepared: PreparedTask | None = None
        self._episode: Episode | None = None
        self._transcript: list[str] = []

    @property
    def sandboxes(self) -> TaskSandboxes:
        if self._sandboxes is None:
            self._sandboxes = TaskSandboxes.for_settings(self.backend, self.settings)
        return self._sandboxes

    @property
    def episode_sandbox(self) -> Sandbox | None:
        """The agent's sandbox of the running episode (``None`` between episodes)."""
        return self._episode.member if self._episode is not None else None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task: RepoTask = self.tasks.choose(self.np_random, options)
        self._end_episode()
        if self._prepared is None or self._prepared.task is not task:
            self._drop_prepared()
            self._prepared = self.sandboxes.prepare(task)
        (member,) = self._prepared.fork(1)
        self._episode = Episode(self._prepared, member, self.budgets)
        statement = first_observation(self._prepared)
        self._transcript = [statement]
        return statement, {keys.TASK_ID: task.task_id, keys.TURN: 0}

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        episode = self._episode
        if episode is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        task_id = episode.prepared.task.task_id
        try:
            observation, info, end = episode.act(action)
        except CollimateError as exc:
            if isinstance(exc, CollimateUsageError) or self.on_infra_error == "raise":
                self._end_episode()
                raise
            return self._infra(task_id, episode.turn, exc)
        info.update({keys.TASK_ID: task_id, keys.TURN: episode.turn})
        self._transcript.append(observation or "[submitted]")
        if end is None:
            return observation, 0.0, False, False, info
        try:
            grade = grade_with_retry(episode, self.sandboxes, self.settings)
        except CollimateError as exc:
            if isinstance(exc, CollimateUsageError) or self.on_infra_error == "raise":
                self._end_episode()
                raise
            return self._infra(task_id, episode.turn, exc)
        finally:
            self._prepared = episode.prepared
        info.update(grade_info(grade, end))
        info[keys.INFRA_ERROR] = False
        self._transcript.append(f"[episode over ({end}): reward {grade.reward:.3f}]")
        self._end_episode()
        return observation, float(grade.reward), end == "submitted", end != "submitted", info

    def _infra(
        self, task_id: str, turn: int, exc: Exception
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._end_episode()
        self._drop_prepared()
        info = {keys.TASK_ID: task_id, keys.TURN: turn, keys.INFRA_ERROR: True, "error": str(exc)}
        return "", 0.0, False, True, info

    def _end_episode(self) -> None:
        episode, self._episode = self._episode, None
        if episode is not None:
            episode.close()

    def _drop_prepared(self) -> None:
        prepared, self._prepared = self._prepared, None
        if prepared is not None:
            prepared.close()

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n\n".join(self._transcript)

    def close(self) -> None:
        self._end_episode()
        self._drop_prepared()
        if self._sandboxes is not None:
            self._sandboxes.close()
            self._sandboxes = None
        super().close()
