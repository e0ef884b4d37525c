"""Where the node's own Python, numpy, site-packages and the supervisor live on
the host, and the ``PATH`` a sandbox gets: what a template container binds.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from ._reach import UnreachablePath
from .base import TemplateSpec

__all__ = [
    "MOVED_BINDS_DIR",
    "SHARED_SITE_DIR",
    "SUPERVISOR",
    "SUPERVISOR_DIR",
    "as_sessions_see",
    "bind_target",
    "layer_args",
    "moved",
    "numpy_dirs",
    "python_args",
    "python_paths",
    "python_sources",
    "search_path",
    "site_dirs",
    "supervisor_argv",
]

SUPERVISOR_DIR = Path(__file__).resolve().parent / "_sandbox"
SUPERVISOR = SUPERVISOR_DIR / "supervisor.py"


def python_paths() -> tuple[Path, Path]:
    """The node's base interpreter and its prefix (real paths)."""
    exe = Path(getattr(sys, "_base_executable", None) or sys.executable)
    exe = exe.resolve()
    prefix = Path(sys.base_prefix).resolve()
    return exe, prefix


def numpy_dirs() -> list[Path]:
    spec = importlib.util.find_spec("numpy")
    if spec is None or not spec.submodule_search_locations:
        return []
    pkg = Path(next(iter(spec.submodule_search_locations))).resolve()
    dirs = [pkg]
    libs = pkg.parent / "numpy.libs"
    if libs.is_dir():
        dirs.append(libs)
    return dirs


def site_dirs() -> list[Path]:
    """The node environment's own site-packages (a venv's), not the base Python's."""
    import sysconfig

    base = Path(sys.base_prefix).resolve()
    out: list[Path] = []
    for key in ("purelib", "platlib"):
        path = Path(sysconfig.get_paths()[key]).resolve()
        if path.is_dir() and not path.is_relative_to(base) and path not in out:
            out.append(path)
    return out


def python_args() -> list[str]:
    """bwrap arguments that give a container the node's Python.

    Its prefix at its own path (a system one under ``/usr`` is there already), numpy at
    ``/opt/collimate/site`` and ``python3`` / ``python`` on ``/opt/collimate/bin``.

    Raises:
        UnreachablePath: the prefix lies where every session mounts its own folder (under
            ``/tmp``, say): it cannot be moved as a toolchain is (an interpreter may find
            its library by an absolute path), and a session would not see it.
    """
    exe, prefix = python_paths()
    if bind_target(prefix) != str(prefix):
        raise UnreachablePath(
            f"the node's Python ({prefix}) is installed where every sandbox mounts a folder "
            "of its own, so no sandbox could see it; run the node with a Python installed "
            "elsewhere (a virtualenv there is fine)"
        )
    argv = [] if str(prefix).startswith("/usr/") else ["--ro-bind", str(prefix), str(prefix)]
    for d in numpy_dirs():
        argv += ["--ro-bind", str(d), f"/opt/collimate/site/{d.name}"]
    argv += ["--dir", "/opt/collimate/bin"]
    argv += ["--symlink", str(exe), "/opt/collimate/bin/python3"]
    argv += ["--symlink", str(exe), "/opt/collimate/bin/python"]
    return argv


def python_sources() -> list[Path]:
    """The host paths :func:`python_args` binds (the launcher must let the sandbox uid reach
    them: :func:`~collimate_rl.node.runtime.bwrap.launch_preexec`)."""
    return [python_paths()[1], *numpy_dirs()]


#: Folders every session mounts its own over (``_sandbox/members.py``): a host folder
#: under one of them, bound at its own path, would be hidden in the session.
_SESSION_MOUNTS = (Path("/tmp"), Path("/dev"), Path("/proc"), Path("/sandbox"))
#: Where a template's bind under one of those is shown instead (this + its own path).
MOVED_BINDS_DIR = "/opt/collimate/host"


