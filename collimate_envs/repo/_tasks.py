"""Where Repo-v0's tasks come from: the bundled ``collimate-repos``, a JSONL file, or rows.

>>> row = {"instance_id": "t1", "problem_statement": "fix", "FAIL_TO_PASS": ["a.py::t"],
...        "repo_files": {"a.py": ""}}
>>> chooser = load_repo_tasks([row])
>>> chooser.name, [t.task_id for t in chooser.tasks]
('custom', ['t1'])
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from collimate_envs._tasks import TaskChooser
from collimate_envs.repo._task import ImageFor, RepoTask, RowError

__all__ = ["BUNDLED", "load_repo_tasks"]

#: The bundled set and the module that loads its rows (``load_collimate_repos()``).
BUNDLED = {"collimate-repos": "collimate_envs.tasks.repos"}


def _bundled_rows(name: str) -> list[Any]:
    try:
        module = importlib.import_module(BUNDLED[name])
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"the task set {name!r} is not installed in this build; pass rows or a JSONL file"
        ) from exc
    for attr in ("load_collimate_repos", "load_rows"):
        loader = getattr(module, attr, None)
        if callable(loader):
            return list(loader())
    raise RowError(f"{BUNDLED[name]} offers no loader of rows (load_rows())")


def _file_rows(path: Path) -> list[Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
        return list(data) if isinstance(data, list) else [data]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_repo_tasks(
    task_set: Any,
    *,
    image: str | None = None,
    image_for: ImageFor | None = None,
    template: str | None = None,
    workdir: str | None = None,
    test_cmd: str | None = None,
) -> TaskChooser:
    """The tasks of ``task_set``: a bundled name, a ``.jsonl``/``.json`` path, rows or tasks.

    Raises:
        RowError: a row that cannot be read (the message names it), or no tasks at all.
        FileNotFoundError: a path that does not exist.
    """
    name = "custom"
    rows: Iterable[Any]
    if isinstance(task_set, str) and task_set in BUNDLED:
        name, rows = task_set, _bundled_rows(task_set)
    elif isinstance(task_set, (str, Path)):
        path = Path(task_set)
        if not path.exists():
            raise FileNotFoundError(f"task file {str(path)!r} does not exist")
        name, rows = path.name.split(".")[0], _file_rows(path)
    elif isinstance(task_set, (Mapping, RepoTask)):
        rows = [task_set]
    else:
        name = str(getattr(task_set, "name", "custom"))
        rows = task_set
    tasks = [
        row
        if isinstance(row, RepoTask)
        else RepoTask.from_row(
            row,
            image=image,
            image_for=image_for,
            template=template,
            workdir=workdir,
            test_cmd=test_cmd,
        )
        for row in rows
    ]
    if not tasks:
        raise RowError(f"the task set {name!r} has no tasks")
    return TaskChooser(name=name, tasks=tasks)
