"""An immutable, ordered collection of tasks with lookup by id and filtering.

>>> from collimate_envs.tasks._model import IOTests, Task
>>> io = IOTests(cases=(("", "hi\\n"),))
>>> ts = TaskSet(
...     [Task("a", "p", io, difficulty="easy"), Task("b", "p", io, difficulty="hard")], name="demo"
... )
>>> len(ts), ts["b"].difficulty, ts.filter(difficulty="easy").ids
(2, 'hard', ('a',))
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

from collimate_envs.tasks._errors import TaskNotFoundError
from collimate_envs.tasks._model import DIFFICULTIES, Task

__all__ = ["TaskSet"]


class TaskSet(Sequence[Task]):
    """A sequence of :class:`Task` with unique ids.

    Index it with an ``int`` (position), a ``slice`` (a new :class:`TaskSet`) or a ``str``
    (task id).

    Args:
        tasks: the tasks, in order.
        name: a label (the set name or file path).

    Raises:
        ValueError: two tasks share an id.

    >>> from collimate_envs.tasks._model import IOTests, Task
    >>> ts = TaskSet([Task("x", "p", IOTests(cases=(("", ""),)))], name="one")
    >>> ts.name, ts[0].task_id, "x" in ts
    ('one', 'x', True)
    """

    def __init__(self, tasks: Iterable[Task], *, name: str = "") -> None:
        self._tasks = tuple(tasks)
        self._name = name
        self._by_id: dict[str, Task] = {}
        for task in self._tasks:
            if task.task_id in self._by_id:
                raise ValueError(f"duplicate task_id {task.task_id!r} in task set {name!r}")
            self._by_id[task.task_id] = task

    @property
    def name(self) -> str:
        """The set's label."""
        return self._name

    @property
    def ids(self) -> tuple[str, ...]:
        """The task ids, in order."""
        return tuple(t.task_id for t in self._tasks)

    def __len__(self) -> int:
        return len(self._tasks)

    @overload
    def __getitem__(self, key: int) -> Task: ...

    @overload
    def __getitem__(self, key: str) -> Task: ...

    @overload
    def __getitem__(self, key: slice) -> TaskSet: ...

    def __getitem__(self, key: int | str | slice) -> Task | TaskSet:
        if isinstance(key, str):
            return self.get(key)
        if isinstance(key, slice):
            return TaskSet(self._tasks[key], name=self._name)
        return self._tasks[key]

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return item in self._by_id
        return item in self._tasks

    def __repr__(self) -> str:
        return f"TaskSet(name={self._name!r}, tasks={len(self._tasks)})"

    def get(self, task_id: str) -> Task:
        """The task with this id.

        Raises:
            TaskNotFoundError: no such id (a ``KeyError``; the message suggests close ids).

        >>> from collimate_envs.tasks._model import IOTests, Task
        >>> TaskSet([Task("sum-two", "p", IOTests(cases=(("", ""),)))]).get("sum-two").task_id
        'sum-two'
        """
        try:
            return self._by_id[task_id]
        except KeyError:
            raise TaskNotFoundError(task_id, self._name, self._by_id) from None

    def filter(
        self,
        *,
        difficulty: str | Iterable[str] | None = None,
        tags: Iterable[str] | None = None,
        kind: str | Iterable[str] | None = None,
        predicate: Callable[[Task], bool] | None = None,
    ) -> TaskSet:
        """The tasks matching every given criterion, in order.

        Args:
            difficulty: one label or several.
            tags: keep tasks carrying all of these tags.
            kind: one grading kind (``unit``, ``property``, ``io``, ...) or several.
            predicate: any other condition.

        Raises:
            ValueError: an unknown difficulty label.

        >>> from collimate_envs.tasks._model import IOTests, Task
        >>> io = IOTests(cases=(("", ""),))
        >>> ts = TaskSet([Task("a", "p", io, tags=("math",)), Task("b", "p", io)])
        >>> ts.filter(tags=["math"]).ids
        ('a',)
        """
        wanted_difficulty = _as_set(difficulty)
        if wanted_difficulty is not None:
            unknown = wanted_difficulty - set(DIFFICULTIES)
            if unknown:
                raise ValueError(f"unknown difficulty {sorted(unknown)}; use {DIFFICULTIES}")
        wanted_kind = _as_set(kind)
        wanted_tags = set(tags) if tags is not None else None

        def keep(task: Task) -> bool:
            if wanted_difficulty is not None and task.difficulty not in wanted_difficulty:
                return False
            if wanted_kind is not None and task.kind not in wanted_kind:
                return False
            if wanted_tags is not None and not wanted_tags <= set(task.tags):
                return False
            return predicate is None or predicate(task)

        return TaskSet((t for t in self._tasks if keep(t)), name=self._name)

    def by_difficulty(self) -> dict[str, TaskSet]:
        """The set split by difficulty (tasks without one go under ``"unknown"``).

        Only non-empty groups are returned, easiest first.

        >>> from collimate_envs.tasks._model import IOTests, Task
        >>> io = IOTests(cases=(("", ""),))
        >>> groups = TaskSet([Task("a", "p", io, difficulty="hard"), Task("b", "p", io)]).by_difficulty()
        >>> {k: v.ids for k, v in groups.items()}
        {'hard': ('a',), 'unknown': ('b',)}
        """
        groups: dict[str, list[Task]] = {}
        for label in (*DIFFICULTIES, "unknown"):
            members = [t for t in self._tasks if (t.difficulty or "unknown") == label]
            if members:
                groups[label] = members
        return {k: TaskSet(v, name=f"{self._name}[{k}]") for k, v in groups.items()}

    def split(self, fraction: float, *, seed: int = 0) -> tuple[TaskSet, TaskSet]:
        """A deterministic random split into two disjoint sets (for example train/eval).

        Args:
            fraction: the share of tasks in the first set, in ``[0, 1]``.
            seed: the shuffle seed; the same seed gives the same split.

        Returns:
            ``(first, second)``, each keeping the original task order.

        >>> from collimate_envs.tasks._model import IOTests, Task
        >>> io = IOTests(cases=(("", ""),))
        >>> a, b = TaskSet([Task(str(i), "p", io) for i in range(10)]).split(0.8, seed=1)
        >>> len(a), len(b), set(a.ids) & set(b.ids)
        (8, 2, set())
        """
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"fraction must be in [0, 1], got {fraction!r}")
        order = list(range(len(self._tasks)))
        random.Random(seed).shuffle(order)
        cut = round(fraction * len(order))
        first = set(order[:cut])
        return (
            TaskSet((t for i, t in enumerate(self._tasks) if i in first), name=self._name),
            TaskSet((t for i, t in enumerate(self._tasks) if i not in first), name=self._name),
        )


def _as_set(value: str | Iterable[str] | None) -> set[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return {value}
    return set(value)
