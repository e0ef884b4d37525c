"""``python -m collimate_rl.node serve [flags]``: run the local sandbox node."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from collimate_rl.node.server import main as serve_main


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch the ``serve`` subcommand (the only one)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "serve":
        print(
            "usage: python -m collimate_rl.node serve [flags]  (see serve --help)", file=sys.stderr
        )
        return 2
    return serve_main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
