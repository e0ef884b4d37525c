"""Reading an image's root filesystem from its unpacked layers, on the host.

A template's container needs a few facts about its image before any session exists: who
its ``User`` is (uid, gid, home, from the image's own ``/etc/passwd`` and ``/etc/group``),
whether it has a ``python3`` for ``code`` execs, and the environment its sessions start
with. They are read here from the layer folders as the overlay will stack them: the
topmost layer holding a path wins, a whiteout (a 0/0 character device) hides it, an opaque
folder (``user.overlay.opaque``/``trusted.overlay.opaque`` = ``y``) hides the layers
below, and symbolic links resolve inside the image's root, never on the host.

>>> ImageFacts(uid=0, gid=0, home="/root", python3="/usr/bin/python3").has_python
True
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .base import ImageRoot

__all__ = [
    "DEFAULT_PATH",
    "ImageFacts",
    "ImageUserError",
    "has_shell",
    "image_env",
    "image_facts",
    "lookup",
    "skeleton",
    "user_paths_shim",
]

#: The ``PATH`` a session of an image without one in its ``Env`` gets (Docker's default).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Mount points a session needs in the image's root (the skeleton layer brings missing ones).
_MOUNT_POINTS = ("proc", "dev", "tmp")
_OPAQUE = (b"user.overlay.opaque", b"trusted.overlay.opaque")
_MAX_LINKS = 40


class ImageUserError(ValueError):
    """The image's ``User`` names an account its ``/etc/passwd`` does not have."""


@dataclass(frozen=True)
class ImageFacts:
    """What a template needs to know of its image (see :func:`image_facts`)."""

    uid: int
    gid: int
    home: str
    python3: str | None  # where its python3 is, on its PATH; None: it has none
    #: its python3's version, when the name it links to says (``python3.11``)
    python_version: tuple[int, int] | None = None

    @property
    def has_python(self) -> bool:
        return self.python3 is not None


def _whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _opaque(path: Path) -> bool:
    for name in _OPAQUE:
        with contextlib.suppress(OSError):
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
    return False


def _entry(layers: tuple[Path, ...], rel: PurePosixPath) -> Path | None:
    """The host path of ``rel`` (no symlink resolved) in the topmost layer that has it."""
    for layer in reversed(layers):
        host = layer / rel
        try:
            st = host.lstat()
        except OSError:
            st = None
        if st is not None:
            return None if _whiteout(st) else host
        # a whiteout or an opaque folder on the way hides the layers below
        cur = layer
        for part in rel.parts[:-1]:
            cur = cur / part
            try:
                parent = cur.lstat()
            except OSError:
                break
            if _whiteout(parent) or (stat.S_ISDIR(parent.st_mode) and _opaque(cur)):
                return None
    return None


def lookup(layers: tuple[Path, ...], path: str) -> Path | None:
    """The host file the image's root shows at ``path`` (links resolved inside the image).

    ``None`` when the image has no such path.
    """
    return _resolve(layers, path)[1]


def _resolve(layers: tuple[Path, ...], path: str) -> tuple[str, Path | None]:
    """``path`` with its links resolved inside the image, and the host file it is."""
    parts = [p for p in PurePosixPath("/" + path.lstrip("/")).parts[1:]]
    done: list[str] = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        host = _entry(layers, PurePosixPath(*done, part))
        if host is None:
            return "", None
        if host.is_symlink():
            links += 1
            if links > _MAX_LINKS:
                return "", None
            target = os.readlink(host)
            if target.startswith("/"):
                done = []
            parts = [p for p in PurePosixPath(target).parts if p != "/"] + parts
            continue
        done.append(part)
    where = "/" + "/".join(done)
    return where, _entry(layers, PurePosixPath(*done)) if done else layers[-1] if layers else None


def _table(layers: tuple[Path, ...], path: str) -> list[list[str]]:
    host = lookup(layers, path)
    if host is None or not host.is_file():
        return []
    try:
        text = host.read_text(errors="replace")
    except OSError:
        return []
    return [line.split(":") for line in text.splitlines() if line and not line.startswith("#")]


def _user(layers: tuple[Path, ...], user: str) -> tuple[int, int, str]:
    """The image's ``User`` as (uid, gid, home), as Docker reads it."""
    name, _, group = (user or "0").partition(":")
    passwd = _table(layers, "/etc/passwd")
    entry = next((e for e in passwd if len(e) >= 6 and (e[0] == name or e[2] == name)), None)
    if entry is not None:
        uid, gid, home = int(entry[2]), int(entry[3]), entry[5] or "/"
    elif name.isdigit():
        uid, gid, home = int(name), int(name), "/" if name != "0" else "/root"
    else:
        raise ImageUserError(f"the image's User {user!r} is not in its /etc/passwd")
    if group:
        if group.isdigit():
            gid = int(group)
        else:
            row = next((e for e in _table(layers, "/etc/group") if e[0] == group), None)
            if row is None or len(row) < 3:
                raise ImageUserError(f"the image's User {user!r}: no group {group!r}")
            gid = int(row[2])
    return uid, gid, home


def search_path(image: ImageRoot) -> str:
    """The image's ``PATH`` (its ``Env``'s, else Docker's default)."""
    return dict(image.env).get("PATH", DEFAULT_PATH)


