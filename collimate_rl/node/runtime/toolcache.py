"""Warm-ups that make a language template faster, built once per machine and shared by nodes.

* **C++**: a precompiled ``bits/stdc++.h``, the header most competitive-programming
  solutions start with. Parsing it at ``-O2`` costs seconds per compile; precompiled, a
  fraction of that. GCC looks for ``<dir>/bits/stdc++.h.gch`` in every include directory
  before the header itself, so the template puts the cache folder on
  ``CPLUS_INCLUDE_PATH``. GCC uses a PCH only when the flags match (they come from the
  grader's own table, :mod:`collimate_rl._languages`) and silently ignores it
  otherwise: a miss is slower, never wrong.
* **Java**: a class-data-sharing archive of javac's own classes, so javac starts faster.
  The template's ``javac`` is a small wrapper that adds the archive once it exists.
* **Go**: a build cache holding the whole standard library, compiled. Since Go 1.20 the
  toolchain ships no compiled standard library: with an empty cache, every grade's
  ``go build`` compiles ``fmt`` and all it needs (~8 s here, so a 10 s grade fails), and a
  grade's session starts empty. The template sets ``GOCACHE`` to this one, bound read-only
  and shared by every session: the go command reads it, and a write it cannot make costs it
  nothing but that entry. Only the whole standard library will do: with a read-only cache,
  a package missing from it fails to load ("package regexp is not in std"). Unlike the
  others this one is built before the template starts (once per machine and toolchain,
  ~1 min here), since without it every Go grade would be that slow: a node that finds
  another node building it waits for that build, and a build that fails makes the Go
  template unavailable, with the go command's message, rather than a template whose
  grades all run out of time.

Entries live in ``COLLIMATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/collimate-rl``, else
``~/.cache/collimate-rl``, keyed by the compiler's version and the flags. The first node
that needs one builds it in the background (a lock file keeps two nodes from doing the
work twice), under a temporary name renamed into place, world-readable (the sandbox uid
reads it). Until it exists the template works without it. Measured in
``benchmarks/README.md`` (languages).

>>> from collimate_rl._languages import LANGUAGES
>>> pch_flags(LANGUAGES["cpp"].compile)
['-std=gnu++17', '-O2']
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import hashlib
import logging
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path

from collimate_rl._languages import LANGUAGES

__all__ = [
    "WarmUp",
    "cache_key",
    "cache_root",
    "pch_flags",
    "readable_folder",
    "run_captured",
    "warm_up",
]

log = logging.getLogger("collimate_rl.node.runtime")

#: Warm-ups build beside the node's own work, not ahead of it.
_LOW_PRIORITY = ("nice", "-n", "10")
#: How often a required warm-up another node is building is looked for (seconds).
_LOCK_POLL = 0.5
#: The PCH is looked up under this name in each include directory.
_PCH_HEADER = "bits/stdc++.h"
# the flags GCC checks when it considers a PCH (the others do not matter to it)
_PCH_FLAG = re.compile(r"^-(?:std=|O|f|m|D|U|g)")
#: A program that loads the classes most solutions use, so the javac archive covers them.
_JAVA_WARMUP = """import java.io.*;
import java.util.*;
import java.util.stream.*;

