"""Self-tests of the bundled ``collimate-repos`` set: its rows, its file format, and each task's
tests run on the host (the base, the hidden tests, the gold patch; no sandbox)."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collimate_envs.tasks import TaskFormatError
from collimate_envs.tasks.repos import (
    RepoTask,
    load_collimate_repos,
    parse_task,
    read_repo_tasks,
    render_task,
)
from collimate_envs.tasks.repos._authoring import (
    apply_patch,
    check_task,
    check_tasks,
    pack,
    run_suites,
    static_problems,
    unpack,
    write_files,
)

ROWS = load_collimate_repos()
TASKS = read_repo_tasks()
FIELDS = {
    "instance_id": str,
    "repo": str,
    "base_commit": str,
    "problem_statement": str,
    "FAIL_TO_PASS": list,
    "PASS_TO_PASS": list,
    "test_patch": str,
    "patch": str,
    "template": str,
    "repo_files": dict,
}


def test_size_and_unique_names() -> None:
    assert len(ROWS) >= 20
    ids = [row["instance_id"] for row in ROWS]
    assert len(set(ids)) == len(ids)
    assert len({row["repo"] for row in ROWS}) == len(ROWS)
    assert len({row["base_commit"] for row in ROWS}) == len(ROWS)
    assert ids == sorted(ids)


@pytest.mark.parametrize("row", ROWS, ids=[row["instance_id"] for row in ROWS])
def test_row_fields(row: dict[str, object]) -> None:
    assert {key: type(row[key]) for key in FIELDS} == FIELDS
    assert set(row) == set(FIELDS), "no other field (a task with a test_cmd would add it)"
    name = str(row["repo"]).removeprefix("collimate-repos/")
    assert row["instance_id"] == f"collimate-repos__{name}-1"
    assert re.fullmatch(r"[0-9a-f]{40}", str(row["base_commit"]))
    assert row["template"] == "python3"
    files = row["repo_files"]
    assert isinstance(files, dict) and files
    assert all(isinstance(text, str) for text in files.values())
    # a real small library: a package of a few modules beside its tests
    modules = [p for p in files if p.endswith(".py") and not p.startswith("tests/")]
    assert 2 <= len([p for p in modules if not p.endswith("__init__.py")]) <= 5, modules
    assert any(p.startswith("tests/test_") for p in files)
    # node ids a shell command can carry without quoting surprises (no spaces, quotes, $, ~)
    for test_id in [*row["FAIL_TO_PASS"], *row["PASS_TO_PASS"]]:  # type: ignore[misc]
        assert re.fullmatch(r"tests/[\w/]+\.py::\w+(\[[\w.+-]+\])?", test_id), test_id
    # the hidden tests are not in the base, nor quoted by the statement
    statement = str(row["problem_statement"])
    assert len(statement) > 100
    for test_id in row["FAIL_TO_PASS"]:  # type: ignore[attr-defined]
        assert test_id.split("::")[-1] not in statement


def test_loading_twice_gives_equal_independent_rows() -> None:
    again = load_collimate_repos()
    assert again == ROWS
    again[0]["FAIL_TO_PASS"].append("x")
    again[0]["repo_files"]["x.py"] = ""
    assert load_collimate_repos()[0] == ROWS[0]


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_file_format_round_trips(task: RepoTask) -> None:
    assert parse_task(render_task(task, comment="a\nb"), name=task.name) == task


@pytest.mark.slow
def test_every_task_checks_out() -> None:
    """Base suite green; with the hidden tests exactly FAIL_TO_PASS fail; with the gold patch
    all pass, docstring examples too; the patches apply; the statements quote no fix
    (``check_tasks``: three pytest runs per task, forked from one warm pytest)."""
    found = check_tasks(TASKS, jobs=min(4, os.cpu_count() or 1))
    problems = {task.name: each for task, each in zip(TASKS, found, strict=True) if each}
    assert not problems, problems


def test_issue_reproductions_hold_on_the_base(tmp_path: Path) -> None:
    """The ``>>>`` sessions a statement shows (its symptom, as the user saw it) are what the
    base really does: run as doctests against the base files."""
    reproduced = []
    procs = []
    for task in TASKS:
        blocks = re.findall(r"^```[\w-]*\n(.*?)^```", task.problem_statement, re.S | re.M)
        session = "\n".join(block for block in blocks if ">>>" in block)
        if not session:
            continue
        repo = tmp_path / task.name
        write_files({**task.files, "ISSUE.txt": session}, repo)
        flags = ["-o", "ELLIPSIS", "-o", "NORMALIZE_WHITESPACE"]
        command = [sys.executable, "-m", "doctest", *flags, "ISSUE.txt"]
        procs.append(
            (task.name, subprocess.Popen(command, cwd=repo, stdout=subprocess.PIPE, text=True))
        )
        reproduced.append(task.name)
    failures = {name: proc.communicate()[0] for name, proc in procs if proc.wait() != 0}
    assert not failures, failures
    assert len(reproduced) >= len(TASKS) // 2, "most statements show a session (all do now)"


def test_repositories_need_only_python_3_9(tmp_path: Path) -> None:
    """The base and its patched state use nothing newer than Python 3.9 (``vermin``)."""
    vermin = Path(sys.executable).parent / "vermin"
    if not vermin.exists() and shutil.which("vermin") is None:
        pytest.skip("vermin is not installed (install the `test` extra)")
    for task in TASKS:
        repo = tmp_path / task.name
        write_files(task.files, repo)
        apply_patch(repo, task.test_patch)
        apply_patch(repo, task.patch)
    flags = ["--no-config-file", "--target=3.9-", "--violations", "--no-tips", "-q"]
    proc = subprocess.run(
        [str(vermin) if vermin.exists() else "vermin", *flags, str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# -- the checker itself catches broken tasks ----------------------------------------------------


def _interval_set() -> RepoTask:
    return next(t for t in TASKS if t.name == "interval-set")


def test_check_reports_wrong_lists() -> None:
    task = _interval_set()
    swapped = dataclasses.replace(
        task,
        fail_to_pass=task.fail_to_pass[1:],
        pass_to_pass=(*task.pass_to_pass, task.fail_to_pass[0]),
    )
    problems = check_task(swapped)
    assert any(p.startswith("FAIL_TO_PASS should be") for p in problems), problems
    assert any(p.startswith("PASS_TO_PASS should be") for p in problems), problems


def test_check_reports_a_gold_patch_that_fixes_nothing() -> None:
    task = _interval_set()
    harmless = re.sub(
        r"(?m)^\+(\s+if result and .*)$", lambda m: "+" + m[1].replace("<=", "<"), task.patch
    )
    assert harmless != task.patch
    problems = check_task(dataclasses.replace(task, patch=harmless))
    assert any("with the gold patch these do not pass" in p for p in problems), problems


def test_check_reports_a_patch_that_does_not_apply() -> None:
    task = _interval_set()
    broken = task.patch.replace("result = []", "result = list()")
    assert broken != task.patch
    problems = check_task(dataclasses.replace(task, patch=broken))
    assert any(p.startswith("the gold patch does not apply") for p in problems), problems


def test_check_reports_a_wrong_docstring_example() -> None:
    task = _interval_set()
    core = task.files["intervals/core.py"]
    wrong = core.replace(">>> Interval(2, 5).length\n    3\n", ">>> Interval(2, 5).length\n    4\n")
    assert wrong != core
    problems = check_task(
        dataclasses.replace(task, files={**task.files, "intervals/core.py": wrong})
    )
    assert any(
        "docstrings' examples fail" in p and "intervals.core.Interval" in p for p in problems
    )


def test_check_reports_a_statement_that_gives_the_fix_away() -> None:
    task = _interval_set()
    added = next(line[1:] for line in task.patch.splitlines() if line.startswith("+    "))
    told = dataclasses.replace(task, problem_statement=f"{task.problem_statement}\nFix: {added}")
    assert static_problems(task) == []
    assert any(p.startswith("the statement quotes") for p in static_problems(told))


def test_check_reports_a_gold_patch_that_edits_tests() -> None:
    task = _interval_set()
    both = dataclasses.replace(task, patch=task.patch + task.test_patch)
    assert any(p.startswith("the gold patch changes test files") for p in static_problems(both))


def test_unpack_then_pack_gives_the_task_back(tmp_path: Path) -> None:
    task = _interval_set()
    unpack(task, tmp_path / "src")
    assert sorted(p.name for p in (tmp_path / "src").iterdir()) == [
        "base",
        "fix",
        "hidden",
        "issue.md",
    ]
    assert pack(tmp_path / "src", task.name) == task


def test_runner_reports_outcomes_of_each_suite(tmp_path: Path) -> None:
    write_files(
        {"tests/test_a.py": "def test_ok():\n    pass\n\ndef test_no():\n    assert 0\n"},
        tmp_path / "one",
    )
    write_files(
        {"m.py": '"""\n>>> 1 + 1\n2\n"""\n', "test_b.py": "def test_b():\n    pass\n"},
        tmp_path / "two",
    )
    one, two = run_suites([(tmp_path / "one", False), (tmp_path / "two", True)], jobs=2)
    assert one == {"tests/test_a.py::test_ok": "passed", "tests/test_a.py::test_no": "failed"}
    assert two == {"m.py::m": "passed", "test_b.py::test_b": "passed"}


def test_runner_failure_is_an_error_not_an_outcome(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="did not run these suites to the end"):
        run_suites([(tmp_path / "missing", False)])


def test_runner_timeout_kills_the_runs(tmp_path: Path) -> None:
    """A run that hangs is killed with its runner: no process is left in the repository."""
    hang = "import time\n\ndef test_hang():\n    time.sleep(120)\n"
    write_files({"test_hang.py": hang}, tmp_path / "repo")
    with pytest.raises(subprocess.TimeoutExpired):
        run_suites([(tmp_path / "repo", False)], timeout_s=5)
    for _ in range(100):
        if not _processes_in(tmp_path):
            break
        time.sleep(0.05)
    # (on a very busy machine the run may not have started within 5 s: nothing to leak then)
    assert not _processes_in(tmp_path), "a forked run outlived the timeout"


def _processes_in(folder: Path) -> list[int]:
    """Live processes (not zombies) whose working directory is inside ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and cwd.is_relative_to(folder):
            found.append(int(entry.name))
    return found


