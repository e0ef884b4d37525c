"""The zygote's native loop, built once per machine with the host's C compiler.

``_sandbox/zygote_loop.c`` is the zygote's clone loop in C (why: see
``_sandbox/zygote_loop.py``). :func:`zygote_loop_library` compiles it into the
warm-up cache (:func:`.toolcache.cache_root`), keyed by the source, the compiler
and the machine, under a temporary name renamed into place, readable by the
sandbox uid (the template container binds it). A lock file keeps two nodes from
building it at once; the second waits and uses the first one's.

``None`` (and a log line) where it cannot be had: no C compiler, an architecture
the loop does not know, a failed build. The zygote then serves in Python, with
the same commands and answers.

>>> zygote_loop_library(compiler="") is None
True
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

from .host_paths import SUPERVISOR_DIR
from .toolcache import cache_key, cache_root, readable_folder, run_captured

__all__ = ["LOOP_SOURCE", "find_compiler", "zygote_loop_library"]

log = logging.getLogger("collimate_rl.node.runtime")

LOOP_SOURCE = SUPERVISOR_DIR / "zygote_loop.c"
#: Where the loop's raw ``clone`` call is known to take (flags, 0, 0, 0, 0) like ``fork``.
_MACHINES = frozenset({"x86_64", "aarch64"})
_CFLAGS = ("-O2", "-shared", "-fPIC")


def zygote_loop_library(root: Path | None = None, compiler: str | None = None) -> Path | None:
    """The built loop (a shared library), building it first if needed; ``None`` if it cannot.

    ``compiler``: the C compiler to use (default: ``cc``, ``gcc`` or ``clang`` on
    ``PATH``; ``""``: none, so the Python loop).
    """
    cc = find_compiler() if compiler is None else compiler
    if not cc:
        log.info("zygote loop: Python (no C compiler found)")
        return None
    if platform.machine() not in _MACHINES:
        log.info("zygote loop: Python (no native loop for %s)", platform.machine())
        return None
    try:
        source = LOOP_SOURCE.read_bytes()
        version = run_captured([cc, "--version"]).stdout.split("\n", 1)[0]
        key = cache_key(hashlib.sha256(source).hexdigest(), version, cc, platform.machine())
        folder = readable_folder(cache_root() if root is None else root, "zygote-loop", key)
        library = folder / "zygote_loop.so"
        if not library.exists():
            _build(cc, folder, library)
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("zygote loop: Python (the native loop could not be built: %s)", exc)
        return None
    return library


def find_compiler() -> str:
    """The C compiler on ``PATH`` (``cc``, ``gcc`` or ``clang``), or ``""``."""
    return next((found for name in ("cc", "gcc", "clang") if (found := shutil.which(name))), "")


def _build(cc: str, folder: Path, library: Path) -> None:
    """Compile the loop into ``library`` (waiting for a node that builds it already)."""
    lock = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if library.exists():
            return  # built by the node we waited for
        # the compiler's temporary files go to a folder removed with the build
        with tempfile.TemporaryDirectory(dir=folder, prefix=".scratch-") as scratch:
            tmp = Path(scratch) / library.name
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C", "TMPDIR": scratch}
            done = run_captured([cc, *_CFLAGS, "-o", str(tmp), str(LOOP_SOURCE)], env=env)
            if done.returncode != 0 or not tmp.exists():
                raise OSError(f"{cc} failed: {done.stderr.strip()[-500:]}")
            tmp.chmod(0o644)  # the sandbox uid reads it (the container binds it)
            os.replace(tmp, library)
        log.info("zygote loop: built %s", library)
    finally:
        os.close(lock)