public class Warmup {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        Scanner scanner = new Scanner(System.in);
        StringTokenizer st = new StringTokenizer("1 2");
        List<Integer> xs = new ArrayList<>(List.of(3, 1, 2));
        Map<String, Integer> counts = new HashMap<>();
        Collections.sort(xs);
        System.out.println(xs.stream().map(String::valueOf).collect(Collectors.joining(" ")));
    }
}
"""


@dataclasses.dataclass(frozen=True)
class WarmUp:
    """What a template adds for a warm-up, and how to build it if it is not there yet.

    ``before_start``: the template waits for the build (else it is built in the background).
    """

    binds: tuple[Path, ...] = ()
    path: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    build: Callable[[], Coroutine[None, None, None]] | None = None
    before_start: bool = False


def cache_root() -> Path:
    """Where warm-ups are kept (see the module docstring)."""
    explicit = os.environ.get("COLLIMATE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "collimate-rl"


def pch_flags(compile_argv: Sequence[str]) -> list[str]:
    """The compile flags a precompiled header must be built with to be used."""
    return [a for a in compile_argv if _PCH_FLAG.match(a)]


def cache_key(*parts: str) -> str:
    """The cache folder's name for an entry built from ``parts`` (a short hash of them)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def run_captured(
    argv: Sequence[str], env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a tool to its end (at most a minute), its output captured as text."""
    return subprocess.run(
        list(argv), capture_output=True, text=True, timeout=60, check=False, env=env
    )


def readable_folder(root: Path, *parts: str) -> Path:
    """``root/parts...``, created, with every folder from ``root`` down world-readable."""
    folder = root.joinpath(*parts)
    folder.mkdir(parents=True, exist_ok=True)
    for path in [root, *folder.relative_to(root).parents, folder.relative_to(root)]:
        with contextlib.suppress(OSError):
            (root / path).chmod(0o755)  # the sandbox uid reads these
    return folder


def warm_up(language: str, tools: Mapping[str, str], root: Path | None = None) -> WarmUp | None:
    """The warm-up for a language template, or ``None`` (none pays, or it cannot be set up)."""
    try:
        root = cache_root() if root is None else root
        if language == "cpp":
            return _cpp(tools["g++"], root)
        if language == "java":
            return _java(tools["javac"], root)
        if language == "go":
            return _go(tools["go"], root)
    except (OSError, subprocess.SubprocessError, KeyError) as exc:
        log.info("no %s warm-up: %s", language, exc)
    return None


# ----------------------------------------------------------------------------- C++


def _find_header(gxx: str, flags: Sequence[str]) -> Path | None:
    """``bits/stdc++.h`` in g++'s own include directories."""
    probe = run_captured([gxx, *flags, "-x", "c++", "-E", "-v", os.devnull])
    listing = probe.stderr.split("#include <...> search starts here:", 1)[-1]
    for line in listing.splitlines():
        folder = line.strip()
        if folder.startswith("End of search list"):
            break
        candidate = Path(folder) / _PCH_HEADER
        if folder.startswith("/") and candidate.is_file():
            return candidate.resolve()
    return None


def _cpp(gxx: str, root: Path) -> WarmUp | None:
    flags = pch_flags(LANGUAGES["cpp"].compile)
    header = _find_header(gxx, flags)
    if header is None:
        return None
    version = run_captured([gxx, "--version"]).stdout.split("\n", 1)[0]
    key = cache_key(version, " ".join(flags), str(header), str(header.stat().st_mtime_ns))
    folder = readable_folder(root, "cpp", key)
    gch = folder / f"{_PCH_HEADER}.gch"

    async def build() -> None:
        await _build_locked(
            folder, gch, lambda tmp: [gxx, *flags, "-x", "c++-header", str(header), "-o", tmp]
        )

    return WarmUp(
        binds=(folder,),
        env=(("CPLUS_INCLUDE_PATH", str(folder)),),
        build=None if gch.exists() else build,
    )


# ----------------------------------------------------------------------------- Java


def _javac_flags() -> list[str]:
    """The JVM flags the grader gives javac (its ``-J`` options), filled in."""
    compile_argv, _ = LANGUAGES["java"].commands("class Main {}")
    return [a for a in compile_argv if a.startswith("-J")]


def _java(javac: str, root: Path) -> WarmUp | None:
    real = str(Path(javac).resolve())
    version = run_captured([real, "-J-XX:-UsePerfData", "-version"])  # (no /tmp/hsperfdata_*)
    flags = _javac_flags()
    key = cache_key(version.stdout + version.stderr, " ".join(flags), real)
    folder = readable_folder(root, "java", key)
    archive = folder / "javac.jsa"
    bin_dir = readable_folder(root, "java", key, "bin")
    wrapper = bin_dir / "javac"
    # The archive is found next to the wrapper's own folder: a session may see this
    # folder at another path than the host (``host_paths.bind_target``).
    text = (
        "#!/bin/sh\n# javac with a class-data-sharing archive of its classes (collimate-rl)\n"
        f'archive="${{0%/*}}/../{archive.name}"\n'
        f'if [ -r "$archive" ]; then exec {shlex.quote(real)} -J-XX:SharedArchiveFile="$archive" '
        '-J-Xlog:cds=off -J-Xlog:cds+dynamic=off "$@"; fi\n'
        f'exec {shlex.quote(real)} "$@"\n'
    )
    if not wrapper.exists() or wrapper.read_text() != text:  # (an older node's wrapper too)
        tmp = wrapper.with_name(f".javac.{os.getpid()}")
        tmp.write_text(text)
        tmp.chmod(0o755)
        os.replace(tmp, wrapper)

    async def build() -> None:
        with tempfile.TemporaryDirectory(dir=folder) as work:
            (Path(work) / "Warmup.java").write_text(_JAVA_WARMUP)
            await _build_locked(
                folder,
                archive,
                lambda tmp: [real, f"-J-XX:ArchiveClassesAtExit={tmp}", *flags, "Warmup.java"],
                cwd=work,
                env={"CLASSPATH": "."},  # as in a grade: a dynamic archive checks the class path
            )

    return WarmUp(
        binds=(folder,),
        path=(str(bin_dir),),
        build=None if archive.exists() else build,
    )


