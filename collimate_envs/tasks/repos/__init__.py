"""``collimate-repos``: small original Python repositories, each with a planted bug, as SWE rows.

Each task is one ``.task`` file in ``data/`` (the format: :mod:`._bundle`; how to add one:
``README.md`` beside this file). :func:`load_collimate_repos` returns them as rows in the
SWE-bench format, plus what a row without an image needs: ``template`` and ``repo_files``.

>>> rows = load_collimate_repos()
>>> len(rows) >= 20
True
>>> row = next(r for r in rows if r["instance_id"] == "collimate-repos__interval-set-1")
>>> row["repo"], row["template"], len(row["base_commit"])
('collimate-repos/interval-set', 'python3', 40)
>>> row["FAIL_TO_PASS"][0]
'tests/test_intervals.py::test_merge_touching_intervals'
>>> "intervals/core.py" in row["repo_files"]
True
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any, Final

from collimate_envs.tasks.repos._bundle import RepoTask, file_text, parse_task, render_task

__all__ = [
    "REPO_SET_NAME",
    "RepoTask",
    "base_commit",
    "file_text",
    "load_collimate_repos",
    "parse_task",
    "read_repo_tasks",
    "render_task",
    "task_row",
]

REPO_SET_NAME: Final = "collimate-repos"
_SUFFIX: Final = ".task"


def load_collimate_repos() -> list[dict[str, Any]]:
    """Every bundled task as a SWE-bench-format row, sorted by ``instance_id``.

    Each row has ``instance_id`` (``"collimate-repos__<name>-1"``), ``repo``
    (``"collimate-repos/<name>"``), ``base_commit`` (:func:`base_commit` of the base files),
    ``problem_statement``, ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` (lists of pytest node ids,
    relative to the repository's root), ``test_patch``, ``patch`` (the gold patch; both
    unified diffs with ``a/``/``b/`` prefixes, for ``git apply`` at the root), ``template``
    (``"python3"``: the repositories need Python 3.9+ and pytest, nothing else) and
    ``repo_files`` (relative path -> text of the base state). ``test_cmd`` is there only
    when a task sets one; otherwise run pytest on the ids from the root.

    Raises:
        TaskFormatError: a bundled file is malformed (a packaging bug).

    >>> row = load_collimate_repos()[0]
    >>> sorted(row)  # doctest: +NORMALIZE_WHITESPACE
    ['FAIL_TO_PASS', 'PASS_TO_PASS', 'base_commit', 'instance_id', 'patch', 'problem_statement',
     'repo', 'repo_files', 'template', 'test_patch']
    """
    rows = [task_row(task) for task in read_repo_tasks()]
    return sorted(rows, key=lambda row: str(row["instance_id"]))


def read_repo_tasks() -> list[RepoTask]:
    """The bundled tasks as written, in file-name order."""
    data = resources.files(__name__) / "data"
    entries = sorted(
        (entry for entry in data.iterdir() if entry.name.endswith(_SUFFIX)),
        key=lambda entry: entry.name,
    )
    return [
        parse_task(
            entry.read_text(encoding="utf-8"),
            name=entry.name[: -len(_SUFFIX)],
            source=f"{REPO_SET_NAME}/{entry.name}",
        )
        for entry in entries
    ]


def task_row(task: RepoTask) -> dict[str, Any]:
    """``task`` as a SWE-bench-format row (fields: :func:`load_collimate_repos`)."""
    row: dict[str, Any] = {
        "instance_id": f"{REPO_SET_NAME}__{task.name}-1",
        "repo": f"{REPO_SET_NAME}/{task.name}",
        "base_commit": base_commit(task.files),
        "problem_statement": task.problem_statement,
        "FAIL_TO_PASS": list(task.fail_to_pass),
        "PASS_TO_PASS": list(task.pass_to_pass),
        "test_patch": task.test_patch,
        "patch": task.patch,
        "template": "python3",
        "repo_files": dict(task.files),
    }
    if task.test_cmd is not None:
        row["test_cmd"] = task.test_cmd
    return row


def base_commit(files: dict[str, str]) -> str:
    """A stable 40-hex name of a base state: SHA-1 over its sorted paths and contents.

    It changes when any file's path or text does, and not with the order of ``files``.

    >>> base_commit({"a.py": "x\\n", "b.py": ""}) == base_commit({"b.py": "", "a.py": "x\\n"})
    True
    >>> base_commit({"a.py": "x\\n"}) == base_commit({"a.py": "y\\n"})
    False
    """
    digest = hashlib.sha1(usedforsecurity=False)
    for path in sorted(files):
        content = files[path].encode("utf-8")
        digest.update(f"{path}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()
