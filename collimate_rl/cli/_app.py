"""The ``collimate`` command: the argument parser and the dispatch to each command."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from collimate_rl._version import __version__
from collimate_rl.cli import _eval, _exec, _grade, _images, _node, _paths, _top
from collimate_rl.cli._output import EXIT_CODES_HELP, INFRA, run_guarded
from collimate_rl.cli._target import add_target_options

__all__ = ["build_parser", "main"]


def _serve(argv: Sequence[str]) -> int:
    from collimate_rl.node.server import main as serve_main

    return serve_main(list(argv))


def _doctor(argv: Sequence[str]) -> int:
    from collimate_rl.node.runtime.surface import main as doctor_main

    return doctor_main(list(argv))


def _demo(argv: Sequence[str]) -> int:
    from collimate_envs.demo import main as demo_main

    return demo_main(list(argv))


def _bench(argv: Sequence[str]) -> int:
    try:
        bench = importlib.import_module("collimate_rl.bench")
    except ModuleNotFoundError as exc:
        if exc.name not in ("collimate_rl.bench", "collimate_rl"):
            raise
        print(
            "collimate bench: error: the benchmark suite (collimate_rl.bench) is not part of "
            "this installation; run the scripts in benchmarks/ instead",
            file=sys.stderr,
        )
        return INFRA
    code: int = bench.main(list(argv))
    return code


#: Commands that parse their own arguments (``collimate serve --help`` is the node's).
_PASSTHROUGH: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "serve": (_serve, "run the local sandbox node in the foreground"),
    "bench": (_bench, "run the benchmark suite and print a table (--quick, --json)"),
    "demo": (_demo, "grade a GRPO group of completions on an embedded local node"),
    "doctor": (_doctor, "which isolation layers are active on this host (a probe in a sandbox)"),
}


def build_parser() -> argparse.ArgumentParser:
    """The ``collimate`` parser (the pass-through commands are listed, not parsed)."""
    parser = argparse.ArgumentParser(
        prog="collimate",
        description="Sandboxed code execution for RL post-training: run, grade and evaluate "
        "code on a collimate node.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON for machines")
    add_target_options(common)
    sub = parser.add_subparsers(dest="command_name", metavar="COMMAND")
    sub.add_parser("serve", help=_PASSTHROUGH["serve"][1], add_help=False)
    _node.register(sub, common)
    _images.register(sub, common)
    _exec.register(sub, common)
    _grade.register(sub, common)
    _eval.register(sub, common)
    _top.register(sub, common)
    _paths.register(sub)
    for name in ("bench", "demo", "doctor"):
        sub.add_parser(name, help=_PASSTHROUGH[name][1], add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``collimate`` command; returns the process exit code (see ``--help``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in _PASSTHROUGH:
        run, _ = _PASSTHROUGH[args[0]]
        return run(args[1:])
    parser = build_parser()
    try:
        ns = parser.parse_args(args)
    except SystemExit as exc:  # --help, or a usage error (argparse printed it)
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    if ns.version:
        print(f"collimate-rl {__version__}")
        return 0
    if ns.command_name is None:
        parser.print_help()
        return 0
    return run_guarded(ns.command_name, ns.json, lambda out: int(ns.run(ns, out)))
