"""The ``collimate`` command line.

>>> main(["--version"])
collimate-rl ...
0
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from collimate_rl._version import __version__

__all__ = ["main"]


def _serve(argv: Sequence[str]) -> int:
    from collimate_rl.node.server import main as serve_main

    return serve_main(list(argv))


def _demo(argv: Sequence[str]) -> int:
    from collimate_envs.demo import main as demo_main

    return demo_main(list(argv))


_COMMANDS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "serve": (_serve, "run the local sandbox node (see `collimate serve --help`)"),
    "demo": (_demo, "grade a GRPO group of completions on an embedded local node"),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``collimate`` command; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in _COMMANDS:
        run, _ = _COMMANDS[args[0]]
        return run(args[1:])
    parser = argparse.ArgumentParser(
        prog="collimate",
        description="Sandboxed code execution for RL post-training.",
        epilog="commands:\n"
        + "\n".join(f"  {name:<8} {help_}" for name, (_, help_) in _COMMANDS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("command", nargs="?", help="one of: " + ", ".join(_COMMANDS))
    ns = parser.parse_args(args)
    if ns.version:
        print(f"collimate-rl {__version__}")
        return 0
    if ns.command is None:
        parser.print_help()
        return 0
    parser.error(f"unknown command {ns.command!r}; choose from {', '.join(_COMMANDS)}")
    return 2  # pragma: no cover - parser.error exits


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
