"""What every row loader shares: checked field access, ids, and the prompt's instructions.

Every loader raises :class:`~collimate_envs.tasks.TaskFormatError` (without a location;
the file reader adds the path and line) when a row does not have the expected shape.

>>> _get({"k": 3}, "k", int), _get({}, "k", int, default=0)
(3, 0)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar, cast

from collimate_envs.tasks._errors import TaskFormatError
from collimate_envs.tasks._model import Task

__all__ = ["Row", "RowLoader"]

Row = Mapping[str, Any]
RowLoader = Callable[..., Task]
T = TypeVar("T")

_MISSING: Final = object()


def _get(row: Row, key: str, typ: type[T] | tuple[type, ...], *, default: Any = _MISSING) -> T:
    """``row[key]``, checked to be of ``typ`` (``None`` counts as absent when a default exists)."""
    value = row.get(key, _MISSING)
    if value is _MISSING or (value is None and default is not _MISSING):
        if default is _MISSING:
            raise TaskFormatError(f"missing key {key!r}")
        return cast(T, default)
    if not isinstance(value, typ) or (isinstance(value, bool) and typ is not bool):
        names = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise TaskFormatError(f"key {key!r} must be {names}, got {type(value).__name__}")
    return cast(T, value)


def _json_field(row: Row, key: str, *, default: Any = _MISSING) -> Any:
    """A field that datasets store either as JSON text or already decoded."""
    value = row.get(key, _MISSING)
    if value is _MISSING or value is None or value == "":
        if default is _MISSING:
            raise TaskFormatError(f"missing key {key!r}")
        return default
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise TaskFormatError(f"key {key!r} holds invalid JSON text: {exc}") from exc


def _task_id(row: Row, key: str) -> str:
    value: str | int = _get(row, key, (str, int))
    return str(value)


def _with_instructions(statement: str, starter: str, stdin: bool) -> str:
    parts = [statement.rstrip()]
    if starter.strip():
        parts.append(f"Complete this starter code:\n```python\n{starter.rstrip()}\n```")
    if stdin:
        parts.append("Read the input from standard input and write the answer to standard output.")
    return "\n\n".join(parts) + "\n"
