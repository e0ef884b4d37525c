"""Repository tasks: SWE-bench rows (and R2E-Gym's and SWE-smith's) read into one shape.

A row names its environment one of two ways:

* an **image** (``image_name``, SWE-smith's; ``docker_image``, R2E-Gym's; or the env's
  ``image=`` / ``image_for=``), whose repository sits at ``/testbed`` (SWE-bench's layout,
  ``workdir`` overrides it);
* a **template plus a snapshot**: ``template`` (default ``python3``) and the repository's
  files, ``repo_files`` (path -> text) or ``repo_archive`` (a tar file on the host).

>>> row = {"instance_id": "demo-1", "problem_statement": "add() subtracts",
...        "FAIL_TO_PASS": '["test_calc.py::test_add"]', "PASS_TO_PASS": [],
...        "repo_files": {"calc.py": "def add(a, b):\\n    return a - b\\n"}}
>>> task = RepoTask.from_row(row)
>>> task.task_id, task.fail_to_pass, task.template, task.image
('demo-1', ('test_calc.py::test_add',), 'python3', None)
>>> RepoTask.from_row({**row, "repo_files": None, "image_name": "swesmith/x:1"}).workdir
'/testbed'
"""

from __future__ import annotations

import json
import shlex
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from collimate_envs.repo._patch import patch_paths
from collimate_envs.repo._testids import test_list

__all__ = ["ROW_FORMATS", "SNAPSHOT_WORKDIR", "TESTBED", "RepoTask", "RowError"]

#: Where an image's repository is (SWE-bench's layout).
TESTBED = "/testbed"
#: Where a snapshot's repository is on template rows: a folder of the session's own
#: (``/sandbox`` holds the session's user site too, where a vendored runner goes).
SNAPSHOT_WORKDIR = "/sandbox/repo"
#: The row formats :meth:`RepoTask.from_row` reads.
ROW_FORMATS = ("swe-bench", "r2e-gym", "swe-smith")

ImageFor = Callable[[Mapping[str, Any]], "str | None"]


class RowError(ValueError):
    """A task row that cannot be read; the message names the row and the field."""


def _text(row: Mapping[str, Any], *names: str) -> str:
    for name in names:
        value = row.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def _files(value: Any, where: str) -> dict[str, bytes]:
    if not isinstance(value, Mapping):
        raise RowError(f"{where}: repo_files must map paths to file contents")
    files: dict[str, bytes] = {}
    for path, content in value.items():
        if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
            raise RowError(f"{where}: repo_files has a bad path {path!r}")
        if isinstance(content, str):
            files[path] = content.encode("utf-8")
        elif isinstance(content, (bytes, bytearray)):
            files[path] = bytes(content)
        else:
            raise RowError(f"{where}: repo_files[{path!r}] must be text or bytes")
    return files


def read_archive(path: str) -> dict[str, bytes]:
    """The regular files of a tar archive (any compression), by path; links and devices refused.

    Raises:
        RowError: the archive cannot be read, or holds a link, a device or a path outside it.
    """
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(path) as archive:
            for member in archive.getmembers():
                name = member.name.removeprefix("./")
                if member.isdir() or not name:
                    continue
                if not member.isfile():
                    raise RowError(f"{path}: {name!r} is not a regular file")
                if name.startswith("/") or ".." in name.split("/"):
                    raise RowError(f"{path}: {name!r} is outside the archive")
                handle = archive.extractfile(member)
                files[name] = handle.read() if handle is not None else b""
    except (OSError, tarfile.TarError) as exc:
        raise RowError(f"cannot read the repo_archive {path!r}: {exc}") from exc
    return files


def detect_format(row: Mapping[str, Any]) -> str:
    """``swe-smith`` (``image_name``), ``r2e-gym`` (``docker_image`` with ``expected_output_json``
    or ``repo_name``) or ``swe-bench`` (everything else)."""
    if row.get("image_name") and not row.get("test_patch"):
        return "swe-smith"
    if row.get("docker_image") and (row.get("expected_output_json") or row.get("repo_name")):
        return "r2e-gym"
    return "swe-bench"


