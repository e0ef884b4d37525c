"""What a box costs, and the choices behind it (docs/fast-path.md), measured in a container.

    .venv/bin/python benchmarks/bench_boxes.py [--n 100] [--rounds 3]

Starts a bubblewrap container like a template's (the node's bwrap arguments, the sandbox
uid when run as root) running this file's ``inner`` part, which warms an interpreter like
the template's master (the preloads and ~20 MB of code objects), moves into namespaces of
its own as the master does (``home.py``) and measures, per operation, the CPU of the
process and its reaped children (``getrusage``) and the wall time, interleaving the
variants over ``--rounds`` rounds and printing medians:

* a plain ``fork`` + exit, and + a small Python workload (the warm-fork floor's shape);
* building a member mount namespace in-process (then dropping it);
* a box in an existing member (fresh user/pid/mount namespaces, ``/proc``, ``/.collimate``
  covered, capabilities, seccomp, rlimits) + exit, with a pooled network namespace and
  with a fresh one (``CLONE_NEWNET``);
* the same box built up one set-up step at a time (``box.py``'s order: the clone alone,
  then + the uid map, + ``/proc``, + the cover, + capabilities, + seccomp, + rlimits), so
  each step's cost is the difference between two rows;
* a whole rollout's share: member namespace + box + the workload, both ways.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _outer(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT))
    from collimate_rl.node.runtime import bwrap as bw
    from collimate_rl.node.runtime.host_paths import SUPERVISOR_DIR, python_paths
    from collimate_rl.node.runtime.sandbox_uid import resolve_sandbox_uid

    bwrap, _, note = bw.find_bwrap()
    if bwrap is None:
        print(f"no usable bwrap: {note}", file=sys.stderr)
        return 2
    exe, prefix = python_paths()
    me = Path(__file__).resolve()
    fds = bw.FdSet()
    argv = [bwrap, *bw.base_args(), *bw.etc_args(fds, network=False, tls_roots=False)]
    if not str(prefix).startswith("/usr/"):
        argv += ["--ro-bind", str(prefix), str(prefix)]
    argv += ["--tmpfs", "/.collimate", "--dir", "/.collimate/s", "--dir", "/.collimate/empty"]
    argv += ["--ro-bind", str(SUPERVISOR_DIR), "/.collimate/sup"]
    argv += ["--ro-bind", str(me), "/.collimate/bench.py"]
    argv += ["--dir", "/sandbox", "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/"]
    argv += [str(exe), "-I", "-S", "-B", "/.collimate/bench.py", "inner"]
    argv += ["--n", str(args.n), "--rounds", str(args.rounds)]
    uid = resolve_sandbox_uid(None) if os.geteuid() == 0 else os.geteuid()
    launch = bw.launch_preexec(uid, [prefix, SUPERVISOR_DIR, me], bwrap=bwrap)
    try:
        return subprocess.run(argv, pass_fds=fds.fds, preexec_fn=launch, check=False).returncode
    finally:
        fds.close()


def _inner(args: argparse.Namespace) -> int:  # pragma: no cover - runs in the container
    import importlib.util
    import resource

    here = "/.collimate/sup"
    spec = importlib.util.spec_from_file_location(
        "collimate_sandbox", here + "/__init__.py", submodule_search_locations=[here]
    )
    assert spec is not None and spec.loader is not None
    pkg = importlib.util.module_from_spec(spec)
    sys.modules["collimate_sandbox"] = pkg
    spec.loader.exec_module(pkg)
    from collimate_sandbox import common, hardening, seccomp
    from collimate_sandbox import syscalls as sc
    from collimate_sandbox.home import Home, open_ns
    from collimate_sandbox.members import Member, Members

    for name in ("json", "re", "typing", "dataclasses", "traceback", "ast", "socket"):
        __import__(name)
    ballast = [
        compile(f"def f{i}(x):\n    return [i * x for i in range(10)]\n", "<b>", "exec")
        for i in range(3000)
    ]  # ~ the warm harness and preloads
    home = Home.enter()
    common.freeze_heap()
    members = Members(home, 1 << 30)
    filt = seccomp.PreparedFilter(seccomp.build_seccomp_filter())  # as the master has it
    caps = sc.cap_last()
    limits = {
        "cpu_seconds": 60,
        "address_space_bytes": 4 << 30,
        "processes": 64,
        "file_size_bytes": 256 << 20,
        "open_files": 256,
    }
    work = compile(
        "def add(a, b):\n    return a + b\nfor i in range(200):\n    assert add(i, 1) == i + 1\n",
        "<work>",
        "exec",
    )
    unshare_net = sc.CLONE_NEWNET
    sc.unshare(unshare_net)
    slot = open_ns("net")
    sc.setns(home.fds["net"], unshare_net)
    counter = [0]

    def member() -> Member:
        counter[0] += 1
        m = Member(f"b{counter[0]}", ["/.collimate/empty"])
        members.mount(m)
        return m

    steps = ("uid map", "/proc", "/.collimate covered", "capabilities", "seccomp", "rlimits")

    def box_body(upto: int) -> None:
        """The first ``upto`` set-up steps of a box (``box.py``), in its order."""
        if upto > 0:
            proc = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY)
            sc.write_id_maps(proc, 1000, 1000, 1000)
        if upto > 1:
            sc.mount("proc", "/proc", "proc", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC, None)
        if upto > 2:
            flags = sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC
            sc.mount("none", "/.collimate", "tmpfs", flags, "size=4k,mode=0555")
        if upto > 3:
            hardening.drop_all_capabilities(caps, bounding=True)
        if upto > 4:
            seccomp.load_seccomp(filt)
        if upto > 5:
            hardening.apply_limits(limits)
            os.chdir("/sandbox")

    def box(
        m: Member, fresh_net: bool = False, do_work: bool = False, upto: int = len(steps)
    ) -> None:
        flags = sc.CLONE_NEWUSER | sc.CLONE_NEWPID | sc.CLONE_NEWNS
        with home.inside(mnt=m.mnt, ipc=m.ipc, net=-1 if fresh_net else slot):
            pid = sc.clone_process(flags | (sc.CLONE_NEWNET if fresh_net else 0))
            if pid == 0:
                try:
                    box_body(upto)
                    if do_work:
                        exec(work, {})
                except BaseException:
                    os._exit(1)
                os._exit(0)
        _wait(pid)

    def fork(do_work: bool = False) -> None:
        pid = os.fork()
        if pid == 0:
            if do_work:
                exec(work, {})
            os._exit(0)
        _wait(pid)

    def _wait(pid: int) -> None:
        if os.waitpid(pid, 0)[1] != 0:
            raise RuntimeError("child failed")

    kept = member()

    def rollout(fresh_net: bool) -> None:
        m = member()
        box(m, fresh_net, True)
        m.close()

    def drop_member() -> None:
        member().close()

    variants = [
        ("fork + exit", lambda: fork()),
        ("fork + a small Python workload (the floor's shape)", lambda: fork(True)),
        ("member mount namespace built in-process, then dropped", drop_member),
        ("box in an existing member, pooled netns, + exit", lambda: box(kept)),
        ("box in an existing member, fresh netns, + exit", lambda: box(kept, True)),
        ("set-up ladder: the clone alone (namespaces) + exit", lambda: box(kept, upto=0)),
        *(
            (f"set-up ladder: ... + {step}", lambda n=n: box(kept, upto=n))
            for n, step in enumerate(steps, 1)
        ),
        ("rollout: member namespace + box (pooled netns) + workload", lambda: rollout(False)),
        ("rollout: member namespace + box (fresh netns) + workload", lambda: rollout(True)),
    ]

    def used() -> float:
        a = resource.getrusage(resource.RUSAGE_SELF)
        b = resource.getrusage(resource.RUSAGE_CHILDREN)
        return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

    results: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for name, fn in variants:
            for _ in range(3):
                fn()
            t0, c0 = time.perf_counter(), used()
            for _ in range(args.n):
                fn()
            t1, c1 = time.perf_counter(), used()
            results.setdefault(name, []).append(
                (1000 * (c1 - c0) / args.n, 1000 * (t1 - t0) / args.n)
            )
    print("| | CPU ms | wall ms |\n|---|---|---|")
    for name, _ in variants:
        cpu = sorted(v[0] for v in results[name])[len(results[name]) // 2]
        wall = sorted(v[1] for v in results[name])[len(results[name]) // 2]
        print(f"| {name} | {cpu:.2f} | {wall:.1f} |")
    del ballast
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="outer", choices=("outer", "inner"))
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    return _inner(args) if args.mode == "inner" else _outer(args)


if __name__ == "__main__":
    sys.exit(main())
