"""The reward of a repository task: the agent's changes, graded in a fresh fork with the hidden tests.

1. The agent's processes are gone: the node ends every process an exec leaves behind
   when the exec ends, and the env runs nothing while it grades.
2. Its changes are the files under the repository that differ from the pristine listing
   (caches and ``.git`` left out), read byte-exact: a changeset, shown as a diff.
3. A changeset that touches what decides how tests run is refused (:mod:`._policy`).
4. Otherwise a fresh fork of the pristine sandbox gets the changeset, the hidden tests
   and the report plugin (in a folder outside the repository), and runs the test command.
   The agent's sandbox is never used for grading, and never sees the hidden tests.

The reward is 1.0 when every test the task names shows its expected outcome (pass, for
every FAIL_TO_PASS and PASS_TO_PASS test), else 0.0; ``partial=True`` gives the fraction.

Every grade says ``forgeable=True``: the tests run in the same Python process as the code
under test, which can rewrite the runner in memory (docs/repo-tasks.md, "What remains").
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from collimate_envs.repo._patch import Changeset, make_patch
from collimate_envs.repo._policy import refusal
from collimate_envs.repo._prepared import PreparedTask
from collimate_envs.repo._runner import parse_run, plugin_source, test_script
from collimate_envs.repo._testids import canonical, outcomes_from_log
from collimate_envs.repo._workspace import (
    MAX_CHANGE_BYTES,
    changed_paths,
    list_files,
    read_files,
    write_files_script,
)
from collimate_rl.errors import CollimateTaskError

__all__ = ["RepoGrade", "collect_changes", "grade_changes"]

_PRIVATE_DIR = "/tmp/.collimate-grade"


@dataclass(frozen=True)
class RepoGrade:
    """One grade of an agent's changes.

    Attributes:
        reward: 1.0 or 0.0 (the fraction with ``partial``).
        passed, total: tests with their expected outcome, tests named by the task.
        tests: test id -> outcome (``passed``, ``failed``, ``error``, ``skipped``,
            ``missing``; ``not run`` when the changes were refused).
        diff: the agent's changes as a unified diff.
        rejected: why the changes were refused (``None``: they were graded).
        log_tail: the end of the test runner's output.
        exit_code: the runner's exit code (``None``: it did not run).
        forgeable: always ``True`` (see the module docstring).
    """

    reward: float
    passed: int
    total: int
    tests: dict[str, str] = field(default_factory=dict)
    diff: str = ""
    rejected: str | None = None
    log_tail: str = ""
    exit_code: int | None = None
    forgeable: bool = True


def collect_changes(
    prepared: PreparedTask, member: Any, *, timeout: int = 60
) -> tuple[Changeset, set[str]]:
    """The member's changeset against the pristine state, and the changed paths that are links.

    Raises:
        CollimateTaskError: the changed files could not be read (what the agent did to them).
    """
    workdir = prepared.task.workdir
    try:
        now = list_files(member, workdir, timeout=timeout)
    except CollimateTaskError:
        now = {}  # the repository folder itself is gone: everything was deleted
    paths = changed_paths(prepared.listing, now)
    links = {p for p in paths if now.get(p, ("", ""))[0] == "l"}
    readable = [p for p in paths if p in now and p not in links]
    content = read_files(member, workdir, readable, timeout=timeout) if readable else {}
    changes: Changeset = {}
    for path in paths:
        if path in links:
            changes[path] = b""
        elif path in now:
            if path not in content:
                raise CollimateTaskError(f"the changed file {path!r} could not be read")
            changes[path] = content[path]
        else:
            changes[path] = None
    return changes, links


def _refused(prepared: PreparedTask, reason: str, diff: str) -> RepoGrade:
    tests = {t: "not run" for t in prepared.task.tests}
    return RepoGrade(0.0, 0, len(tests), tests, diff=diff, rejected=reason)


def grade_changes(
    prepared: PreparedTask,
    member: Any,
    *,
    partial: bool = False,
    test_cmd: str | None = None,
    test_timeout: int = 300,
) -> RepoGrade:
    """Grade what ``member`` (a sandbox forked from ``prepared``) changed; see the module docstring.

    Raises:
        CollimateError: an infrastructure failure (never folded into a reward).
    """
    task = prepared.task
    try:
        changes, links = collect_changes(prepared, member)
    except CollimateTaskError as exc:
        return _refused(prepared, f"the changed files could not be read: {exc}", "")
    pristine = prepared.pristine_bytes(changes)
    diff = make_patch({p: pristine.get(p) for p in changes}, changes)
    size = sum(len(d) for d in changes.values() if d is not None)
    if size > MAX_CHANGE_BYTES:
        return _refused(prepared, f"the changes hold {size} bytes, over {MAX_CHANGE_BYTES}", diff)
    reason = refusal(changes, pristine, hidden=set(task.hidden_paths), links=links)
    if reason is not None:
        return _refused(prepared, reason, diff)
    outcomes, log, code = _run(prepared, {**changes, **prepared.hidden}, test_cmd, test_timeout)
    return _score(task.tests, task, outcomes, log, code, diff=diff, partial=partial)


def _run(
    prepared: PreparedTask, files: Changeset, test_cmd: str | None, timeout: int
) -> tuple[dict[str, str], str, int | None]:
    task = prepared.task
    nonce = secrets.token_hex(16)
    scripts = write_files_script(task.workdir, files)
    scripts[-1] += "\n".join(
        write_files_script(_PRIVATE_DIR, {"collimate_repo_report.py": plugin_source()})
    )
    command = test_cmd or task.test_cmd
    scripts[-1] += "\n" + test_script(
        task.workdir,
        [canonical(t) for t in task.tests],
        nonce=nonce,
        test_cmd=command,
        private_dir=_PRIVATE_DIR,
    )
    (fork,) = prepared.fork(1)
    try:
        for script in scripts[:-1]:
            staged = fork.exec(command=script, timeout_seconds=60)
            if staged.exit_code != 0:
                raise CollimateTaskError(
                    f"cannot stage the changes in the grading fork: {staged.stdout[-300:]}"
                )
        result = fork.exec(command=scripts[-1], timeout_seconds=timeout)
    finally:
        fork.close()
    if result.exit_code == -1:
        return {}, f"the tests timed out after {timeout}s\n" + result.stdout[-4000:], None
    if result.exit_code != 0:
        raise CollimateTaskError(
            f"the grading fork could not run the tests (exit {result.exit_code})",
            exit_code=result.exit_code,
            output=result.stdout[-2000:],
        )
    outcomes, log, code = parse_run(result.stdout, nonce)
    if outcomes is None:
        outcomes = outcomes_from_log(log)
    return {canonical(k): v for k, v in outcomes.items()}, log, code


def _score(
    tests: Sequence[str],
    task: Any,
    outcomes: dict[str, str],
    log: str,
    code: int | None,
    *,
    diff: str,
    partial: bool,
) -> RepoGrade:
    report: dict[str, str] = {}
    for test_id in tests:
        key = canonical(test_id)
        outcome = outcomes.get(key)
        if outcome is None:
            module = key.split("::", 1)[0]
            outcome = "error" if outcomes.get(module) == "error" else "missing"
        report[test_id] = outcome
    good = sum(
        (report[t] == "passed") if task.must_pass(t) else (report[t] in ("failed", "error"))
        for t in tests
    )
    total = len(tests)
    if total == 0:
        reward = 0.0
    elif partial:
        reward = good / total
    else:
        reward = float(good == total)
    return RepoGrade(reward, good, total, report, diff=diff, log_tail=log[-8000:], exit_code=code)
