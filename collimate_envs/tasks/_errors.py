"""Errors raised while finding and reading task sets.

Both derive from :class:`~collimate_rl.errors.CollimateError` (the project's single root) and
from the builtin a caller would naturally catch::

    CollimateError
    ├── TaskFormatError (also ValueError)       a task file is malformed or of an unknown format
    ├── UnknownTaskSetError (also KeyError)     no task set is registered under that name
    └── TaskNotFoundError (also KeyError)       a task set has no task with that id

>>> err = TaskFormatError("rows must be objects", path="t.jsonl", line=3)
>>> str(err)
't.jsonl:3: rows must be objects'
>>> isinstance(err, ValueError)
True
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from collimate_rl.errors import CollimateError

__all__ = ["TaskFormatError", "TaskNotFoundError", "UnknownTaskSetError"]


class TaskFormatError(CollimateError, ValueError):
    """A task file (or one of its rows) does not have the expected shape.

    Attributes:
        path: the file, when known.
        line: the 1-based line number of the offending row, when known.
        reason: the message without the location prefix.

    >>> TaskFormatError("missing key 'prompt'", path="x.jsonl", line=7).line
    7
    """

    def __init__(self, reason: str, *, path: str | None = None, line: int | None = None) -> None:
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        elif line is not None:
            where = f"line {line}: "
        super().__init__(where + reason)
        self.path = path
        self.line = line
        self.reason = reason


class UnknownTaskSetError(CollimateError, KeyError):
    """No task set is registered under the requested name.

    The message lists the known names and suggests the closest one.

    Attributes:
        name: the name that was asked for.
        known: the registered names.

    >>> print(UnknownTaskSetError("humaneva", ["collimate-basic", "humaneval"]))
    unknown task set 'humaneva'; did you mean 'humaneval'? Known task sets: 'collimate-basic', 'humaneval'. A path to a .jsonl or .jsonl.gz file also works.
    """

    def __init__(self, name: str, known: Iterable[str]) -> None:
        self.name = name
        self.known = tuple(sorted(known))
        close = difflib.get_close_matches(name, self.known, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else "."
        listing = ", ".join(repr(k) for k in self.known)
        self.message = (
            f"unknown task set {name!r}{hint} Known task sets: {listing}. "
            "A path to a .jsonl or .jsonl.gz file also works."
        )
        super().__init__(self.message)

    def __str__(self) -> str:
        # KeyError.__str__ would repr() the message (adding quotes).
        return self.message


class TaskNotFoundError(CollimateError, KeyError):
    """A task set has no task with the requested id (the message suggests close ids).

    >>> print(TaskNotFoundError("count-vowel", "demo", ["count-vowels", "edit-distance"]))
    no task 'count-vowel' in task set 'demo'; did you mean 'count-vowels'?
    """

    def __init__(self, task_id: str, set_name: str, known: Iterable[str]) -> None:
        self.task_id = task_id
        close = difflib.get_close_matches(task_id, list(known), n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        self.message = f"no task {task_id!r} in task set {set_name!r}{hint}"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message
