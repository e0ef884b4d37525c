"""The resumable results log: one JSON line per graded completion, flushed as it lands.

The first line is a header naming what the grades depend on (task set, template,
timeout, how completions become programs). A re-run with the same log reads the
rows already there and grades only the rest; a header that differs is refused
(those grades would not be comparable). A kill can leave a torn last line: it is
dropped before appending.

>>> import os, tempfile
>>> folder = tempfile.TemporaryDirectory()
>>> path = os.path.join(folder.name, "results.jsonl")
>>> with ResultsLog.open(path, {"task_set": "demo"}) as log:
...     log.append({"index": 0, "digest": "ab", "correct": True})
>>> with ResultsLog.open(path, {"task_set": "demo"}) as log:
...     sorted(log.done)
[0]
>>> folder.cleanup()
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from collimate_rl.errors import CollimateUsageError

__all__ = ["LOG_VERSION", "ResultsLog"]

#: The value of the header's ``collimate_eval`` key.
LOG_VERSION = 1


def _repair_torn_tail(path: Path) -> None:
    """Drop a last line that a kill cut short (no newline and not valid JSON)."""
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    cut = data.rfind(b"\n") + 1
    try:
        json.loads(data[cut:])
    except ValueError:
        with path.open("r+b") as fh:
            fh.truncate(cut)
    else:
        with path.open("ab") as fh:
            fh.write(b"\n")


def _lock(handle: IO[str], path: Path) -> None:
    """Hold an exclusive lock while the log is open: two runs on one log would grade twice."""
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise CollimateUsageError(
            f"{path} is being written by another eval run; wait for it or use another --output"
        ) from None


def _check_row(row: Any, where: str) -> dict[str, Any]:
    if (
        not isinstance(row, dict)
        or isinstance(row.get("index"), bool)
        or not isinstance(row.get("index"), int)
        or not isinstance(row.get("digest"), str)
        or not isinstance(row.get("correct"), bool)
    ):
        raise CollimateUsageError(
            f"{where}: not an eval result row; the output file is damaged or is not an "
            "eval output (use a new --output path)"
        )
    return row


class ResultsLog:
    """An append-only eval log; :meth:`open` it, read :attr:`done`, :meth:`append` rows.

    Attributes:
        path: the log file.
        done: the rows already in the file, by completion index.
    """

    def __init__(self, path: Path, handle: IO[str], done: dict[int, dict[str, Any]]) -> None:
        self.path = path
        self.done = done
        self._handle: IO[str] | None = handle

    @classmethod
    def open(cls, path: str | os.PathLike[str], header: Mapping[str, Any]) -> ResultsLog:
        """Open (or create) the log at ``path`` for grades made under ``header``.

        Raises:
            CollimateUsageError: the file is not an eval log, is damaged, was written
                under a different header, or another run holds it open.
        """
        path = Path(path)
        want = {"collimate_eval": LOG_VERSION, **header}
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a", encoding="utf-8")
        try:
            _lock(handle, path)
            done: dict[int, dict[str, Any]] = {}
            if path.stat().st_size > 0:
                _repair_torn_tail(path)
                done = cls._read(path, want)
            log = cls(path, handle, done)
            if path.stat().st_size == 0:
                log._write(want)
        except BaseException:
            handle.close()
            raise
        return log

    @staticmethod
    def _read(path: Path, want: dict[str, Any]) -> dict[int, dict[str, Any]]:
        done: dict[int, dict[str, Any]] = {}
        with path.open(encoding="utf-8") as fh:
            for number, text in enumerate(fh, start=1):
                if not text.strip():
                    continue
                where = f"{path}:{number}"
                try:
                    row = json.loads(text)
                except ValueError:
                    raise CollimateUsageError(
                        f"{where}: invalid JSON; the output file is damaged or is not an "
                        "eval output (use a new --output path)"
                    ) from None
                if number == 1:
                    if not isinstance(row, dict) or row.get("collimate_eval") != LOG_VERSION:
                        raise CollimateUsageError(
                            f"{path} is not a collimate eval output; refusing to append to it"
                        )
                    if row != want:
                        diff = sorted(k for k in {*row, *want} if row.get(k) != want.get(k))
                        raise CollimateUsageError(
                            f"{path} was written with different settings ({', '.join(diff)}): "
                            "resume with the same settings, or use a new --output path"
                        )
                    continue
                row = _check_row(row, where)
                done[row["index"]] = row
        return done

    def _write(self, row: Mapping[str, Any]) -> None:
        if self._handle is None:
            raise CollimateUsageError(f"the results log {self.path} is closed")
        self._handle.write(json.dumps(row, sort_keys=True) + "\n")
        self._handle.flush()

    def append(self, row: Mapping[str, Any]) -> None:
        """Write one result row and flush it (it survives a kill right after)."""
        self._write(row)
        self.done[int(row["index"])] = dict(row)

    def close(self) -> None:
        """Close the file (idempotent)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()

    def __enter__(self) -> ResultsLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
