"""``collimate/Shell-v0``: an agent works in a persistent sandbox until it submits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym

from collimate_envs import info as keys
from collimate_envs._backend import Backend
from collimate_envs._checks import check_render_mode
from collimate_envs._grading import grade_or_flag
from collimate_envs._groups import SessionLedger
from collimate_envs._seeding import episode_seed
from collimate_envs._shell_tasks import SHELL_TASKS, ShellTask
from collimate_envs._tasks import TaskChooser
from collimate_envs.spaces import completion_space, printable, prompt_space

__all__ = ["SUBMIT", "ShellEnv", "parse_action"]

SUBMIT = "submit"
_OUTPUT_TAIL = 8000


def parse_action(action: str) -> tuple[str, str, str]:
    """Split an action into ``(kind, argument, content)``.

    >>> parse_action("ls -la")
    ('run', 'ls -la', '')
    >>> parse_action("write notes.txt\\nhello\\n")
    ('write', 'notes.txt', 'hello\\n')
    >>> parse_action("  submit ")
    ('submit', '', '')
    """
    if action.strip() == SUBMIT:
        return "submit", "", ""
    first, _, rest = action.partition("\n")
    head = first.strip()
    if head.startswith("write ") and head[6:].strip():
        return "write", head[6:].strip(), rest
    return "run", action, ""


class ShellEnv(gym.Env[str, str]):
    """Agentic tasks in a persistent sandbox session, graded SWE-style when the agent submits.

    ## Description
    Reset creates a session holding the task's files (the workspace, the
    session's ``/sandbox``). Each action is a shell command run there, a file
    edit (``write <path>`` then the content), or ``submit``. Files persist
    across steps.

    ## Action Space
    ``Text`` of any printable characters, up to 131,072.

    ## Observation Space
    ``Text``: first the task and the workspace listing, then each command's
    merged output (tail, 8,000 chars) and exit code.

    ## Rewards
    0 until the episode ends; then the task's check on the workspace: for a code
    file, the fraction of the task's hidden tests it passes, graded by the same
    oracle as ``collimate/Code-v0`` in a fresh sandbox; for an output file, 1.0
    if it holds the expected content, else 0.0.

    ## Episode End
    Terminates on ``submit``; truncates after ``max_turns`` actions (the check
    still runs, so the last state is graded).

    ## Arguments
    ``tasks`` (a sequence of ``ShellTask``; default: the bundled set),
    ``max_turns`` (default 20), ``command_timeout`` (seconds, default 20),
    ``template``, ``client`` / ``base_url`` / ``api_key`` / ``unix_socket``,
    ``render_mode`` (``"ansi"``).

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        tasks: Sequence[ShellTask] | None = None,
        *,
        max_turns: int = 20,
        command_timeout: int = 20,
        template: str = "python3",
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        unix_socket: str | None = None,
        render_mode: str | None = None,
    ) -> None:
        check_render_mode(render_mode, self.metadata)
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.render_mode = render_mode
        self.tasks = TaskChooser(name="shell", tasks=tuple(tasks or SHELL_TASKS))
        self.max_turns = max_turns
        self.command_timeout = command_timeout
        self.template = template
        self.backend = Backend.from_kwargs(
            client, {"base_url": base_url, "api_key": api_key, "unix_socket": unix_socket}
        )
        self.observation_space = prompt_space()
        self.action_space = completion_space()
        self._ledger: SessionLedger | None = None
        self._session: str | None = None
        self._task: ShellTask | None = None
        self._turn = 0
        self._transcript: list[str] = []

    @property
    def ledger(self) -> SessionLedger:
        if self._ledger is None:
            self._ledger = SessionLedger(self.backend.client)
            self._ledger.attach_to(self)
        return self._ledger

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._end_session()
        task: ShellTask = self.tasks.choose(self.np_random, options)
        client = self.backend.client
        created = client.create_session(self.template)
        self._session = str(created["session_id"])
        self.ledger.created(self._session)
        files = [{"path": path, "content": content} for path, content in task.files.items()]
        if files:
            client.session_exec(
                self._session, command="true", files=files, timeout_seconds=self.command_timeout
            )
        self._task, self._turn = task, 0
        self._transcript = [task.prompt]
        return task.prompt, {keys.TASK_ID: task.task_id, keys.TURN: 0}

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._task is None or self._session is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        kind, arg, content = parse_action(action)
        self._turn += 1
        info: dict[str, Any] = {keys.TASK_ID: self._task.task_id, keys.TURN: self._turn}
        if kind == "submit":
            return self._finish(info, "submitted", terminated=True)
        client = self.backend.client
        if kind == "write":
            resp = client.session_exec(
                self._session,
                command="true",
                files=[{"path": arg, "content": content}],
                timeout_seconds=self.command_timeout,
            )
            obs = f"wrote {arg} ({len(content)} chars)"
        else:
            resp = client.session_exec(
                self._session, command=arg, timeout_seconds=self.command_timeout
            )
            output = str(resp["stdout"])[-_OUTPUT_TAIL:]
            obs = printable(f"$ {arg[:_OUTPUT_TAIL]}\n{output}\n[exit {resp['exit_code']}]")
        info[keys.EXIT_CODE] = int(resp["exit_code"])
        self._transcript.append(obs)
        if self._turn >= self.max_turns:
            return self._finish(info, obs, terminated=False)
        return obs, 0.0, False, False, info

    def _finish(
        self, info: dict[str, Any], obs: str, *, terminated: bool
    ) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        assert self._task is not None and self._session is not None
        reward, passed, total = self._check(self._task, self._session)
        info.update({keys.PASSED: passed, keys.TOTAL: total})
        self._end_session()
        self._task = None
        self._transcript.append(f"[episode over: reward {reward:.3f}]")
        return obs, reward, terminated, not terminated, info

    def _check(self, task: ShellTask, session: str) -> tuple[float, int, int]:
        client = self.backend.client
        path = task.check.path.replace("'", "'\\''")
        resp = client.session_exec(
            session,
            command=f"test -f '{path}' && cat '{path}'",
            timeout_seconds=self.command_timeout,
        )
        if int(resp["exit_code"]) != 0:
            return 0.0, 0, 1
        produced = str(resp["stdout"])
        if task.check.entry is None:
            ok = produced.rstrip() == task.check.expected.rstrip()
            return float(ok), int(ok), 1
        seed = episode_seed("vanilla", self.np_random, task.task_id, None)
        result = grade_or_flag(
            client,
            self.template,
            produced,
            task.check.to_reward_spec(),
            seed=seed,
            timeout_seconds=self.command_timeout,
            policy="raise",
        )
        return float(result.reward), int(result.passed), int(result.total)

    def _end_session(self) -> None:
        if self._session is not None:
            self.ledger.delete(self._session)
            self._session = None

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n\n".join(self._transcript)

    def close(self) -> None:
        self._end_session()
        super().close()
