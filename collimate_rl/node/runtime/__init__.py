"""The local sandbox node's runtime (see :mod:`.base` for the contract).

``create_runtime()`` picks the driver:

* ``"bwrap"`` (the default on Linux): one bubblewrap container per template,
  run as a dedicated non-root host uid; sessions are forked processes in their
  own user/pid/net/ipc/mount namespaces with copy-on-write overlay layers;
  execs run with no capabilities, a seccomp filter and rlimits.
* ``"none"``: the same supervisor with no isolation at all, for machines
  without bubblewrap. It is never chosen implicitly on Linux and warns loudly.

Built-in template: ``"python3"`` (alias ``"py"``), the node's own Python with
numpy importable, warm (a fork-server; ``code`` execs run in a forked,
pre-imported interpreter). Under ``bwrap`` every built-in template also has a
networked twin ``"<id>-net"`` (same container; sessions with the egress relay,
see docs/egress.md). Language templates (``c``, ``cpp``, ``java``,
``javascript``, ``rust``, ``bash``, ``go``), one per toolchain found on the
host, start on first use (:mod:`.languages`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from .base import (
    OUTPUT_CAP_BYTES,
    ExecOutcome,
    ExecSpec,
    ImageRoot,
    ImageWithoutPython,
    ImageWithoutShell,
    Isolation,
    Limits,
    Runtime,
    RuntimeError_,
    ServiceNotReady,
    ServiceSpec,
    SessionBusy,
    SessionHandle,
    SessionLost,
    TemplateSpec,
)
from .bwrap import BwrapStatus, detect_bwrap
from .local_runtime import BUILTIN_TEMPLATE, LocalRuntime
from .local_session import MAX_FORK_DEPTH, LocalSession
from .sandbox_uid import SANDBOX_UID_BASE, resolve_sandbox_uid
from .template_host import DEFAULT_PRELOAD

__all__ = [
    "BUILTIN_TEMPLATE",
    "DEFAULT_PRELOAD",
    "MAX_FORK_DEPTH",
    "OUTPUT_CAP_BYTES",
    "SANDBOX_UID_BASE",
    "BwrapStatus",
    "BwrapUnavailable",
    "ExecOutcome",
    "ExecSpec",
    "ImageRoot",
    "ImageWithoutPython",
    "ImageWithoutShell",
    "Isolation",
    "Limits",
    "LocalRuntime",
    "LocalSession",
    "Runtime",
    "RuntimeError_",
    "ServiceNotReady",
    "ServiceSpec",
    "SessionBusy",
    "SessionHandle",
    "SessionLost",
    "TemplateSpec",
    "create_runtime",
    "detect_bwrap",
]


class BwrapUnavailable(RuntimeError_):
    """The bwrap driver cannot run on this machine (the message says how to fix it)."""


def create_runtime(
    isolation: str | None = None,
    *,
    state_dir: Path | None = None,
    limits: Limits | None = None,
    sandbox_uid: int | None = None,
    memory_limit_bytes: int | None = None,
    share_site_packages: bool = False,
    light_sessions: bool = True,
    native_zygote: bool = True,
    languages: str | Sequence[str] | None = None,
    syscall_policy: str = "allowlist",
) -> LocalRuntime:
    """Build (not start) the node's runtime; ``await runtime.start()`` next.

    ``isolation``: ``None`` picks ``bwrap`` on Linux and raises
    :class:`BwrapUnavailable` (never falls back silently) if it cannot work;
    ``"bwrap"`` insists on it; ``"none"`` runs without any isolation and warns.
    ``sandbox_uid``: host uid the sandboxes run as when the node is root
    (default: the first uid from :data:`SANDBOX_UID_BASE` up that no account of
    the host uses, see :mod:`.sandbox_uid`); ignored when the node is not root.
    ``memory_limit_bytes``: cap per template container through a cgroup-v1
    memory cgroup when the node is root and the controller is writable
    (default: half the RAM; 0 disables; silently skipped, with a log line,
    where unavailable).
    ``share_site_packages``: expose the node's own environment's
    site-packages read-only in every sandbox (operator opt-in; how a template
    serves an OpenEnv server without a networked bake, see docs/services.md).
    ``light_sessions``: sessions without a service or network are records in
    their template's master, run in boxes by its workers (``docs/fast-path.md``);
    ``False`` gives every session a server process of its own.
    ``native_zygote``: the zygote that clones boxes runs its loop in C, built once
    per machine with the host's C compiler (:mod:`.native`); ``False``, no
    compiler or a failed build: the same loop in Python (slower, same behaviour).
    ``languages``: the built-in language templates offered (``None``: the
    ``COLLIMATE_LANGUAGES`` environment variable, default ``"auto"``, every
    toolchain found; ``"none"``; or names such as ``["c", "cpp"]``). Each
    starts on first use; see :mod:`.languages`.
    ``syscall_policy``: ``"allowlist"`` (every call outside the reviewed list gets ENOSYS,
    docs/security.md); ``"record"`` only for the syscall recorder (:mod:`.syscall_recorder`),
    which must see the calls a workload tries: every call but the dangerous ones allowed.
    """
    uid = resolve_sandbox_uid(sandbox_uid)
    if isolation is None:
        if not sys.platform.startswith("linux"):
            raise BwrapUnavailable(
                "no isolating driver on this platform; pass isolation='none' explicitly "
                "to run WITHOUT a sandbox"
            )
        isolation = "bwrap"
    iso = Isolation(isolation)
    if iso is Isolation.NONE:
        return LocalRuntime(
            iso,
            state_dir=state_dir,
            limits=limits,
            sandbox_uid=uid,
            memory_limit_bytes=memory_limit_bytes,
            share_site_packages=share_site_packages,
            languages=languages,
        )
    status = detect_bwrap(uid)
    if not status.usable:
        raise BwrapUnavailable(f"bwrap isolation unavailable: {status.reason}")
    return LocalRuntime(
        iso,
        state_dir=state_dir,
        limits=limits,
        sandbox_uid=uid,
        bwrap_path=status.path,
        memory_limit_bytes=memory_limit_bytes,
        share_site_packages=share_site_packages,
        light_sessions=light_sessions,
        native_zygote=native_zygote,
        languages=languages,
        syscall_policy=syscall_policy,
    )
