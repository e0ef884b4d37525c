"""Image-template sessions against python3 sessions, side by side in turns.

On one bwrap runtime with the built-in ``python3`` template and an image template of Debian
bookworm with python3 (``tests/_debian_images.py``'s ``bookworm-py``, unpacked as one layer):

* create + first exec (``echo hi``), then close, alternating python3 / image each round:
  p50 and p90 of each and the ratio (target: image <= 1.5x python3);
* a 64-wide fork of an image session (its parent ran one exec that wrote a file), against the
  same fork of a python3 session (target: < 100 ms);
* per forked session, idle (created, nothing run yet) and after one exec each: disk (the
  session's tmpfs use under its working folder, ``df`` inside) and unique memory (the growth
  of the private pages of every process of the sandbox uid, ``smaps_rollup``), over 64;
* ``podman run --rm`` of the same root filesystem (``podman import``), the per-rollout
  anchor a user would script, where podman runs: with podman's default runtime, else runc
  (``PODMAN_RUNTIMES``), rlimits lowered to what a container without CAP_SYS_RESOURCE may
  set (``PODMAN_FLAGS``); else the bench prints each runtime's error.

Run:  COLLIMATE_TEST_IMAGE_CACHE=/work/cache/rootfs nice .venv/bin/python \\
          benchmarks/bench_images_sessions.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collimate_rl.node.runtime import (  # noqa: E402
    ExecSpec,
    ImageRoot,
    LocalRuntime,
    TemplateSpec,
    create_runtime,
)

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
WIDTH = 64
PODMAN_IMAGE = "localhost/collimate-bench/bookworm-py:1"


def _seed() -> str:
    return secrets.token_hex(32)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _create_exec_close(rt: LocalRuntime, template: str) -> float:
    start = time.perf_counter()
    sess = await rt.create_session(template, f"b-{secrets.token_hex(4)}")
    out = await sess.exec(ExecSpec(seed=_seed(), command="echo hi"))
    took = time.perf_counter() - start
    assert out.output == b"hi\n", out.output
    await sess.close()
    return took * 1e3


def _private_kib(uid: int) -> int:
    """Private (unique) memory of every process of ``uid``, in KiB."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith(("Private_Clean:", "Private_Dirty:")):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


async def _fork_cost(rt: LocalRuntime, template: str, uid: int) -> dict[str, float]:
    parent = await rt.create_session(template, f"p-{secrets.token_hex(4)}")
    await parent.exec(ExecSpec(seed=_seed(), command="echo state > marker"))
    before = _private_kib(uid)
    start = time.perf_counter()
    kids = await parent.fork([f"k{i}-{secrets.token_hex(3)}" for i in range(WIDTH)])
    fork_ms = (time.perf_counter() - start) * 1e3
    idle_kib = (_private_kib(uid) - before) / WIDTH
    outs = await asyncio.gather(
        *(k.exec(ExecSpec(seed=_seed(), command="df -k . | tail -n +2")) for k in kids)
    )
    used_kib = (_private_kib(uid) - before) / WIDTH
    disk = []
    for out in outs:
        rows = out.output.decode().split("\n")[0].split()
        disk.append(int(rows[2]) if len(rows) > 2 and rows[2].isdigit() else 0)
    await rt.close_sessions([*kids, parent])
    return {
        "fork_ms": fork_ms,
        "idle_unique_kib": idle_kib,
        "used_unique_kib": used_kib,
        "used_disk_kib": statistics.mean(disk) if disk else 0.0,
    }


#: ``podman run``'s flags besides the image: no network (as an image session without one), and
#: rlimits no higher than this process's. Podman's default for root is ``nofile`` and ``nproc``
#: at 1048576, which a runtime cannot set where the machine is itself a container without
#: CAP_SYS_RESOURCE (``setrlimit RLIMIT_NOFILE: Operation not permitted: OCI permission
#: denied``); lowering a limit needs no privilege, and ``echo hi`` opens 3 files.
PODMAN_FLAGS = (
    "--rm",
    "--network=none",
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=4096:4096",
)
#: The OCI runtimes tried, in turn: podman's default (crun on Debian), then runc (Debian's
#: ``runc``), which runs where crun refuses a hybrid cgroup layout (cgroup v1 controllers plus a
#: cgroup2 at ``/sys/fs/cgroup/unified``: ``crun: cgroups in hybrid mode not supported``).
PODMAN_RUNTIMES: tuple[tuple[str, ...], ...] = ((), ("--runtime", "runc"))


