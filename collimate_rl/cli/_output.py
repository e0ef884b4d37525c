"""Everything the CLI prints, and the one place that turns exceptions into exit codes.

Humans get rich tables on stdout and progress bars on stderr (only when stderr is a
terminal); ``--json`` gets one JSON document on stdout and no progress. Errors go
to stderr as ``collimate <command>: error: ...``; with ``--json`` an
``{"error": ...}`` document is also printed on stdout.

>>> exit_code_for(FileNotFoundError("samples.jsonl")), exit_code_for(ValueError("bad"))
(2, 2)
>>> from collimate_rl.errors import CollimateTransportError
>>> exit_code_for(CollimateTransportError("connection refused"))
3
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from collimate_rl.errors import (
    CollimateAuthError,
    CollimateError,
    CollimateNotFoundError,
    CollimateServerError,
    CollimateTaskError,
    GatewayError,
)

__all__ = [
    "EXIT_CODES_HELP",
    "FAILED",
    "INFRA",
    "INTERRUPTED",
    "OK",
    "USAGE",
    "Output",
    "exit_code_for",
    "run_guarded",
]

#: Success (for ``exec``: the command exited 0).
OK: Final = 0
#: What was checked failed: a grade that did not pass, a replay that did not
#: reproduce, a draining node, a failed bake.
FAILED: Final = 1
#: Bad usage or input: unknown flags, missing or malformed files, unknown task set/task/template.
USAGE: Final = 2
#: The node or gateway is unreachable, refused the work, or failed (infrastructure).
INFRA: Final = 3
#: Interrupted (Ctrl-C); ``eval`` keeps what it graded and resumes from it.
INTERRUPTED: Final = 130

EXIT_CODES_HELP: Final = f"""\
exit codes:
  {OK}    success
  {FAILED}    the thing checked failed (grade not passed, replay not reproduced,
       node draining, bake failed)
  {USAGE}    usage error or bad input (missing/malformed file, unknown task set)
  {INFRA}    node/gateway unreachable or infrastructure error
  {INTERRUPTED}  interrupted
  `exec` exits with the sandboxed command's own status instead (124 on timeout)."""

#: Console width when stdout is not a terminal.
_PIPE_WIDTH: Final = 200

#: Server error codes that mean "your request was wrong" rather than "the node failed".
_BAD_REQUEST_CODES: Final = frozenset(
    {
        "bad_request",
        "template_id_required",
        "invalid_seed",
        "template_exists",
        "payload_too_large",
        "no_template",
        "no_such_session",
        "session_gone",
        "not_found",
    }
)


def exit_code_for(exc: BaseException) -> int | None:
    """The exit code for an exception, or ``None`` for a bug (let it raise).

    Task-set and usage errors subclass ``ValueError``/``KeyError`` as well as
    :class:`~collimate_rl.errors.CollimateError`, so they are checked first.
    """
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED
    if isinstance(exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
        return USAGE
    if isinstance(exc, (ValueError, KeyError)):
        return USAGE
    if isinstance(exc, ImportError):
        return INFRA
    if isinstance(exc, CollimateServerError):
        if exc.error_code == "bake_failed":
            return FAILED
        if isinstance(exc, CollimateNotFoundError) or exc.error_code in _BAD_REQUEST_CODES:
            return USAGE
        return INFRA
    if isinstance(exc, CollimateTaskError):
        return FAILED
    if isinstance(exc, CollimateError):
        return INFRA
    return None


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return str(value)


def _hint(exc: BaseException, code: int) -> str:
    if isinstance(exc, CollimateAuthError) and not isinstance(exc, GatewayError):
        return " (the node requires a token: pass --token-file FILE or set $COLLIMATE_SERVE_TOKEN)"
    if code == INFRA:
        return (
            " (is the node up? pass --url, or set $COLLIMATE_SERVE_URL / $COLLIMATE_SERVE_SOCKET;"
            " without them a local node is started for the command)"
        )
    return ""


class Output:
    """The consoles of one command run.

    Args:
        command: the command's name, for error messages.
        json_mode: print JSON on stdout, no tables or progress.
    """

    def __init__(self, command: str, *, json_mode: bool = False) -> None:
        self.command = command
        self.json_mode = json_mode
        # Resolved per run (not at import) so redirected/captured streams are honoured.
        # Piped output is not wrapped at rich's 80-column default (ids would fold).
        width = None if sys.stdout.isatty() else _PIPE_WIDTH
        self.out = Console(file=sys.stdout, highlight=False, soft_wrap=False, width=width)
        self.err = Console(file=sys.stderr, highlight=False, soft_wrap=True)

    def emit_json(self, data: Any) -> None:
        """Print one JSON document on stdout."""
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
        sys.stdout.flush()

    def print(self, text: str, *, markup: bool = False) -> None:
        """Print text on stdout (human mode)."""
        self.out.print(text, markup=markup, highlight=False)

    def note(self, text: str) -> None:
        """A status line on stderr (dropped with ``--json``)."""
        if not self.json_mode:
            self.err.print(text, style="dim", markup=False, highlight=False)

    def table(
        self, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None
    ) -> None:
        """Print a table on stdout (human mode)."""
        table = Table(title=title, title_justify="left")
        for name in columns:
            table.add_column(name, overflow="fold")
        for row in rows:
            table.add_row(*(_cell(value) for value in row))
        self.out.print(table)

    def fail(self, exc: BaseException, code: int) -> None:
        """Report an error: a line on stderr, and a JSON error document with ``--json``."""
        message = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc)
        self.err.print(
            f"collimate {self.command}: error: {message}{_hint(exc, code)}",
            markup=False,
            highlight=False,
        )
        if self.json_mode:
            self.emit_json(
                {"error": {"type": type(exc).__name__, "message": message, "exit_code": code}}
            )

    @property
    def shows_progress(self) -> bool:
        """Progress bars are drawn only for humans at a terminal."""
        return not self.json_mode and sys.stderr.isatty()

    @contextlib.contextmanager
    def progress(self, description: str, total: int) -> Iterator[Callable[[int, int], None]]:
        """A ``progress(done, total)`` callback drawing a bar on stderr (or doing nothing)."""
        if not self.shows_progress or total <= 0:
            yield lambda done, total: None
            return
        bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=self.err,
            transient=True,
        )
        with bar:
            task = bar.add_task(description, total=total)
            yield lambda done, total: bar.update(task, completed=done, total=total)


def run_guarded(command: str, json_mode: bool, body: Callable[[Output], int]) -> int:
    """Run a command body, mapping known exceptions to exit codes (bugs still raise)."""
    out = Output(command, json_mode=json_mode)
    try:
        return body(out)
    except BaseException as exc:
        code = exit_code_for(exc)
        if code is None:
            raise
        out.fail(exc, code)
        return code
