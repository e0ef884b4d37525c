"""What a freshly forked warm interpreter pays for its first steps (docs/fast-path.md).

    .venv/bin/python benchmarks/bench_fresh_fork.py [--n 50]

Every box is a fresh copy-on-write fork of the template's zygote, so each page its set-up
code writes is copied first, and Python writes a page wherever it touches an object. This
forks a warm interpreter (the sandbox modules imported, the heap frozen as the master does)
``--n`` times per step and times the step in the child (median, ms):

* the first steps of a box, each two ways (how it did them, how it does them now);
* dropping every capability and loading the seccomp filter (the capability bounding set
  needs root; the row is skipped without it);
* ``fork`` + exit of interpreters holding more and more anonymous memory: what the warm
  image's size costs.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collimate_rl.node.runtime._sandbox import hardening, seccomp, syscalls  # noqa: E402


def _prctl_name() -> None:
    buf = ctypes.create_string_buffer(b"col-exec")
    syscalls.libc().prctl(syscalls.PR_SET_NAME, ctypes.addressof(buf), 0, 0, 0)


def _signals(module: object) -> None:
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
        module.signal(sig, module.SIG_DFL)  # type: ignore[attr-defined]


def _statm_open() -> None:
    with open("/proc/self/statm", "rb") as fh:
        int(fh.read().split()[0])


def _statm_os() -> None:
    fd = os.open("/proc/self/statm", os.O_RDONLY)
    try:
        int(os.read(fd, 256).split()[0])
    finally:
        os.close(fd)


def _caps(cap_last: int) -> Callable[[], None]:
    def drop() -> None:
        hardening.drop_all_capabilities(cap_last, bounding=os.geteuid() == 0)

    return drop


def _seccomp(program: bytes) -> Callable[[], None]:
    def load() -> None:
        seccomp.load_seccomp(program)

    return load


def _in_fork(step: Callable[[], None], before: Callable[[], None] | None = None) -> float:
    """Run ``step`` in a fresh fork; its wall time in ms (``before`` runs untimed first)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            if before is not None:
                before()
            t0 = time.perf_counter()
            step()
            os.write(w, f"{(time.perf_counter() - t0) * 1e3:.4f}".encode())
        finally:
            os._exit(0)
    os.close(w)
    data = os.read(r, 64)
    os.close(r)
    os.waitpid(pid, 0)
    return float(data)


def _steps(n: int) -> None:
    import _signal

    program = seccomp.build_seccomp_filter()
    cap_last = syscalls.cap_last()
    syscalls.libc()  # loaded before the zygote forks, as the master does
    gc.collect()
    gc.freeze()

    def no_new_privs() -> None:
        syscalls.prctl(syscalls.PR_SET_NO_NEW_PRIVS, 1)

    rows: list[tuple[str, Callable[[], None], Callable[[], None] | None]] = [
        ("nothing", lambda: None, None),
        ("name the thread: prctl through ctypes (before)", _prctl_name, None),
        (
            "name the thread: /proc/thread-self/comm (now)",
            lambda: syscalls.set_name("col-exec"),
            None,
        ),
        ("4 x signal.signal (before)", lambda: _signals(signal), None),
        ("4 x _signal.signal (now)", lambda: _signals(_signal), None),
        ("read /proc/self/statm with open() (before)", _statm_open, None),
        ("read /proc/self/statm with os calls (now)", _statm_os, None),
        ("drop every capability", _caps(cap_last), None),
        ("load the seccomp filter", _seccomp(program), no_new_privs),
    ]
    print(f"| in a fresh fork (median of {n}) | ms |\n|---|---|")
    for label, step, before in rows:
        if label == "drop every capability" and os.geteuid() != 0:
            label += " (no bounding set: not root)"
        times = [_in_fork(step, before) for _ in range(n)]
        print(f"| {label} | {statistics.median(times):.3f} |")


def _image(extra_mb: int, n: int) -> str:
    """In a fresh interpreter: ``fork`` + exit CPU with ``extra_mb`` more anonymous memory."""
    code = f"""
import gc, os, resource, statistics
junk = [{{"k%d" % i: (i, str(i) * 3)}} for i in range({extra_mb} * 4000)]
gc.collect(); gc.freeze()
def anon():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) / 1024
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
def one():
    t0 = cpu()
    pid = os.fork()
    if pid == 0:
        [str(i) for i in range(300)]
        os._exit(0)
    os.waitpid(pid, 0)
    return (cpu() - t0) * 1e3
times = [one() for _ in range({n * 8})]
print(f"| {{anon():.1f}} | {{statistics.mean(times):.3f}} |")
"""
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True)
    return out.stdout.strip() or f"| failed: {out.stderr.strip()[-200:]} | |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50)
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _steps(args.n)
    print("\n| anonymous MB | fork + exit CPU ms (mean) |\n|---|---|")
    for extra in (0, 1, 2, 4):
        print(_image(extra, args.n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
