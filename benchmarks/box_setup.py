"""What two steps of a box's set-up cost a fresh fork: its seccomp filter and its cover.

    cd /tmp && <venv>/bin/python <checkout>/benchmarks/box_setup.py [--forks 1500] [--against <checkout>]

Right after it is cloned, every box loads the seccomp filter (the kernel then runs the
program once per syscall number to fill its action cache, so the program's shape is paid
per box) and hides ``/.collimate`` (a mount, torn down when the box exits). This forks
``--forks`` children per variant, the variants in turns, and takes each child's CPU from
``wait4``: its step, its exit and teardown, and what any fork of this process costs (~1.5 ms
here, with a wide spread: hence the many forks and the medians). Each step's cost is its
median less its baseline's, a child that does all but the step. Variants:

* ``filter``: this build's program, and with ``--against``, another checkout's (baseline: a
  child that sets ``no_new_privs``);
* ``cover`` (as root: it needs a mount namespace): a read-only tmpfs of the box's own, or a
  bind of an empty read-only dir, the way this build's boxes do it (baseline: a child that
  makes a mount namespace).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import statistics
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

PACKAGE = "collimate_rl.node.runtime._sandbox"
_MNT_DETACH = 2


def _seccomp_of(checkout: Path) -> ModuleType:
    """``checkout``'s ``seccomp`` module, imported beside this build's package (its syscalls)."""
    path = checkout / "collimate_rl" / "node" / "runtime" / "_sandbox" / "seccomp.py"
    spec = importlib.util.spec_from_file_location(f"{PACKAGE}.seccomp_of_{checkout.name}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"no seccomp.py in {checkout}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _child_cpu_us(step: Callable[[], None]) -> float:
    """Microseconds of CPU a fresh fork spends running ``step`` and exiting."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            step()
            code = 0
        finally:
            os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("a child failed its step")
    return (usage.ru_utime + usage.ru_stime) * 1e6


def _filter_variants(against: Path | None) -> dict[str, Callable[[], None]]:
    from collimate_rl.node.runtime._sandbox import seccomp
    from collimate_rl.node.runtime._sandbox.seccomp import PreparedFilter, load_seccomp
    from collimate_rl.node.runtime._sandbox.syscalls import PR_SET_NO_NEW_PRIVS, prctl

    builds = {"this build": seccomp}
    if against is not None:
        builds[str(against)] = _seccomp_of(against.resolve())

    def baseline() -> None:
        prctl(PR_SET_NO_NEW_PRIVS, 1)

    variants = {"filter baseline": baseline}
    for name, module in builds.items():
        program = PreparedFilter(module.build_seccomp_filter())  # as the master has them

        def load(program: bytes = program) -> None:
            prctl(PR_SET_NO_NEW_PRIVS, 1)
            load_seccomp(program)

        variants[f"filter, {name} ({len(program) // 8} instructions)"] = load
    return variants


@contextlib.contextmanager
def _cover_variants(folder: str) -> Iterator[dict[str, Callable[[], None]]]:
    """The two ways to cover a dir, in a mount namespace made here (``{}``: not root)."""
    from collimate_rl.node.runtime._sandbox.syscalls import (
        CLONE_NEWNS,
        MS_BIND,
        MS_NODEV,
        MS_NOEXEC,
        MS_NOSUID,
        MS_PRIVATE,
        MS_RDONLY,
        MS_REC,
        MS_REMOUNT,
        mount,
        umount2,
        unshare,
    )

    if os.geteuid() != 0:
        yield {}
        return
    unshare(CLONE_NEWNS)  # this process's own, so nothing here reaches the machine's
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    hidden, cover = os.path.join(folder, "hidden"), os.path.join(folder, "cover")
    os.mkdir(hidden)
    os.mkdir(cover, 0o555)
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    mount(cover, cover, None, MS_BIND, None)
    mount(None, cover, None, MS_REMOUNT | MS_BIND | flags, None)

    def tmpfs() -> None:
        unshare(CLONE_NEWNS)
        mount("none", hidden, "tmpfs", flags, "size=4k,mode=0555")

    def bind() -> None:
        unshare(CLONE_NEWNS)
        mount(cover, hidden, None, MS_BIND, None)

    try:
        yield {
            "cover baseline": lambda: unshare(CLONE_NEWNS),
            "cover, a tmpfs of its own": tmpfs,
            "cover, a bind (this build's)": bind,
        }
    finally:
        umount2(cover, _MNT_DETACH)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--forks", type=int, default=1500)
    parser.add_argument("--against", type=Path, help="another checkout's filter, in turns")
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory(prefix="box-setup-") as folder,
        _cover_variants(folder) as cover,
    ):
        variants = {**_filter_variants(args.against), **cover}
        took: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.forks):
            for name, step in variants.items():
                took[name].append(_child_cpu_us(step))
    medians = {name: statistics.median(times) for name, times in took.items()}
    for name, median in medians.items():
        if "baseline" not in name:
            cost = median - medians[name.split(",")[0] + " baseline"]
            print(f"{name}: {cost:.0f} us (child CPU median {median:.0f} us)", flush=True)
    if "cover baseline" not in medians:
        print("cover: not measured (it needs root, for a mount namespace)")


if __name__ == "__main__":
    main()
