"""Writing and checking ``collimate-repos`` tasks on the host (our own code: no sandbox).

A task is authored as a folder: ``base/`` (the repository with the bug and its visible
tests), ``fix/`` (the files the fix changes, whole), ``hidden/`` (the test files the hidden
tests add or change, whole) and ``issue.md`` (the problem statement). ``pack`` makes the
patches with ``git diff`` and finds FAIL_TO_PASS and PASS_TO_PASS by running pytest;
``unpack`` turns a ``.task`` file back into such a folder; ``check`` runs a task's tests and
lists what is wrong with it (the self-test of the bundled set runs it on every task)::

    python -m collimate_envs.tasks.repos._authoring pack SRC collimate_envs/tasks/repos/data/NAME.task
    python -m collimate_envs.tasks.repos._authoring unpack collimate_envs/tasks/repos/data/NAME.task SRC
    python -m collimate_envs.tasks.repos._authoring check collimate_envs/tasks/repos/data/NAME.task

>>> sorted(parse_outcomes("PASSED tests/t.py::a\\nFAILED tests/t.py::b - assert 1 == 2\\n").items())
[('tests/t.py::a', 'passed'), ('tests/t.py::b', 'failed')]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

from collimate_envs.tasks.repos._bundle import RepoTask, file_text, parse_task, render_task

__all__ = [
    "apply_patch",
    "check_task",
    "pack",
    "parse_outcomes",
    "pytest_outcomes",
    "unpack",
    "write_files",
]

_OUTCOME: Final = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)(?: - .*)?$")
# one pytest run of a small repository takes well under a second; this bounds a hang
_TIMEOUT_S: Final = 60.0
_GIT: Final = ("git", "-c", "user.name=collimate", "-c", "user.email=collimate@localhost")


def write_files(files: dict[str, str], dest: Path) -> None:
    """Write ``files`` (relative path -> text) under ``dest``."""
    for path, text in files.items():
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def apply_patch(repo: Path, patch: str) -> None:
    """``git apply`` ``patch`` at ``repo``'s root (a git repository is made there if needed).

    Raises:
        subprocess.CalledProcessError: the patch does not apply cleanly (stderr says why).
    """
    if not (repo / ".git").exists():
        _git(repo, "init", "-q")
    subprocess.run(
        [*_GIT, "apply", "--whitespace=nowarn", "-"],
        cwd=repo,
        input=patch,
        text=True,
        capture_output=True,
        check=True,
    )


def parse_outcomes(report: str) -> dict[str, str]:
    """Each test's outcome (``passed``, ``failed``, ``error``, ...) from pytest's ``-rA`` lines."""
    outcomes: dict[str, str] = {}
    for line in report.splitlines():
        match = _OUTCOME.match(line)
        if match is not None:
            outcomes[match[2]] = match[1].lower()
    return outcomes


def pytest_outcomes(repo: Path) -> dict[str, str]:
    """Run the whole test suite of ``repo`` with this Python; each node id's outcome."""
    # no third-party plugins: the repositories need none, and loading them is most of a run
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "200"}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        check=False,
    )
    return parse_outcomes(proc.stdout)


def check_task(task: RepoTask) -> list[str]:
    """What is wrong with ``task`` (empty when nothing is): the tests are run three times.

    The base's own suite passes; the test patch and the gold patch apply cleanly; with the
    hidden tests every FAIL_TO_PASS test fails and every PASS_TO_PASS test passes, and the two
    lists name exactly the tests there are; with the gold patch too every test passes; the
    statement quotes no line the gold patch adds, and the gold patch changes no test file.
    """
    problems: list[str] = []
    added = [line[1:].strip() for line in task.patch.splitlines() if line.startswith("+")]
    leaked = [line for line in added if len(line) > 8 and line in task.problem_statement]
    if leaked:
        problems.append(f"the statement quotes the gold patch: {leaked}")
    touched = re.findall(r"^diff --git a/(\S+)", task.patch, flags=re.MULTILINE)
    if any(_is_test_file(path) for path in touched):
        problems.append(f"the gold patch changes test files: {touched}")
    with tempfile.TemporaryDirectory(prefix="collimate-repo-") as scratch:
        repo = Path(scratch)
        write_files(task.files, repo)
        base = pytest_outcomes(repo)
        if not base or any(outcome != "passed" for outcome in base.values()):
            problems.append(f"the base's own tests do not all pass: {_not_passed(base)}")
        try:
            apply_patch(repo, task.test_patch)
        except subprocess.CalledProcessError as exc:
            return [*problems, f"the test patch does not apply: {exc.stderr.strip()}"]
        before = pytest_outcomes(repo)
        try:
            apply_patch(repo, task.patch)
        except subprocess.CalledProcessError as exc:
            return [*problems, f"the gold patch does not apply: {exc.stderr.strip()}"]
        after = pytest_outcomes(repo)
    fail_to_pass, pass_to_pass = _split(before, after)
    if sorted(task.fail_to_pass) != fail_to_pass:
        problems.append(f"FAIL_TO_PASS should be {fail_to_pass}, not {sorted(task.fail_to_pass)}")
    if sorted(task.pass_to_pass) != pass_to_pass:
        problems.append(f"PASS_TO_PASS should be {pass_to_pass}, not {sorted(task.pass_to_pass)}")
    if not fail_to_pass:
        problems.append("no hidden test fails before the gold patch")
    broken = _not_passed(after)
    if broken:
        problems.append(f"with the gold patch these do not pass: {broken}")
    return problems