@dataclass(frozen=True)
class RepoTask:
    """One repository task, whatever row it came from.

    Attributes:
        task_id: ``instance_id``.
        problem_statement: the issue text (the first observation).
        fail_to_pass, pass_to_pass: the test ids that must pass after the fix.
        test_patch: a diff adding the hidden tests (never in the agent's sandbox).
        gold_patch: the reference fix (SWE-bench's ``patch``), when the row has one.
        repo, base_commit: where the snapshot came from (informative).
        template: the template of a snapshot row (default ``python3``).
        image: the image of an image row.
        files: a snapshot row's repository, path -> bytes.
        workdir: where the repository is in the sandbox.
        test_cmd: the test command (default: pytest on the test ids).
        setup_cmd: run once when the task is prepared (SWE-smith: check out the bug's branch).
        expected: test id -> ``PASSED``/``FAILED`` the tests must show (R2E-Gym); by default
            every FAIL_TO_PASS and PASS_TO_PASS test must pass.
        row_format: which of :data:`ROW_FORMATS` the row was read as.
    """

    task_id: str
    problem_statement: str
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    test_patch: str = ""
    gold_patch: str = ""
    repo: str = ""
    base_commit: str = ""
    template: str | None = None
    image: str | None = None
    files: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    workdir: str = SNAPSHOT_WORKDIR
    test_cmd: str | None = None
    setup_cmd: str | None = None
    expected: Mapping[str, str] = field(default_factory=dict, repr=False)
    row_format: str = "swe-bench"
    difficulty: str = ""

    @property
    def tests(self) -> tuple[str, ...]:
        """Every test the grade looks at, FAIL_TO_PASS first."""
        extra = tuple(t for t in self.expected if t not in self.fail_to_pass + self.pass_to_pass)
        return self.fail_to_pass + self.pass_to_pass + extra

    @property
    def hidden_paths(self) -> tuple[str, ...]:
        """The files the test patch writes (the agent may not touch them)."""
        return tuple(patch_paths(self.test_patch)) if self.test_patch else ()

    def must_pass(self, test_id: str) -> bool:
        """Whether the grade needs ``test_id`` to pass (R2E-Gym rows may expect a failure)."""
        return self.expected.get(test_id, "PASSED").upper() == "PASSED"

    @classmethod
    def from_row(
        cls,
        row: Mapping[str, Any],
        *,
        image: str | None = None,
        image_for: ImageFor | None = None,
        template: str | None = None,
        workdir: str | None = None,
        test_cmd: str | None = None,
    ) -> RepoTask:
        """Read a SWE-bench, R2E-Gym or SWE-smith row (see the module docstring).

        Args:
            row: the row.
            image: the image for every row (the env's ``image=``), over the row's own.
            image_for: a function of the row giving its image (the env's ``image_for=``).
            template: the template for snapshot rows without one (default ``python3``).
            workdir: where the repository is, over the row's ``workdir`` and the default.
            test_cmd: the test command for every row, over the row's ``test_cmd``.

        Raises:
            RowError: a missing id or statement, bad test lists, no environment at all.
        """
        if not isinstance(row, Mapping):
            raise RowError(f"a task row must be a mapping, got {type(row).__name__}")
        fmt = detect_format(row)
        task_id = _text(row, "instance_id", "task_id", "commit_hash")
        if not task_id:
            raise RowError("the row has no instance_id")
        where = f"row {task_id!r}"
        statement = _text(row, "problem_statement", "prompt")
        if not statement:
            raise RowError(f"{where}: no problem_statement")
        try:
            f2p = test_list(row.get("FAIL_TO_PASS"))
            p2p = test_list(row.get("PASS_TO_PASS"))
        except ValueError as exc:
            raise RowError(f"{where}: {exc}") from exc
        expected: dict[str, str] = {}
        if fmt == "r2e-gym" and row.get("expected_output_json"):
            raw = row["expected_output_json"]
            try:
                parsed = json.loads(raw) if isinstance(raw, str) else dict(raw)
            except (json.JSONDecodeError, TypeError, ValueError) as exc:
                raise RowError(f"{where}: expected_output_json is not a JSON object") from exc
            expected = {str(k): str(v) for k, v in parsed.items()}
        chosen_image = image or (image_for(row) if image_for is not None else None)
        chosen_image = chosen_image or _text(row, "image_name", "docker_image") or None
        files: dict[str, bytes] = {}
        if row.get("repo_files") is not None:
            files = _files(row["repo_files"], where)
        elif isinstance(row.get("repo_archive"), str) and row["repo_archive"]:
            files = read_archive(row["repo_archive"])
        if chosen_image is None and not files:
            raise RowError(
                f"{where}: no environment: give an image (image_name, docker_image, the env's "
                "image= or image_for=) or a snapshot (repo_files or repo_archive)"
            )
        snapshot = chosen_image is None
        gold = _text(row, "patch") if fmt != "swe-smith" else ""
        return cls(
            task_id=task_id,
            problem_statement=statement,
            fail_to_pass=f2p,
            pass_to_pass=p2p,
            test_patch=_text(row, "test_patch"),
            gold_patch=gold,
            repo=_text(row, "repo", "repo_name"),
            base_commit=_text(row, "base_commit", "commit_hash"),
            template=(template or _text(row, "template") or "python3") if snapshot else None,
            image=chosen_image,
            files=files,
            workdir=workdir or _text(row, "workdir") or (SNAPSHOT_WORKDIR if snapshot else TESTBED),
            test_cmd=test_cmd or _text(row, "test_cmd") or None,
            setup_cmd=_text(row, "setup_cmd")
            or (f"git checkout {shlex.quote(task_id)}" if fmt == "swe-smith" else None),
            expected=expected,
            row_format=fmt,
            difficulty=_text(row, "difficulty"),
        )