def _program(layers: tuple[Path, ...], name: str, path: str) -> str | None:
    for folder in path.split(":"):
        if not folder.startswith("/"):
            continue
        where = f"{folder.rstrip('/')}/{name}"
        host = lookup(layers, where)
        if host is not None and host.is_file() and os.stat(host).st_mode & 0o111:
            return where
    return None


def python_version(layers: tuple[Path, ...], python3: str) -> tuple[int, int] | None:
    """The version the image's ``python3`` names where its links end (``python3.11``).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     (Path(tmp) / "usr/bin").mkdir(parents=True)
    ...     (Path(tmp) / "usr/bin/python3.9").touch()
    ...     (Path(tmp) / "usr/bin/python3").symlink_to("python3.9")
    ...     python_version((Path(tmp),), "/usr/bin/python3")
    (3, 9)
    """
    where, _ = _resolve(layers, python3)
    match = re.fullmatch(r"python(\d+)\.(\d+)", PurePosixPath(where).name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def image_facts(image: ImageRoot) -> ImageFacts:
    """Its user, home and python3 (and that python3's version), read from its layers (the
    baked ones too: a setup may have installed a python3).

    Raises:
        ImageUserError: the image's ``User`` does not exist in it.
    """
    layers = image.stack
    uid, gid, home = _user(layers, image.user)
    python3 = _program(layers, "python3", search_path(image))
    version = python_version(layers, python3) if python3 is not None else None
    return ImageFacts(uid, gid, home, python3, version)


def image_env(image: ImageRoot, facts: ImageFacts) -> dict[str, str]:
    """The environment a process in the image's root starts with: the image's ``Env``, with
    ``PATH`` (Docker's default when it has none), the user's ``HOME`` and ``HOSTNAME``.

    >>> env = image_env(ImageRoot(layers=(), env=(("A", "1"),)), ImageFacts(0, 0, "/root", None))
    >>> env["HOME"], env["A"], env["PATH"] == DEFAULT_PATH
    ('/root', '1', True)
    """
    env = {"PATH": search_path(image), "HOME": facts.home, "HOSTNAME": "sandbox"}
    env.update(dict(image.env))
    return env


def has_shell(layers: tuple[Path, ...]) -> bool:
    """Whether the image's root has a ``/bin/sh`` to run setup commands (an executable file,
    once its links are resolved inside the image).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     (Path(tmp) / "bin").mkdir()
    ...     (Path(tmp) / "bin/dash").touch()
    ...     (Path(tmp) / "bin/sh").symlink_to("dash")
    ...     before = has_shell((Path(tmp),))
    ...     os.chmod(Path(tmp) / "bin/dash", 0o755)
    ...     before, has_shell((Path(tmp),))
    (False, True)
    """
    host = lookup(layers, "/bin/sh")
    try:
        return host is not None and host.is_file() and bool(os.stat(host).st_mode & 0o111)
    except OSError:
        return False


def user_paths_shim(folder: Path, layers: tuple[Path, ...], uid: int) -> Path | None:
    """For an image that runs as a user other than root: a layer, put above the image's,
    with the folders on the way to that user's files (``/home`` above ``/home/app``), empty
    (the overlay merges them with the image's), in the image's modes.

    Why: a session can only change what its overlay can copy up, and only files the sandbox
    uid owns (the image user's, through the idmap) can be; creating ``/home/app/x`` copies
    ``/home`` up first, root's in the image. In this layer, owned by the sandbox uid, they
    show as the user's (``/home`` owned by ``app``): the price of one host uid per sandbox.
    ``None`` when the user owns nothing in the image.
    """
    wanted: set[PurePosixPath] = set()
    for layer in layers:
        for root, dirs, files in os.walk(layer):
            rel = PurePosixPath(os.path.relpath(root, layer))
            for name in dirs + files:
                with contextlib.suppress(OSError):
                    if os.lstat(os.path.join(root, name)).st_uid == uid:
                        wanted.update(p for p in (rel / name).parents if p != PurePosixPath("."))
    wanted = {p for p in wanted if str(p) != "."}
    if not wanted:
        return None
    folder.mkdir(mode=0o755)
    for rel in sorted(wanted):
        host = lookup(layers, str(rel))
        mode = stat.S_IMODE(host.stat().st_mode) if host is not None and host.is_dir() else 0o755
        (folder / rel).mkdir(mode=0o700, exist_ok=True)
        os.chmod(folder / rel, mode)
    return folder


def skeleton(folder: Path, working_dir: str) -> Path:
    """Make the lowest layer an image template adds: the mount points its sessions need
    (``/proc``, ``/dev``, a ``/tmp`` open to all) and the ``WorkingDir``, for an image that
    lacks them (a layer above that has them wins, with its own owner and mode)."""
    folder.mkdir(mode=0o755)
    for name in _MOUNT_POINTS:
        (folder / name).mkdir(mode=0o755)
    os.chmod(folder / "tmp", 0o1777)
    work = PurePosixPath("/" + working_dir.lstrip("/"))
    if work.parts[1:]:
        (folder / PurePosixPath(*work.parts[1:])).mkdir(parents=True, exist_ok=True)
    return folder
