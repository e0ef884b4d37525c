"""``collimate paths FRAMEWORK``: where a framework's config should point to load our hook.

verl loads ``custom_reward_function.path`` as a *file*; slime loads
``--custom-rm-path`` as a dotted ``module.function`` name. Each is printed alone on
stdout, so a shell can take it: ``path=$(collimate paths verl)``.

>>> hook_path("slime")
'collimate_rl.slime.reward_func'
>>> hook_path("verl").endswith("collimate_rl/verl.py")
True
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from collimate_rl.cli._output import OK, Output

__all__ = ["FRAMEWORKS", "hook_path", "register"]

#: What each framework is given, and the help line that says so.
FRAMEWORKS: dict[str, str] = {
    "verl": "the file of compute_score / compute_score_batch (reward.custom_reward_function.path)",
    "slime": "the dotted name of the reward hook (--custom-rm-path)",
}


def hook_path(framework: str) -> str:
    """The path ``framework``'s config takes (see :data:`FRAMEWORKS`)."""
    if framework == "slime":
        return "collimate_rl.slime.reward_func"
    if framework == "verl":
        from collimate_rl import verl

        return str(Path(verl.__file__).resolve())
    raise ValueError(f"unknown framework {framework!r}; one of {', '.join(FRAMEWORKS)}")


def paths(args: argparse.Namespace, out: Output) -> int:
    sys.stdout.write(hook_path(args.framework) + "\n")
    return OK


def register(sub: Any) -> None:
    """Add ``paths`` to the ``collimate`` sub-parsers."""
    p = sub.add_parser(
        "paths",
        help="print where a trainer's config points to load our reward (verl: a file, "
        "slime: a dotted name)",
        description="\n".join(f"{name}: {what}" for name, what in FRAMEWORKS.items()),
    )
    p.add_argument("framework", choices=sorted(FRAMEWORKS))
    p.set_defaults(run=paths, json=False)