def pack(source: Path, name: str) -> RepoTask:
    """The task authored in ``source`` (``base/``, ``fix/``, ``hidden/``, ``issue.md``)."""
    files = {path: file_text(text) for path, text in _read_tree(source / "base").items()}
    fix = _read_tree(source / "fix")
    hidden = _read_tree(source / "hidden")
    with tempfile.TemporaryDirectory(prefix="collimate-pack-") as scratch:
        repo = Path(scratch)
        write_files(files, repo)
        _git(repo, "init", "-q")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "base")
        test_patch = _diff_of(repo, {p: file_text(t) for p, t in hidden.items()})
        patch = _diff_of(repo, {p: file_text(t) for p, t in fix.items()})
        apply_patch(repo, test_patch)
        before = pytest_outcomes(repo)
        apply_patch(repo, patch)
        after = pytest_outcomes(repo)
    fail_to_pass, pass_to_pass = _split(before, after)
    return RepoTask(
        name=name,
        problem_statement=(source / "issue.md").read_text(encoding="utf-8").strip(),
        files=files,
        patch=patch,
        test_patch=test_patch,
        fail_to_pass=tuple(fail_to_pass),
        pass_to_pass=tuple(pass_to_pass),
    )


def unpack(task: RepoTask, dest: Path) -> None:
    """Write ``task`` as an authoring folder at ``dest`` (``pack`` reads it back)."""
    write_files(task.files, dest / "base")
    (dest / "issue.md").write_text(task.problem_statement + "\n", encoding="utf-8")
    for folder, patch in (("fix", task.patch), ("hidden", task.test_patch)):
        with tempfile.TemporaryDirectory(prefix="collimate-unpack-") as scratch:
            repo = Path(scratch)
            write_files(task.files, repo)
            apply_patch(repo, patch)
            changed = re.findall(r"^diff --git a/\S+ b/(\S+)", patch, flags=re.MULTILINE)
            for path in changed:
                write_files({path: (repo / path).read_text(encoding="utf-8")}, dest / folder)


def _diff_of(repo: Path, overlay: dict[str, str]) -> str:
    """The diff that ``overlay`` makes to the committed tree (the tree is reset afterwards)."""
    write_files(overlay, repo)
    _git(repo, "add", "-A")
    diff = _git(repo, "diff", "--cached", "--no-color", "--no-renames", "--no-ext-diff")
    _git(repo, "reset", "-q", "--hard")
    return diff


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        [*_GIT, *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def _read_tree(root: Path) -> dict[str, str]:
    if not root.is_dir():
        return {}
    return {
        path.relative_to(root).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def _split(before: dict[str, str], after: dict[str, str]) -> tuple[list[str], list[str]]:
    """(FAIL_TO_PASS, PASS_TO_PASS) from the outcomes without and with the gold patch."""
    tests = sorted(set(before) | set(after))
    fail_to_pass = [t for t in tests if before.get(t) != "passed" and after.get(t) == "passed"]
    pass_to_pass = [t for t in tests if before.get(t) == "passed" and after.get(t) == "passed"]
    return fail_to_pass, pass_to_pass


def _not_passed(outcomes: dict[str, str]) -> dict[str, str]:
    return {test: outcome for test, outcome in outcomes.items() if outcome != "passed"}


def _is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.startswith("tests/") or name.startswith("test_") or name == "conftest.py"


def _main(argv: list[str]) -> int:
    usage = "usage: _authoring (pack SRC OUT.task | unpack IN.task DEST | check IN.task...)"
    if len(argv) < 2 or argv[0] not in ("pack", "unpack", "check"):
        print(usage, file=sys.stderr)
        return 2
    command, *paths = argv
    if command == "pack" and len(paths) == 2:
        out = Path(paths[1])
        task = pack(Path(paths[0]), out.name.removesuffix(".task"))
        out.write_text(render_task(task), encoding="utf-8")
        problems = check_task(task)
    elif command == "unpack" and len(paths) == 2:
        if Path(paths[1]).exists():
            print(f"{paths[1]} exists; unpack writes a new folder", file=sys.stderr)
            return 2
        unpack(_read(Path(paths[0])), Path(paths[1]))
        return 0
    elif command == "check":
        problems = [f"{p}: {problem}" for p in paths for problem in check_task(_read(Path(p)))]
    else:
        print(usage, file=sys.stderr)
        return 2
    for problem in problems:
        print(problem)
    return 1 if problems else 0


def _read(path: Path) -> RepoTask:
    return parse_task(
        path.read_text(encoding="utf-8"), name=path.name.removesuffix(".task"), source=str(path)
    )


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
