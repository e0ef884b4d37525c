"""A session's copy-on-write layers: the overlay's options, and freezing its upper layer.

A session's ``/sandbox`` is an overlay: ``u<gen>`` (writable, on the session's
size-limited tmpfs) over ``lowers`` (the frozen layers of its ancestors, then
the template's). A fork freezes ``u<gen>``: it becomes a lower layer of the
session and of every child, and the session continues on a fresh ``u<gen+1>``.

>>> overlay_options(["/l/1", "/l/0"], "/s/k", 0)
'lowerdir=/l/1:/l/0,upperdir=/s/k/u0,workdir=/s/k/w0,userxattr'
"""

from __future__ import annotations

import errno
import os

from .layout import SANDBOX_DIR
from .syscalls import MNT_DETACH, MS_NODEV, MS_NOSUID, mount, umount2


def overlay_options(lowers: list[str], layer_dir: str, gen: int) -> str:
    opts = (
        f"lowerdir={':'.join(lowers)},upperdir={layer_dir}/u{gen},"
        f"workdir={layer_dir}/w{gen},userxattr"
    )
    if len(opts) >= 4000:
        raise OSError(errno.E2BIG, "too many overlay layers (fork chain too long)")
    return opts


def freeze_upper(layer_dir: str, lowers: list[str], gen: int) -> tuple[list[str], int] | None:
    """Freeze ``u<gen>`` and remount ``/sandbox`` over it; None when nothing changed.

    Returns the new ``(lowers, gen)``.
    """
    upper = os.path.join(layer_dir, f"u{gen}")
    if not os.listdir(upper):
        return None
    new_gen = gen + 1
    new_lowers = [upper, *lowers]
    opts = overlay_options(new_lowers, layer_dir, new_gen)
    os.mkdir(os.path.join(layer_dir, f"u{new_gen}"), 0o755)
    os.mkdir(os.path.join(layer_dir, f"w{new_gen}"), 0o700)
    umount2(SANDBOX_DIR, MNT_DETACH)
    mount("overlay", SANDBOX_DIR, "overlay", MS_NOSUID | MS_NODEV, opts)
    return new_lowers, new_gen
