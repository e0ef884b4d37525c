"""The ``.task`` file: one repository task (base files, issue, gold and test patches) as text.

A task file is a sequence of sections, each opened by a marker line ``=== NAME ===``; text
before the first marker is a comment (lines starting with ``#``) and is ignored::

    # interval-set: half-open integer intervals
    === problem_statement ===
    merge() leaves touching intervals apart ...
    === file intervals/core.py ===
    <the file's text>
    === patch ===
    <the gold patch, a unified diff with a/ and b/ prefixes>
    === test_patch ===
    <the hidden tests, a unified diff>
    === FAIL_TO_PASS ===
    tests/test_core.py::test_merge_touching
    === PASS_TO_PASS ===
    tests/test_core.py::test_merge_overlapping

``=== test_cmd ===`` (one line) is optional. A file's text and the patches end with exactly one
newline (trailing blank lines are dropped: they only separate sections); the statement is
stripped; the id sections hold one pytest node id per line.

>>> text = render_task(RepoTask(
...     name="demo", problem_statement="f() is wrong.", files={"m.py": "x = 1\\n"},
...     patch="diff --git a/m.py b/m.py\\n", test_patch="diff --git a/t.py b/t.py\\n",
...     fail_to_pass=("t.py::a",), pass_to_pass=()))
>>> parse_task(text, name="demo").files
{'m.py': 'x = 1\\n'}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from collimate_envs.tasks._errors import TaskFormatError

__all__ = ["RepoTask", "file_text", "parse_task", "render_task"]

_MARKER: Final = re.compile(r"^=== (?P<section>[A-Za-z_]+)(?: (?P<path>\S+))? ===$")
_SINGLE: Final = (
    "problem_statement",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "test_cmd",
)
_REQUIRED: Final = ("problem_statement", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS")
_NAME: Final = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclass(frozen=True)
class RepoTask:
    """One task of a ``.task`` file, as written (the loader turns it into a SWE-bench row).

    Attributes:
        name: the repository's name (the file's stem), lowercase words joined by ``-``.
        problem_statement: the issue as a user filed it.
        files: the base state, relative POSIX path -> text.
        patch: the gold patch.
        test_patch: the hidden tests' patch.
        fail_to_pass: tests that fail on the base and pass with the gold patch.
        pass_to_pass: tests that pass on both.
        test_cmd: a shell command that runs the tests, when the default will not do.
    """

    name: str
    problem_statement: str
    files: dict[str, str]
    patch: str
    test_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    test_cmd: str | None = field(default=None)


def parse_task(text: str, *, name: str, source: str | None = None) -> RepoTask:
    """Read a task file's text; ``source`` (the path) prefixes error messages.

    Raises:
        TaskFormatError: an invalid name, an unknown or repeated section, a missing one, a
            file path that is absolute or climbs out with ``..``, or no files at all.
    """
    where = source or f"{name}.task"
    if not _NAME.match(name):
        raise TaskFormatError(
            f"task name {name!r} is not lowercase words joined by '-'", path=where
        )
    sections: dict[str, str] = {}
    files: dict[str, str] = {}
    current: tuple[str, str | None] | None = None
    body: list[str] = []

    def close() -> None:
        if current is None:
            if any(line.strip() and not line.startswith("#") for line in body):
                raise TaskFormatError("text before the first section marker", path=where, line=1)
            return
        section, path = current
        content = "".join(body)
        if path is not None:
            files[path] = file_text(content)
        else:
            sections[section] = content

    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        match = _MARKER.match(line.rstrip("\n"))
        if match is None:
            body.append(line)
            continue
        close()
        section, path = match["section"], match["path"]
        if section == "file":
            if path is None:
                raise TaskFormatError("a file section needs a path", path=where, line=number)
            _check_path(path, where, number)
            if path in files:
                raise TaskFormatError(f"file {path!r} appears twice", path=where, line=number)
        elif section not in _SINGLE or path is not None:
            raise TaskFormatError(f"unknown section {line.strip()!r}", path=where, line=number)
        elif section in sections:
            raise TaskFormatError(f"section {section!r} appears twice", path=where, line=number)
        current, body = (section, path), []
    close()
    missing = [s for s in _REQUIRED if s not in sections]
    if missing:
        raise TaskFormatError(f"missing sections: {', '.join(missing)}", path=where)
    if not files:
        raise TaskFormatError("the task has no files", path=where)
    statement = sections["problem_statement"].strip()
    if not statement:
        raise TaskFormatError("the problem statement is empty", path=where)
    test_cmd = sections.get("test_cmd", "").strip() or None
    return RepoTask(
        name=name,
        problem_statement=statement,
        files=files,
        patch=_patch(sections["patch"], "patch", where),
        test_patch=_patch(sections["test_patch"], "test_patch", where),
        fail_to_pass=_ids(sections["FAIL_TO_PASS"]),
        pass_to_pass=_ids(sections["PASS_TO_PASS"]),
        test_cmd=test_cmd,
    )


def render_task(task: RepoTask, *, comment: str = "") -> str:
    """The text of ``task``'s file (``parse_task`` reads it back to an equal task)."""
    parts = [f"# {line}\n" for line in comment.splitlines()]
    parts.append(f"=== problem_statement ===\n{task.problem_statement.strip()}\n\n")
    for path in sorted(task.files):
        parts.append(f"=== file {path} ===\n{task.files[path]}\n")
    parts.append(f"=== patch ===\n{task.patch}\n")
    parts.append(f"=== test_patch ===\n{task.test_patch}\n")
    parts.append("=== FAIL_TO_PASS ===\n" + "".join(f"{i}\n" for i in task.fail_to_pass) + "\n")
    parts.append("=== PASS_TO_PASS ===\n" + "".join(f"{i}\n" for i in task.pass_to_pass))
    if task.test_cmd:
        parts.append(f"\n=== test_cmd ===\n{task.test_cmd}\n")
    return "".join(parts)


def file_text(content: str) -> str:
    """``content`` as a task file keeps it: one final newline, none for an empty file.

    >>> file_text("x = 1\\n\\n"), file_text("\\n")
    ('x = 1\\n', '')
    """
    stripped = content.rstrip("\n")
    return stripped + "\n" if stripped else ""


def _check_path(path: str, where: str, line: int) -> None:
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise TaskFormatError(
            f"file path {path!r} must be relative and plain", path=where, line=line
        )


def _patch(text: str, section: str, where: str) -> str:
    patch = text.rstrip("\n") + "\n"
    if not patch.startswith("diff --git a/"):
        raise TaskFormatError(f"section {section!r} is not a git diff", path=where)
    return patch


def _ids(text: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in text.splitlines() if line.strip())
