"""Choosing an episode's task from a task set, reproducibly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["TaskChooser"]


@dataclass(frozen=True)
class TaskChooser:
    """A non-empty list of tasks and the name of the set they came from."""

    name: str
    tasks: Sequence[Any]

    @classmethod
    def load(cls, task_set: Any, *, difficulty: str | None = None) -> TaskChooser:
        """Load ``task_set`` (a name, a path or a loaded set), optionally by difficulty."""
        from collimate_envs.tasks import load_task_set

        loaded = load_task_set(task_set) if isinstance(task_set, str) else task_set
        tasks = [t for t in loaded if difficulty is None or t.difficulty == difficulty]
        if not tasks:
            raise ValueError(
                f"task set {getattr(loaded, 'name', task_set)!r} has no tasks"
                + (f" of difficulty {difficulty!r}" if difficulty else "")
            )
        return cls(name=str(getattr(loaded, "name", "custom")), tasks=tasks)

    def choose(self, rng: np.random.Generator, options: dict[str, Any] | None) -> Any:
        """The task named by ``options["task_id"]``, else one drawn with ``rng``."""
        wanted = (options or {}).get("task_id")
        if wanted is None:
            return self.tasks[int(rng.integers(len(self.tasks)))]
        for task in self.tasks:
            if task.task_id == wanted:
                return task
        raise KeyError(f"no task {wanted!r} in task set {self.name!r}")

    def key(self, task: Any) -> str:
        """A stable key for common-random-number seeds: ``<set>:<task id>``."""
        return f"{self.name}:{task.task_id}"
