"""The node's built-in language templates: one per toolchain found on the host.

``c`` (gcc), ``cpp`` (g++), ``java`` (javac and java), ``javascript`` (node; alias ``js``),
``rust`` (rustc and its sysroot; alias ``rs``), ``bash`` (alias ``sh``) and ``go``. The
binaries come from :mod:`collimate_rl._languages`, the table the grader uses. Each
template is the node's warm Python template (``code`` execs are Python, as the Collimate
contract asks of a grading template: the harness is Python) with the toolchain visible
read-only. Under ``/usr`` it already is. Elsewhere it is bound at the same path: a Rust
sysroot under a 0700 ``/root`` is re-exposed to the sandbox uid by the launcher without
opening the rest of that home (:func:`.bwrap.launch_preexec`). Java's configuration, which
Debian keeps under ``/etc``, is bound too (the sandbox has its own ``/etc``).

Detection is cheap (a ``PATH`` lookup per tool) and runs when the runtime starts; the rest
(the Rust sysroot, ``GOROOT``) is worked out when a template is first used.

>>> found = detect_languages(search_path="/nonexistent")
>>> sorted(found.available), found.unavailable["cpp"]
([], '`g++` not found on the PATH (/nonexistent)')
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from pathlib import Path

from collimate_rl._languages import LANGUAGES

from .base import Limits, RuntimeError_, TemplateSpec
from .toolcache import WarmUp, warm_up

__all__ = [
    "LANGUAGE_TEMPLATES",
    "Detected",
    "LanguageTemplate",
    "LanguageTemplates",
    "detect_languages",
    "toolchain_path",
]

log = logging.getLogger("collimate_rl.node.runtime")

#: Template id -> the grading language it runs (Python's template is the built-in one).
LANGUAGE_TEMPLATES = {name: name for name in LANGUAGES if name != "python"}
#: Extra tools a language needs beyond its compile and run commands.
_EXTRA_TOOLS = {"rust": ("cc",)}  # rustc links through the system C compiler
#: Where toolchains often live outside the default PATH (rustup, the Go tarball).
_USUAL_DIRS = ("~/.cargo/bin", "/usr/local/go/bin", "/usr/lib/go/bin")
#: Host directories every sandbox already sees (bound read-only by the driver).
_SYSTEM = (Path("/usr"), Path("/bin"), Path("/sbin"), Path("/lib"), Path("/lib64"), Path("/lib32"))
#: Java's address space: each JVM thread reserves its own stack (see grading.languages).
JAVA_ADDRESS_SPACE = 16 << 30


def toolchain_path() -> str:
    """The PATH toolchains are looked up on: ``COLLIMATE_TOOLCHAIN_PATH``, else PATH and usual dirs."""
    explicit = os.environ.get("COLLIMATE_TOOLCHAIN_PATH")
    if explicit is not None:
        return explicit
    parts = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(os.pathsep)
    parts += [os.path.expanduser(d) for d in _USUAL_DIRS]
    return os.pathsep.join(dict.fromkeys(p for p in parts if p))


def _is_system(path: Path) -> bool:
    return any(path == root or path.is_relative_to(root) for root in _SYSTEM)


@dataclasses.dataclass(frozen=True)
class LanguageTemplate:
    """A language the host has every tool for; :meth:`spec` builds its template."""

    template_id: str
    language: str
    tools: dict[str, str]  # tool name -> the path found
    aliases: tuple[str, ...] = ()

    def spec(self, limits: Limits) -> TemplateSpec:
        """The template: the toolchain's binds and ``PATH`` entries (may run the tools).

        Raises:
            RuntimeError: the toolchain is broken (e.g. ``rustc --print sysroot`` fails).
        """
        binds: list[Path] = []
        path: list[str] = []
        for name, found in self.tools.items():
            real = Path(found).resolve()
            if name == "rustc":
                sysroot = Path(_ask(found, "--print", "sysroot")).resolve()
                binds.append(sysroot)
                path.append(str(sysroot / "bin"))
            elif name == "go":
                goroot = Path(_ask(found, "env", "GOROOT")).resolve()
                if not _is_system(goroot):
                    binds.append(goroot)
                path.append(str(goroot / "bin"))
            elif name == "javac":
                home = real.parent.parent
                if not _is_system(home):
                    binds.append(home)
                binds += _outside_links(home)
                path.append(str(home / "bin"))
            elif not _is_system(real):
                prefix = real.parent.parent  # the prefix: bin/ and its lib/ share
                binds.append(prefix if len(prefix.parts) > 1 else real.parent)
                path.append(str(real.parent))
        for bind in binds:  # never the root or a whole system tree over the sandbox's own
            if len(bind.parts) < 2 or any(bind == root for root in _SYSTEM):
                raise RuntimeError(f"refusing to bind {bind} for {self.template_id}")
        if self.language == "java":
            limits = dataclasses.replace(
                limits, address_space_bytes=max(limits.address_space_bytes, JAVA_ADDRESS_SPACE)
            )
        return TemplateSpec(
            self.template_id,
            binds=tuple(dict.fromkeys(binds)),
            path=tuple(dict.fromkeys(path)),
            limits=limits,
        )


def _ask(tool: str, *args: str) -> str:
    try:
        out = subprocess.run(
            [tool, *args], capture_output=True, text=True, timeout=60, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"`{tool} {' '.join(args)}` failed: {exc}") from exc
    if not out:
        raise RuntimeError(f"`{tool} {' '.join(args)}` printed nothing")
    return out


def _outside_links(home: Path) -> list[Path]:
    """Folders outside ``home`` and the system that symlinks inside ``home`` point into.

    Debian's JDK keeps ``conf/`` and ``lib/security/`` as links into ``/etc``, which the
    sandbox replaces with its own: javac stops with "Error loading java.security file".
    """
    targets: set[Path] = set()
    for folder, dirs, files in os.walk(home):
        for name in dirs + files:
            entry = Path(folder) / name
            if entry.is_symlink():
                target = entry.resolve()
                if target.exists() and not target.is_relative_to(home) and not _is_system(target):
                    targets.add(target if target.is_dir() else target.parent)
    kept = sorted(targets, key=lambda p: len(p.parts))
    out: list[Path] = []
    for target in kept:
        if not any(target.is_relative_to(parent) for parent in out):
            out.append(target)
    return out


@dataclasses.dataclass(frozen=True)
class Detected:
    """The language templates this host can offer, and why the others are missing."""

    available: dict[str, LanguageTemplate]
    unavailable: dict[str, str]

    def aliases(self) -> dict[str, str]:
        """Alias -> template id, for the available templates."""
        return {a: t.template_id for t in self.available.values() for a in t.aliases}


def _aliases(name: str) -> tuple[str, ...]:
    return tuple(t for t in LANGUAGES[name].templates if t != name)


def detect_languages(
    *, search_path: str | None = None, only: Iterable[str] | None = None
) -> Detected:
    """Which language templates the host's toolchains allow (a ``PATH`` lookup per tool).

    Args:
        search_path: where to look (default :func:`toolchain_path`).
        only: offer only these template ids (the others are reported as switched off).
    """
    where = toolchain_path() if search_path is None else search_path
    wanted = None if only is None else set(only)
    available: dict[str, LanguageTemplate] = {}
    unavailable: dict[str, str] = {}
    for template_id, name in LANGUAGE_TEMPLATES.items():
        if wanted is not None and template_id not in wanted:
            unavailable[template_id] = "switched off on this node (--languages)"
            continue
        needed: Sequence[str] = (*LANGUAGES[name].toolchain, *_EXTRA_TOOLS.get(name, ()))
        tools: dict[str, str] = {}
        for tool in needed:
            found = shutil.which(tool, path=where)
            if found is None:
                unavailable[template_id] = f"`{tool}` not found on the PATH ({where})"
                break
            tools[tool] = found
        else:
            available[template_id] = LanguageTemplate(template_id, name, tools, _aliases(name))
    return Detected(available, unavailable)


class LanguageTemplates:
    """A runtime's built-in language templates: offered at start, each started on first use.

    Starting one builds its spec (its toolchain's binds), hands it to ``add_template`` and
    starts its warm-up in the background (:mod:`.toolcache`); :meth:`close` stops those.
    """

    def __init__(self, only: Iterable[str] | str | None = None) -> None:
        self._only = _choice(only)
        self.detected = Detected({}, {})
        self._started: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._required: dict[str, asyncio.Task[None]] = {}  # builds a template waits for

    def detect(self) -> None:
        """Look the toolchains up (at runtime start)."""
        self.detected = detect_languages(only=self._only)

    def ids(self) -> list[str]:
        """The offered template ids, then their aliases."""
        return [*self.detected.available, *self.detected.aliases()]

    def resolve(self, template_id: str) -> str | None:
        """The offered template ``template_id`` names (an id or an alias), or ``None``."""
        if template_id in self.detected.available:
            return template_id
        return self.detected.aliases().get(template_id)

    def unavailable(self) -> dict[str, str]:
        """Template id -> why this node does not offer it."""
        return dict(self.detected.unavailable)

    async def start(
        self,
        template_id: str,
        limits: Limits,
        add_template: Callable[[TemplateSpec], Awaitable[None]],
    ) -> str:
        """Start the template ``template_id`` names (once); its id.

        Raises:
            KeyError: not an offered language template.
            RuntimeError_: its toolchain is broken (then it is reported unavailable).
        """
        resolved = self.resolve(template_id)
        if resolved is None:
            raise KeyError(template_id)
        async with self._locks.setdefault(resolved, asyncio.Lock()):
            if resolved in self._started:
                return resolved
            offer = self.detected.available[resolved]
            try:
                spec, warm = await asyncio.to_thread(_with_warm_up, offer, limits)
                if warm is not None and warm.build is not None and warm.before_start:
                    # (once per machine, ~1 min for Go's; see toolcache) shielded: a request
                    # that gives up waiting must not cancel it, or no later one would finish
                    await asyncio.shield(self._required_build(resolved, warm.build))
                    spec, warm = await asyncio.to_thread(_with_warm_up, offer, limits)
            except RuntimeError as exc:
                self.detected.available.pop(resolved, None)
                self.detected.unavailable[resolved] = f"toolchain broken: {exc}"
                raise RuntimeError_(f"template {resolved!r}: {exc}") from exc
            await add_template(spec)
            self._started.add(resolved)
            if warm is not None and warm.build is not None and not warm.before_start:
                self._background(warm.build(), resolved)
        return resolved

    def _required_build(
        self, template_id: str, build: Callable[[], Coroutine[None, None, None]]
    ) -> asyncio.Task[None]:
        """The build ``template_id`` waits for: one task, whoever waits for it and for how long."""
        task = self._required.get(template_id)
        if task is None:
            task = self._required[template_id] = self._background(build(), template_id)
        return task

    def _background(
        self, build: Coroutine[None, None, None], template_id: str
    ) -> asyncio.Task[None]:
        task = asyncio.create_task(build, name=f"warm-up-{template_id}")
        self._tasks.add(task)
        task.add_done_callback(_settled)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        """Stop warm-ups still building (their processes are killed, temporaries removed)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _settled(task: asyncio.Task[None]) -> None:
    """A warm-up ended; a failure nobody waited for is logged (a waiting start raises it)."""
    if not task.cancelled() and task.exception() is not None:
        log.info("%s failed: %s", task.get_name(), task.exception())


def _choice(only: Iterable[str] | str | None) -> set[str] | None:
    """``None``/``"auto"``: every language found; ``"none"``/``""``: none; else the names given."""
    if only is None:
        only = os.environ.get("COLLIMATE_LANGUAGES", "auto")
    if isinstance(only, str):
        text = only.strip().lower()
        if text == "auto":
            return None
        only = [part for part in text.replace(",", " ").split() if part != "none"]
    chosen = set()
    for name in only:
        if name not in LANGUAGE_TEMPLATES:
            aliases = {a: t for t in LANGUAGE_TEMPLATES for a in _aliases(t)}
            if name not in aliases:
                raise ValueError(
                    f"unknown language template {name!r}; choose from {', '.join(LANGUAGE_TEMPLATES)}"
                )
            name = aliases[name]
        chosen.add(name)
    return chosen


def _with_warm_up(offer: LanguageTemplate, limits: Limits) -> tuple[TemplateSpec, WarmUp | None]:
    spec = offer.spec(limits)
    warm = warm_up(offer.language, offer.tools)
    if warm is None:
        return spec, None
    spec = dataclasses.replace(
        spec,
        binds=(*spec.binds, *warm.binds),
        path=(*warm.path, *spec.path),
        env=(*spec.env, *warm.env),
    )
    return spec, warm
