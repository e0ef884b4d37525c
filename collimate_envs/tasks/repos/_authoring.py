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

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from collimate_envs.tasks.repos._bundle import RepoTask, file_text, parse_task, render_task

__all__ = [
    "apply_patch",
    "check_task",
    "check_tasks",
    "pack",
    "parse_outcomes",
    "pytest_outcomes",
    "run_suites",
    "static_problems",
    "unpack",
    "write_files",
]

_OUTCOME: Final = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)(?: - .*)?$")
# one pytest run of a small repository takes well under a second; this bounds a hang (per
# run a runner has to make, see run_suites)
_TIMEOUT_S: Final = 60.0
_GIT: Final = ("git", "-c", "user.name=collimate", "-c", "user.email=collimate@localhost")
_RUNNER: Final = Path(__file__).with_name("_pytest_runner.py")


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


def pytest_outcomes(repo: Path, *, doctests: bool = False) -> dict[str, str]:
    """Run the whole test suite of ``repo`` with this Python; each node id's outcome.

    With ``doctests``, the examples in the modules' docstrings run too (their ids name the
    module, not a test file).
    """
    return run_suites([(repo, doctests)])[0]


def run_suites(
    suites: Sequence[tuple[Path, bool]], *, jobs: int = 2, timeout_s: float | None = None
) -> list[dict[str, str]]:
    """:func:`pytest_outcomes` of many repositories, ``jobs`` at a time, from one warm pytest.

    One process imports pytest once and forks a run per repository (``_pytest_runner.py``):
    a run then costs about a third of a fresh ``python -m pytest``. Third-party pytest plugins
    are not loaded: the repositories need none.

    Raises:
        subprocess.TimeoutExpired: the runs took longer than ``timeout_s`` (by default a
            minute per ``jobs`` of them); the runner and its children are killed.
        RuntimeError: the runner failed, or pytest could not run a suite to its end (an
            internal or usage error, a crash): infrastructure, not a test outcome.
    """
    if not suites:
        return []
    with tempfile.TemporaryDirectory(prefix="collimate-reports-") as scratch:
        reports = [Path(scratch) / f"{index}.txt" for index in range(len(suites))]
        request = {
            "jobs": jobs,
            "suites": [
                {"dir": str(repo), "report": str(report), "args": _pytest_args(doctests)}
                for (repo, doctests), report in zip(suites, reports, strict=True)
            ],
        }
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "200"}
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        env.pop("PYTEST_ADDOPTS", None)
        timeout = timeout_s if timeout_s is not None else _TIMEOUT_S * (1 + len(suites) // jobs)
        # a session of its own: on a timeout the runner's forked children go with it
        proc = subprocess.Popen(
            [sys.executable, str(_RUNNER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(json.dumps(request), timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        if proc.returncode != 0:
            raise RuntimeError(f"the pytest runner failed ({proc.returncode}): {err.strip()}")
        # pytest's own trouble (internal or usage error, a killed run) is no test outcome
        codes = json.loads(out)["exit_codes"]
        odd = {str(suites[i][0]): code for i, code in enumerate(codes) if code not in (0, 1, 2, 5)}
        if odd:
            raise RuntimeError(f"pytest did not run these suites to the end: {odd}")
        return [
            parse_outcomes(report.read_text(encoding="utf-8")) if report.exists() else {}
            for report in reports
        ]


def _pytest_args(doctests: bool) -> list[str]:
    return ["-q", "-rA", "-p", "no:cacheprovider", *(["--doctest-modules"] if doctests else [])]


def check_task(task: RepoTask) -> list[str]:
    """What is wrong with ``task`` (empty when nothing is); see :func:`check_tasks`."""
    return check_tasks([task])[0]


def check_tasks(tasks: Sequence[RepoTask], *, jobs: int = 2) -> list[list[str]]:
    """What is wrong with each task (an empty list when nothing is); three runs per task.

    :func:`static_problems`, and: the base's own suite passes; the test patch and the gold
    patch apply cleanly; with the hidden tests every FAIL_TO_PASS test fails and every
    PASS_TO_PASS test passes, and the two lists name exactly the tests there are; with the
    gold patch too every test passes, and so do the examples in the modules' docstrings.
    """
    problems = [static_problems(task) for task in tasks]
    with tempfile.TemporaryDirectory(prefix="collimate-repos-") as scratch:
        suites: list[tuple[Path, bool]] = []
        states: list[tuple[int, int, int] | None] = []
        for number, task in enumerate(tasks):
            folders = [Path(scratch) / str(number) / state for state in ("base", "hidden", "gold")]
            failed = _prepare(task, *folders)
            if failed is not None:
                problems[number].append(failed)
                states.append(None)
                continue
            states.append((len(suites), len(suites) + 1, len(suites) + 2))
            suites += [(folders[0], False), (folders[1], False), (folders[2], True)]
        outcomes = run_suites(suites, jobs=jobs)
    for number, task in enumerate(tasks):
        found = states[number]
        if found is not None:
            base, before, with_doctests = (outcomes[index] for index in found)
            problems[number] += _run_problems(task, base, before, with_doctests)
    return problems


def _prepare(task: RepoTask, base: Path, hidden: Path, gold: Path) -> str | None:
    """Write the three states of ``task``; what did not apply, if anything."""
    for folder in (base, hidden, gold):
        write_files(task.files, folder)
    steps = [(hidden, "test patch", task.test_patch), (gold, "test patch", task.test_patch)]
    steps.append((gold, "gold patch", task.patch))
    for folder, which, patch in steps:
        try:
            apply_patch(folder, patch)
        except subprocess.CalledProcessError as exc:
            return f"the {which} does not apply: {exc.stderr.strip()}"
    return None


def _run_problems(
    task: RepoTask, base: dict[str, str], before: dict[str, str], with_doctests: dict[str, str]
) -> list[str]:
    problems = []
    if not base or _not_passed(base):
        problems.append(f"the base's own tests do not all pass: {_not_passed(base)}")
    after = {test: outcome for test, outcome in with_doctests.items() if _is_test_id(test)}
    examples = {test: outcome for test, outcome in with_doctests.items() if test not in after}
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
    if _not_passed(examples):
        problems.append(
            f"with the gold patch these docstrings' examples fail: {_not_passed(examples)}"
        )
    return problems


def static_problems(task: RepoTask) -> list[str]:
    """What is wrong with ``task`` that shows without running anything: a statement that
    quotes a line the gold patch adds, a gold patch that changes test files."""
    problems: list[str] = []
    added = [line[1:].strip() for line in task.patch.splitlines() if line.startswith("+")]
    leaked = [line for line in added if len(line) > 8 and line in task.problem_statement]
    if leaked:
        problems.append(f"the statement quotes the gold patch: {leaked}")
    touched = re.findall(r"^diff --git a/(\S+)", task.patch, flags=re.MULTILINE)
    if any(_is_test_file(path) for path in touched):
        problems.append(f"the gold patch changes test files: {touched}")
    return problems


def pack(source: Path, name: str) -> RepoTask:
    """The task authored in ``source`` (``base/``, ``fix/``, ``hidden/``, ``issue.md``)."""
    files = {path: file_text(text) for path, text in _read_tree(source / "base").items()}
    fix = _read_tree(source / "fix")
    hidden = _read_tree(source / "hidden")
    with tempfile.TemporaryDirectory(prefix="collimate-pack-") as scratch:
        repo = Path(scratch) / "git"
        write_files(files, repo)
        _git(repo, "init", "-q")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "base")
        test_patch = _diff_of(repo, {p: file_text(t) for p, t in hidden.items()})
        patch = _diff_of(repo, {p: file_text(t) for p, t in fix.items()})
        hidden_state, gold_state = Path(scratch) / "hidden", Path(scratch) / "gold"
        for state, patches in ((hidden_state, [test_patch]), (gold_state, [test_patch, patch])):
            write_files(files, state)
            for each in patches:
                apply_patch(state, each)
        before, after = run_suites([(hidden_state, False), (gold_state, False)])
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


def _is_test_id(node_id: str) -> bool:
    return _is_test_file(node_id.split("::", 1)[0])


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
        found = check_tasks([_read(Path(p)) for p in paths])
        problems = [
            f"{p}: {problem}" for p, each in zip(paths, found, strict=True) for problem in each
        ]
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