def bind_target(bind: Path) -> str:
    """Where a template's sessions see a host folder it binds (a toolchain, a warm-up):
    at its own path, unless the session's own mounts would hide it there.

    >>> bind_target(Path("/opt/go")), bind_target(Path("/tmp/cache/go"))
    ('/opt/go', '/opt/collimate/host/tmp/cache/go')
    """
    if any(bind == root or bind.is_relative_to(root) for root in _SESSION_MOUNTS):
        return MOVED_BINDS_DIR + str(bind)
    return str(bind)


def moved(value: str, binds: Sequence[Path]) -> str:
    """A path, or a ``:``-separated list of them, as the sessions see it: an entry inside
    a bind that :func:`bind_target` moves moves with it (a ``PATH`` entry, ``GOCACHE``).

    >>> moved("/tmp/go/bin:/usr/bin", [Path("/tmp/go")])
    '/opt/collimate/host/tmp/go/bin:/usr/bin'
    """

    def entry(path: str) -> str:
        for bind in binds:
            if path == str(bind) or path.startswith(f"{bind}/"):
                return bind_target(bind) + path[len(str(bind)) :]
        return path

    return ":".join(entry(path) for path in value.split(":"))


def as_sessions_see(spec: TemplateSpec) -> TemplateSpec:
    """``spec`` with its ``path`` and ``env`` as its sessions see them (each entry inside a
    moved bind moved with it); its ``binds`` stay the host's (:func:`layer_args` binds them).

    >>> seen = as_sessions_see(TemplateSpec("t", binds=(Path("/tmp/go"),), path=("/tmp/go/bin",)))
    >>> seen.path
    ('/opt/collimate/host/tmp/go/bin',)
    """
    return dataclasses.replace(
        spec,
        path=tuple(moved(entry, spec.binds) for entry in spec.path),
        env=tuple((name, moved(value, spec.binds)) for name, value in spec.env),
    )


def layer_args(layers: Sequence[Path], binds: Sequence[Path]) -> tuple[list[str], list[str]]:
    """bwrap arguments that bind a template's layers and toolchains read-only, and the
    lower dirs of the overlay over them (the top layer first; the empty dir for none).

    >>> layer_args([Path("/l/base"), Path("/l/top")], [Path("/opt/go")])
    (['--ro-bind', '/l/base', '/.collimate/l/0', '--ro-bind', '/l/top', '/.collimate/l/1', \
'--ro-bind', '/opt/go', '/opt/go'], ['/.collimate/l/1', '/.collimate/l/0'])
    """
    argv: list[str] = []
    lowers: list[str] = []
    for i, layer in enumerate(layers):
        dest = f"/.collimate/l/{i}"
        argv += ["--ro-bind", str(layer), dest]
        lowers.insert(0, dest)
    for bind in binds:  # a toolchain outside /usr, at its own path where sessions see it
        argv += ["--ro-bind", str(bind), bind_target(bind)]
    return argv, lowers or ["/.collimate/empty"]


def search_path(python_bin: str, extra: Sequence[str]) -> str:
    """A sandbox's PATH: the node's Python first, then the template's toolchains.

    >>> search_path("/opt/collimate/bin", ["/opt/go/bin"])
    '/opt/collimate/bin:/opt/go/bin:/usr/local/bin:/usr/bin:/bin'
    """
    return ":".join([python_bin, *extra, "/usr/local/bin", "/usr/bin", "/bin"])


#: Where shared site-packages appear inside a sandbox (``/opt/collimate/venv/<i>``).
SHARED_SITE_DIR = "/opt/collimate/venv"


def supervisor_argv(python_bin: str, role: str, *args: str) -> list[str]:
    """The command that runs the shipped supervisor as ``role`` inside a container.

    Isolated mode (``-I``), no site (``-S``), no bytecode written (``-B``): the
    sandbox's interpreter sees only what the supervisor puts on its path.

    >>> supervisor_argv("/usr/bin/python3", "master", "/.collimate/socks", "{}")[1:]
    ['-I', '-S', '-B', '/.collimate/sup/supervisor.py', 'master', '/.collimate/socks', '{}']
    """
    return [python_bin, "-I", "-S", "-B", "/.collimate/sup/supervisor.py", role, *args]
