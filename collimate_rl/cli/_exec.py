"""``exec``: run a shell command, inline code or a file in a fresh sandbox.

The sandbox's output is printed as is (the node merges stderr into stdout) and the
process exits with the command's exit status: 124 when the guest timeout fired,
125 for a status outside 0-255. With ``--json`` the whole exec response is printed
instead (the exit status is the same).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Final

from collimate_rl.cli._egress import EGRESS_HELP, parse_egress
from collimate_rl.cli._output import Output
from collimate_rl.cli._target import open_client
from collimate_rl.errors import CollimateUsageError
from collimate_rl.sandbox import Sandbox

__all__ = ["TIMEOUT_EXIT", "exec_command", "read_source", "register"]

#: The exit status when the guest timeout fired (as coreutils ``timeout`` does).
TIMEOUT_EXIT: Final = 124
#: The exit status for a guest status that does not fit a process status.
ODD_EXIT: Final = 125


def read_source(path: str) -> str:
    """The text of ``path``, or of stdin for ``-``.

    Raises:
        FileNotFoundError: no such file.
        CollimateUsageError: a directory or a file that is not UTF-8 text.
    """
    if path == "-":
        return sys.stdin.read()
    file = Path(path)
    if not file.exists():
        raise FileNotFoundError(f"no such file: {path!r}")
    if not file.is_file():
        raise CollimateUsageError(f"{path!r} is not a file")
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CollimateUsageError(f"{path!r} is not UTF-8 text ({exc})") from None


def _what_to_run(args: argparse.Namespace) -> dict[str, Any]:
    given = [name for name in ("command", "code", "file") if getattr(args, name) is not None]
    if len(given) != 1:
        raise CollimateUsageError(
            "give exactly one of: a COMMAND, --code SOURCE, or --file PATH "
            f"(got {', '.join(given) or 'none'})"
        )
    if args.command is not None:
        return {"command": args.command}
    if args.code is not None:
        return {"code": args.code}
    return {"code": read_source(args.file)}


def _status(exit_code: int) -> int:
    if exit_code == -1:
        return TIMEOUT_EXIT
    return exit_code if 0 <= exit_code <= 255 else ODD_EXIT


def exec_command(args: argparse.Namespace, out: Output) -> int:
    """Run it and mirror the result."""
    if args.timeout < 1:
        raise CollimateUsageError("--timeout must be at least 1 second")
    what = _what_to_run(args)
    egress = parse_egress(args.egress) if args.egress is not None else None
    with (
        open_client(args, out.note) as client,
        Sandbox(args.template, client=client, egress=egress) as box,
    ):
        result = box.exec(**what, timeout_seconds=args.timeout, seed=args.seed)
    status = _status(result.exit_code)
    if out.json_mode:
        out.emit_json(dict(result.raw))
        return status
    sys.stdout.write(result.stdout)
    sys.stdout.flush()
    if result.stderr:
        sys.stderr.write(result.stderr)
    if result.exit_code == -1:
        out.note(f"timed out after {args.timeout}s (exit {TIMEOUT_EXIT})")
    return status


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``exec`` to the ``collimate`` sub-parsers."""
    p = sub.add_parser(
        "exec",
        parents=[common],
        help="run a command, code or a file in a fresh sandbox",
        description="Run a shell command, inline code or a file in a fresh sandbox; print its "
        "output and exit with its status (124 when the guest timeout fired, 125 for a status "
        "outside 0-255). With --json, print the exec response instead.",
    )
    p.add_argument("command", nargs="?", help="a shell command line, e.g. 'echo hi'")
    p.add_argument("--code", metavar="SOURCE", help="source code for the template's interpreter")
    p.add_argument("--file", metavar="PATH", help="run this file's code ('-' reads stdin)")
    p.add_argument("--template", default="python3", help="the template (default python3)")
    p.add_argument("--timeout", type=int, default=30, help="guest timeout in seconds (default 30)")
    p.add_argument("--seed", metavar="HEX", help="64 hex characters (default: a fresh seed)")
    p.add_argument("--egress", metavar="POLICY", help=EGRESS_HELP)
    p.set_defaults(run=exec_command)