def test_pytest_collects_no_repository_file() -> None:
    """The bundled repositories are data: our own pytest run imports none of their files."""
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTEST_ADDOPTS": "", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "collimate_envs/tasks/repos",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    collected = [line for line in proc.stdout.splitlines() if "::" in line]
    assert collected, proc.stdout + proc.stderr
    assert all(line.startswith("collimate_envs/tasks/repos/_") for line in collected), collected


# -- the file format's errors ---------------------------------------------------------------------

_GOOD = """=== problem_statement ===
f() is wrong.
=== file m.py ===
x = 1
=== patch ===
diff --git a/m.py b/m.py
=== test_patch ===
diff --git a/t.py b/t.py
=== FAIL_TO_PASS ===
t.py::a
=== PASS_TO_PASS ===
"""


def test_a_good_file_parses() -> None:
    task = parse_task("# comment\n" + _GOOD, name="demo")
    assert task.files == {"m.py": "x = 1\n"} and task.fail_to_pass == ("t.py::a",)
    assert task.pass_to_pass == () and task.test_cmd is None


@pytest.mark.parametrize(
    ("text", "name", "message"),
    [
        (_GOOD, "Not_A_Name", "is not lowercase words"),
        ("stray\n" + _GOOD, "demo", "text before the first section marker"),
        (_GOOD + "=== bogus ===\n", "demo", "unknown section"),
        (_GOOD + "=== patch ===\ndiff --git a/x b/x\n", "demo", "'patch' appears twice"),
        (_GOOD.replace("=== PASS_TO_PASS ===\n", ""), "demo", "missing sections: PASS_TO_PASS"),
        (_GOOD.replace("m.py ===", "../m.py ==="), "demo", "must be relative and plain"),
        (_GOOD.replace("m.py ===", "/etc/m.py ==="), "demo", "must be relative and plain"),
        (_GOOD + "=== file m.py ===\n", "demo", "'m.py' appears twice"),
        (_GOOD.replace("=== file m.py ===\nx = 1\n", ""), "demo", "no files"),
        (_GOOD.replace("f() is wrong.", " "), "demo", "statement is empty"),
        (_GOOD.replace("diff --git a/m.py b/m.py", "oops"), "demo", "'patch' is not a git diff"),
    ],
)
def test_malformed_files_are_rejected(text: str, name: str, message: str) -> None:
    with pytest.raises(TaskFormatError, match=re.escape(message)):
        parse_task(text, name=name)
