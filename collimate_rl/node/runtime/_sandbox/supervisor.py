"""The in-sandbox runtime's entry script: ``supervisor.py master|bake ...``.

The node starts it as ``python -I -S -B supervisor.py master SOCK_DIR -`` with
the config on stdin (a template's fork-server) or ``... supervisor.py bake
CONFIG`` (a one-shot bake), inside the template's container, where ``-I`` keeps
this folder off ``sys.path``. So that every module here can use plain relative
imports, both in the sandbox and on the host (where this folder is the package
``collimate_rl.node.runtime._sandbox``), this script loads its own folder as
the package :data:`PACKAGE` and runs the command from there. That is the one
way the modules find each other; nothing loads a sibling by path.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

#: The package name of this folder inside the sandbox.
PACKAGE = "collimate_sandbox"
_COMMANDS = {"master": "master", "bake": "bake"}


def load_package() -> str:
    """Register this folder as a package (once) and return its name."""
    if __package__:  # imported on the host: already a package
        return __package__
    if PACKAGE not in sys.modules:
        here = os.path.dirname(os.path.abspath(__file__))
        spec = importlib.util.spec_from_file_location(
            PACKAGE, os.path.join(here, "__init__.py"), submodule_search_locations=[here]
        )
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = package
        spec.loader.exec_module(package)
    return PACKAGE


def default_signals() -> None:
    """Undo the signals ignored by whoever started the node (``nohup``, a shell's background
    job): every process of every sandbox would inherit them, and ``kill -HUP`` or Ctrl-C
    would do nothing to an exec. Python's own ignored SIGPIPE and SIGXFSZ stay."""
    import signal

    keep = {signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE, signal.SIGXFSZ}
    for sig in signal.valid_signals():
        if sig < 32 and sig not in keep and signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)


def main(argv: list[str]) -> int:
    default_signals()
    if not argv or argv[0] not in _COMMANDS:
        print(
            "usage: supervisor.py master SOCK_DIR CONFIG_JSON|- | bake CONFIG_JSON", file=sys.stderr
        )
        return 2
    module = importlib.import_module(f"{load_package()}.{_COMMANDS[argv[0]]}")
    return int(module.main(argv[1:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
