"""Part 0 of the shipped harness: trust only the interpreter's own import paths.

Runs first, before any other import of the program. The runtime may have put
the working directory (``/sandbox``) or a user site on ``sys.path``; in a
reused session an earlier candidate could have planted ``binascii.py`` there,
which the harness would otherwise import into the trusted process.
Importing this module as part of the package changes nothing.
"""

from __future__ import annotations

import os
import sys


def _trust_only_the_stdlib() -> None:
    """Keep only ``sys.path`` entries inside the interpreter's prefixes."""
    roots = {
        os.path.realpath(p)
        for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    }
    kept = []
    for entry in sys.path:
        real = os.path.realpath(entry) if entry and os.path.isabs(entry) else ""
        if real and any(real == root or real.startswith(root + os.sep) for root in roots):
            kept.append(entry)
    sys.path[:] = kept


if __name__ == "__main__":
    _trust_only_the_stdlib()