# ----------------------------------------------------------------------------- Go

#: The go command's environment for the warm-up: none of the host user's settings (a
#: sandbox has none either), no toolchain switch, no network.
_GO_ENV = {"GOENV": "off", "GOFLAGS": "", "GOTOOLCHAIN": "local", "GOPROXY": "off"}


def _go(go: str, root: Path) -> WarmUp:
    real = str(Path(go).resolve())
    # what the cache's entries depend on: the toolchain, where it is, what it builds for
    facts = run_captured(
        [real, "env", "GOVERSION", "GOROOT", "GOOS", "GOARCH", "GOAMD64", "CGO_ENABLED"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **_GO_ENV},
    )
    if facts.returncode != 0:
        raise OSError(f"`go env` failed: {facts.stderr.strip()[-300:]}")
    folder = readable_folder(root, "go", cache_key(facts.stdout, real))
    cache = folder / "cache"

    async def build() -> None:
        with tempfile.TemporaryDirectory(dir=folder, prefix=".work-") as work:
            await _build_locked(
                folder,
                cache,
                lambda tmp: ["env", f"GOCACHE={tmp}", real, "build", "std"],
                cwd=work,
                env={**_GO_ENV, "HOME": work, "GOPATH": str(Path(work, "gopath"))},
                required=True,
            )

    if cache.is_dir():
        return WarmUp(binds=(folder,), env=(("GOCACHE", str(cache)),))
    return WarmUp(build=build, before_start=True)


# ----------------------------------------------------------------------------- building


async def _build_locked(
    folder: Path,
    target: Path,
    command: Callable[[str], list[str]],
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    required: bool = False,
) -> None:
    """Run ``command(tmp)`` at low priority, then rename ``tmp`` (a file or a folder, made
    world-readable) to ``target``; once per machine.

    ``required``: the template cannot work without it, so a build another node runs is
    waited for (a node that died midway lets go of the lock: this one builds it then),
    and a failed build raises ``RuntimeError`` with the tool's message (else it is logged
    and the template goes on without the warm-up).
    """
    lock = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not required:
                    return  # another node builds it
                await asyncio.sleep(_LOCK_POLL)  # (cancellable, unlike a blocking flock)
        if not await asyncio.to_thread(_make_room, target):
            return  # built meanwhile
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tool = command(str(tmp))
        # The compiler's own temporary files go to a folder of this build, removed with
        # it: a compiler killed midway (the node closing) cannot remove them itself.
        with tempfile.TemporaryDirectory(dir=folder, prefix=".scratch-") as scratch:
            run_env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "LANG": "C.UTF-8",
                "TMPDIR": scratch,
                **(env or {}),
            }
            proc = await asyncio.create_subprocess_exec(
                *_LOW_PRIORITY,
                *tool,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=run_env,
                start_new_session=True,
            )
            try:
                _, err = await proc.communicate()
            except BaseException:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, 9)
                await proc.wait()
                _remove(tmp)
                raise
        if proc.returncode != 0 or not tmp.exists():
            why = err.decode(errors="replace").strip()[-500:] or f"exit status {proc.returncode}"
            _remove(tmp)
            if required:
                raise RuntimeError(f"its warm-up failed: `{shlex.join(tool)}`: {why}")
            log.info("warm-up %s failed: %s", target, why)
            return
        await asyncio.to_thread(_share, tmp)
        os.replace(tmp, target)
        log.info("warm-up ready: %s", target)
    finally:
        os.close(lock)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def _share(path: Path) -> None:
    """Make ``path`` readable by every user (the sandbox uid), a folder with all it holds."""
    path.chmod(0o755 if path.is_dir() else 0o644)
    for parent, folders, files in os.walk(path):
        for name in folders:
            os.chmod(os.path.join(parent, name), 0o755)
        for name in files:
            os.chmod(os.path.join(parent, name), 0o644)


def _make_room(target: Path) -> bool:
    """Create ``target``'s folder (world-readable); ``False`` if ``target`` already exists."""
    if target.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.parent.chmod(0o755)
    return True