def _podman_run(runtime: tuple[str, ...]) -> float | str:
    """One ``podman run --rm`` of the image printing hi (ms), or why podman cannot run here."""
    start = time.perf_counter()
    done = subprocess.run(
        ["podman", "run", *runtime, *PODMAN_FLAGS, PODMAN_IMAGE, "echo", "hi"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0 or done.stdout != "hi\n":
        lines = (done.stderr or done.stdout or f"exit {done.returncode}").strip().splitlines()
        return lines[-1][:200]
    return (time.perf_counter() - start) * 1e3


def _podman_ready(tar: Path) -> tuple[tuple[str, ...], str | None]:
    """The runtime flags ``podman run`` works with here, or why it works with none."""
    if shutil.which("podman") is None:
        return (), "podman is not installed"
    have = subprocess.run(["podman", "image", "exists", PODMAN_IMAGE], check=False)
    if have.returncode != 0:
        subprocess.run(
            ["podman", "import", str(tar), PODMAN_IMAGE], capture_output=True, check=True
        )
    problems = []
    for runtime in PODMAN_RUNTIMES:
        if runtime and shutil.which(runtime[-1]) is None:
            problems.append(f"{runtime[-1]}: not installed")
            continue
        first = _podman_run(runtime)
        if not isinstance(first, str):
            return runtime, None
        problems.append(f"{runtime[-1] if runtime else 'default runtime'}: {first}")
    return (), "; ".join(problems)


async def main(rounds: int) -> None:
    from tests._debian_images import debian_rootfs
    from tests.node.images._rootfs import rootfs_layer

    layer = rootfs_layer("bookworm-py")
    uid = 2_100_000_000 + os.getpid() % 1000
    rt = create_runtime("bwrap", sandbox_uid=uid)
    await rt.start()
    podman_runtime, podman_problem = _podman_ready(debian_rootfs("bookworm-py"))
    try:
        image = ImageRoot(layers=(layer,), env=(("PATH", PATH),), ref="bookworm-py")
        await rt.add_template(TemplateSpec("image", image=image))
        for template in ("python3", "image"):  # warm both: workers, zygote, spares
            for _ in range(3):
                await _create_exec_close(rt, template)
        times: dict[str, list[float]] = {"python3": [], "image": [], "podman": []}
        for i in range(rounds):
            order = ("python3", "image") if i % 2 == 0 else ("image", "python3")
            for template in order:
                times[template].append(await _create_exec_close(rt, template))
            if podman_problem is None and i < 10:
                took = _podman_run(podman_runtime)
                if isinstance(took, float):
                    times["podman"].append(took)
        print(f"create + first exec + close, {rounds} rounds in turns (ms):")
        for name, values in times.items():
            if values:
                print(f"  {name:8s} p50 {_pct(values, 0.5):7.2f}  p90 {_pct(values, 0.9):7.2f}")
        ratio = statistics.median(times["image"]) / statistics.median(times["python3"])
        print(f"  image / python3 p50 ratio: {ratio:.2f}x (target <= 1.5x)")
        if times["podman"]:
            anchor = statistics.median(times["podman"]) / statistics.median(times["image"])
            how = " ".join(("podman run", *podman_runtime, *PODMAN_FLAGS))
            print(f"  podman run --rm / image session: {anchor:.1f}x ({how})")
        else:
            print(f"  podman run --rm: not measured ({podman_problem})")
        print(f"{WIDTH}-wide fork of a session that ran one exec, per template:")
        for template in ("python3", "image", "python3", "image"):
            cost = await _fork_cost(rt, template, uid)
            print(
                f"  {template:8s} fork {cost['fork_ms']:6.1f} ms; per session: idle unique "
                f"{cost['idle_unique_kib']:6.1f} KiB, after one exec unique "
                f"{cost['used_unique_kib']:6.1f} KiB and disk {cost['used_disk_kib']:.0f} KiB"
            )
    finally:
        await rt.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=30)
    asyncio.run(main(parser.parse_args().rounds))
