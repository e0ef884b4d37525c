"""The bundled agentic tasks for ``collimate/Shell-v0`` (original, small, SWE-style)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SHELL_TASKS", "ShellCheck", "ShellTask"]


@dataclass(frozen=True)
class ShellCheck:
    """How a finished workspace is graded.

    ``entry`` set: the Python module at ``path`` is graded with assert-style
    ``tests`` calling ``entry`` (through the unforgeable grading oracle, in a
    fresh sandbox, so nothing else the agent left in its workspace can interfere).
    ``entry`` unset: the file at ``path`` must equal ``expected`` (after stripping
    trailing whitespace).
    """

    path: str
    tests: str = ""
    entry: str | None = None
    expected: str = ""

    def to_reward_spec(self) -> Any:
        from collimate_rl.grading import UnitTestReward

        if self.entry is None:
            raise ValueError(f"the check of {self.path!r} compares file contents; it has no spec")
        return UnitTestReward(tests=self.tests, entry=self.entry)


@dataclass(frozen=True)
class ShellTask:
    task_id: str
    instructions: str
    files: dict[str, str] = field(default_factory=dict)
    check: ShellCheck = field(default_factory=lambda: ShellCheck(path=""))
    difficulty: str = "easy"

    @property
    def prompt(self) -> str:
        listing = "\n".join(f"  {path}" for path in sorted(self.files)) or "  (empty)"
        return (
            f"{self.instructions}\n\nYour workspace (the current directory) contains:\n{listing}\n\n"
            "Each reply is one shell command, run in the workspace. To replace a file, reply\n"
            "`write <path>` followed by a newline and the new content. Reply `submit` when done."
        )


SHELL_TASKS: tuple[ShellTask, ...] = (
    ShellTask(
        task_id="shell/fix-median",
        instructions="`stats.py` has a bug: `median` is wrong for lists of even length. Fix it.",
        files={
            "stats.py": (
                "def median(values):\n"
                "    ordered = sorted(values)\n"
                "    return ordered[len(ordered) // 2]\n"
            ),
            "test_stats.py": (
                "from stats import median\n\n"
                "assert median([3, 1, 2]) == 2\n"
                "assert median([4, 1, 3, 2]) == 2.5\n"
                "print('ok')\n"
            ),
        },
        check=ShellCheck(
            path="stats.py",
            entry="median",
            tests=(
                "assert median([3, 1, 2]) == 2\n"
                "assert median([4, 1, 3, 2]) == 2.5\n"
                "assert median([7]) == 7\n"
                "assert median([10, -10]) == 0\n"
                "assert median([5, 5, 1, 9, 2, 8]) == 5\n"
            ),
        ),
    ),
    ShellTask(
        task_id="shell/count-lines",
        instructions=(
            "Count the lines of `data/log.txt` that contain the word ERROR and write "
            "the count (just the number) to `answer.txt`."
        ),
        files={
            "data/log.txt": (
                "INFO start\nERROR disk full\nWARN slow\nERROR timeout\n"
                "INFO retry\nERROR disk full\nINFO done\n"
            )
        },
        check=ShellCheck(path="answer.txt", expected="3"),
    ),
    ShellTask(
        task_id="shell/implement-slugify",
        difficulty="medium",
        instructions=(
            "Implement `slugify(title)` in `text.py`: lower-case the title, replace every run of "
            "characters that are not ASCII letters or digits with a single `-`, and strip `-` "
            "from both ends. `README.md` has examples."
        ),
        files={
            "text.py": "def slugify(title):\n    raise NotImplementedError\n",
            "README.md": (
                "slugify('Hello, World!') == 'hello-world'\nslugify('  A  B  ') == 'a-b'\n"
            ),
        },
        check=ShellCheck(
            path="text.py",
            entry="slugify",
            tests=(
                "assert slugify('Hello, World!') == 'hello-world'\n"
                "assert slugify('  A  B  ') == 'a-b'\n"
                "assert slugify('already-a-slug') == 'already-a-slug'\n"
                "assert slugify('C++ & Python 3.12') == 'c-python-3-12'\n"
                "assert slugify('---') == ''\n"
            ),
        ),
    ),
    ShellTask(
        task_id="shell/fix-config",
        instructions=(
            "`config.ini` sets `retries` to a negative number, which the service rejects. "
            "Write the corrected file with `retries = 3`, keeping every other line unchanged, "
            "to `config.ini`."
        ),
        files={"config.ini": "[service]\nname = api\nretries = -1\ntimeout = 30\n"},
        check=ShellCheck(
            path="config.ini", expected="[service]\nname = api\nretries = 3\ntimeout = 30"
        ),
    ),
    ShellTask(
        task_id="shell/merge-intervals",
        difficulty="medium",
        instructions=(
            "Finish `intervals.py`: `merge(intervals)` takes a list of `[start, end]` pairs "
            "(start <= end) and returns the merged, sorted list of overlapping or touching "
            "intervals."
        ),
        files={
            "intervals.py": "def merge(intervals):\n    # TODO\n    return intervals\n",
        },
        check=ShellCheck(
            path="intervals.py",
            entry="merge",
            tests=(
                "assert merge([]) == []\n"
                "assert merge([[1, 3], [2, 6], [8, 10]]) == [[1, 6], [8, 10]]\n"
                "assert merge([[5, 6], [1, 2]]) == [[1, 2], [5, 6]]\n"
                "assert merge([[1, 4], [4, 5]]) == [[1, 5]]\n"
                "assert merge([[1, 10], [2, 3], [4, 5]]) == [[1, 10]]\n"
            ),
        ),
    ),
)
