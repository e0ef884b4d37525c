"""What the master keeps of a box and of a worker's box connection, until they end.

``boxes.py`` makes and ends them; ``standby.py`` keeps exec boxes for their session's next exec.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BoxConn:
    """A worker's connection bound to one session."""

    sock: socket.socket
    key: str
    boxes: set[int] = field(default_factory=set)
    arm: bool = False  # when it closes (its exec is over), arm the session's next exec box
    image_worker: Any = None  # the image worker a grade of it holds (``image_zygote.py``)


@dataclass
class Box:
    """A box the master cloned, from its clone until it is reaped."""

    pid: int
    key: str
    slot: int  # the pooled network namespace, -1 for a fresh one
    conn: BoxConn | None = None  # None: a standby exec box nobody took yet
    ready_r: int = -1
    deadline: float = 0.0
    marshal: bool = False
    pipes: list[int] = field(default_factory=list)  # an exec box's pipe ends, until handed over
    line: socket.socket | None = None  # an exec box's line (it says "idle"; gets its pipes)
    gen: int = 0  # the session's upper layer when the box was cloned
