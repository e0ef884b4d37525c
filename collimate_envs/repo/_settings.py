"""What ``collimate/Repo-v0`` and its group vector env are configured with, in one object.

Both envs take the same keyword arguments for their tasks, budgets and grading (the
signatures ``gymnasium.make`` and ``make_vec`` pass them through); each gathers them into
a :class:`RepoSettings`, so the tasks are loaded, the budgets built and the setup's
timeout chosen in one place, and the two envs cannot drift apart.

>>> row = {"instance_id": "t1", "problem_statement": "fix", "FAIL_TO_PASS": ["a.py::t"],
...        "repo_files": {"a.py": ""}}
>>> settings = RepoSettings([row], max_turns=5, test_timeout=30)
>>> [task.task_id for task in settings.load_tasks().tasks]
['t1']
>>> settings.budgets.max_turns, settings.setup_timeout
(5, 60)
>>> RepoSettings().budgets == Budgets()  # the envs' defaults are the episodes' defaults
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from collimate_envs._tasks import TaskChooser
from collimate_envs.repo._episode import Budgets
from collimate_envs.repo._task import ImageFor
from collimate_envs.repo._tasks import load_repo_tasks

__all__ = ["RepoSettings"]


@dataclass(frozen=True)
class RepoSettings:
    """The arguments of ``collimate/Repo-v0`` beyond its backend, infra policy and rendering.

    Attributes:
        task_set, image, image_for, template, workdir: where the tasks come from and what
            they run in (:func:`~collimate_envs.repo.load_repo_tasks`).
        test_cmd: the test command, over every row's own.
        partial: the reward is the fraction of the tests that pass, not all or nothing.
        max_turns, max_wall_seconds, max_output_bytes, max_observation_chars,
            command_timeout: an episode's :class:`~collimate_envs.repo._episode.Budgets`.
        test_timeout: the longest one grade's tests may run.
        vendor_runner: whether the host's pytest is copied into the template's base
            session (``None``: only when its Python lacks pytest).
    """

    task_set: Any = "collimate-repos"
    image: str | None = None
    image_for: ImageFor | None = None
    template: str | None = None
    workdir: str | None = None
    test_cmd: str | None = None
    partial: bool = False
    max_turns: int = 50
    max_wall_seconds: float | None = 1800.0
    max_output_bytes: int = 1 << 20
    max_observation_chars: int = 10000
    command_timeout: int = 60
    test_timeout: int = 300
    vendor_runner: bool | None = None

    def load_tasks(self) -> TaskChooser:
        """The tasks of ``task_set``, read with ``image``, ``image_for``, ``template``, ``workdir``.

        Raises:
            RowError: a row that cannot be read, or no tasks at all.
            FileNotFoundError: a task file that does not exist.
        """
        return load_repo_tasks(
            self.task_set,
            image=self.image,
            image_for=self.image_for,
            template=self.template,
            workdir=self.workdir,
        )

    @property
    def budgets(self) -> Budgets:
        """What an episode may spend (a budget out of range is a ``ValueError``)."""
        return Budgets(
            max_turns=self.max_turns,
            max_wall_seconds=self.max_wall_seconds,
            max_output_bytes=self.max_output_bytes,
            max_observation_chars=self.max_observation_chars,
            command_timeout=self.command_timeout,
        )

    @property
    def setup_timeout(self) -> int:
        """How long a step of setting a task up may take, in seconds.

        Writing the repository, the row's setup or copying the test runner can be as
        slow as the task's tests, and gets a minute at least.
        """
        return max(self.test_timeout, 60)
