"""One agent's episode on a prepared task: its sandbox, its tools, its budgets, its grade.

Both ``collimate/Repo-v0`` and its group vector env drive agents through this class.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from collimate_envs.repo._actions import ActionError, ToolCall, parse_action
from collimate_envs.repo._editor import Editor, EditorError
from collimate_envs.repo._grader import RepoGrade, grade_changes
from collimate_envs.repo._prepared import PreparedTask
from collimate_envs.spaces import printable
from collimate_rl.sandbox import Sandbox

__all__ = ["Budgets", "Episode", "first_observation", "truncate_output"]


@dataclass(frozen=True)
class Budgets:
    """What an episode may spend before it is truncated (and graded as it stands).

    Attributes:
        max_turns: actions, malformed ones included.
        max_wall_seconds: seconds since reset (``None``: no limit).
        max_output_bytes: bytes of tool output shown to the agent over the episode.
        max_observation_chars: one observation's size; longer output keeps its head and
            tail around a marker saying how much was cut.
        command_timeout: the longest a ``bash`` call may run (its ``timeout`` is capped by it).
    """

    max_turns: int = 50
    max_wall_seconds: float | None = 1800.0
    max_output_bytes: int = 1 << 20
    max_observation_chars: int = 10000
    command_timeout: int = 60

    def __post_init__(self) -> None:
        if self.max_turns < 1 or self.max_output_bytes < 1 or self.max_observation_chars < 200:
            raise ValueError(
                "max_turns and max_output_bytes must be >= 1, max_observation_chars >= 200"
            )
        if self.command_timeout < 1:
            raise ValueError("command_timeout must be at least 1 second")


def truncate_output(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters: head and tail kept, a marker in between.

    >>> print(truncate_output("a" * 30 + "b" * 30, 40))
    aaaaaaaaaaaaaaaa
    [... 20 characters truncated ...]
    bbbbbbbbbbbbbbbbbbbbbbbb
    """
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    head = limit * 2 // 5
    return (
        f"{text[:head]}\n[... {cut} characters truncated ...]\n{text[len(text) - (limit - head) :]}"
    )


def first_observation(prepared: PreparedTask) -> str:
    """The task statement, with where the repository is and how to act."""
    task = prepared.task
    return printable(
        f"{task.problem_statement.strip()}\n\n"
        f"The repository is at {task.workdir} (the tools' working folder). Fix the issue by "
        "changing the repository's source; the hidden tests that grade you are not in it. "
        "Act with one tool call per turn (bash, str_replace_editor, submit), or reply with "
        "exactly one ```bash block. Call submit when you are done."
    )


@dataclass
class Episode:
    """One agent on one member sandbox (a fork of the task's pristine parent)."""

    prepared: PreparedTask
    member: Sandbox
    budgets: Budgets
    started: float = field(default_factory=time.monotonic)
    turn: int = 0
    output_bytes: int = 0
    transcript: list[str] = field(default_factory=list)
    editor: Editor = field(init=False)

    def __post_init__(self) -> None:
        self.editor = Editor(
            self.member, self.prepared.task.workdir, timeout=self.budgets.command_timeout
        )

    def act(self, action: Any) -> tuple[str, dict[str, Any], str | None]:
        """Run one action: ``(observation, info, why the episode ends or None)``.

        The reason is ``submitted``, ``turns``, ``wall_time`` or ``output_bytes``.
        Infrastructure failures raise.
        """
        self.turn += 1
        # Types stay the same on every step (vector envs batch them): "" and -1 mean none.
        info: dict[str, Any] = {"tool_call": None, "action_error": "", "exit_code": -1}
        try:
            call = parse_action(action)
        except ActionError as exc:
            call = None
            info["action_error"] = str(exc)
            observation = f"Your action could not be run: {exc}"
        if call is not None:
            info["tool_call"] = call.as_dict()
            if call.name == "submit":
                self.transcript.append("[submit]")
                return "", info, "submitted"
            observation = self._run(call, info)
        observation = printable(truncate_output(observation, self.budgets.max_observation_chars))
        self.output_bytes += len(observation.encode("utf-8"))
        self.transcript.append(observation)
        return observation, info, self._spent()

    def _run(self, call: ToolCall, info: dict[str, Any]) -> str:
        args = call.arguments
        if call.name == "bash":
            self.editor.forget()
            timeout = int(
                min(
                    args.get("timeout") or self.budgets.command_timeout,
                    self.budgets.command_timeout,
                )
            )
            workdir = shlex.quote(self.prepared.task.workdir)
            result = self.member.exec(
                command=f"cd {workdir} || exit 97\n{args['command']}",
                timeout_seconds=max(timeout, 1),
            )
            info["exit_code"] = result.exit_code
            if result.exit_code == -1:
                return f"{result.stdout}\n[the command timed out after {timeout}s and was killed]"
            return f"{result.stdout}\n[exit code {result.exit_code}]"
        try:
            return self.editor.run(args)
        except EditorError as exc:
            info["action_error"] = str(exc)
            return f"Error: {exc}"

    def _spent(self) -> str | None:
        if self.turn >= self.budgets.max_turns:
            return "turns"
        wall = self.budgets.max_wall_seconds
        if wall is not None and time.monotonic() - self.started >= wall:
            return "wall_time"
        if self.output_bytes >= self.budgets.max_output_bytes:
            return "output_bytes"
        return None

    def grade(self, *, partial: bool, test_cmd: str | None, test_timeout: int) -> RepoGrade:
        """Grade the member's changes in a fresh fork of the pristine parent."""
        return grade_changes(
            self.prepared,
            self.member,
            partial=partial,
            test_cmd=test_cmd,
            test_timeout=test_timeout,
        )

    def close(self) -> None:
        """Delete the member sandbox. Never raises."""
        self.member.close()


def grade_info(grade: RepoGrade, reason: str | None) -> dict[str, Any]:
    """What the final step's ``info`` adds: the grade, each test's outcome, the diff."""
    return {
        "passed": grade.passed,
        "total": grade.total,
        "tests": dict(grade.tests),
        "diff": grade.diff,
        "rejected": grade.rejected,
        "forgeable": grade.forgeable,
        "test_exit_code": grade.exit_code if grade.exit_code is not None else -1,
        "log_tail": grade.log_tail,
        "end": reason or "",
    }
