"""Image pulls: ours (pull + unpack into the node's store) against skopeo + umoci, in turns.

The image is Debian bookworm minbase with python3 (``tests/_debian_images.py``,
``bookworm-py``), made a one-layer image with ``umoci`` and pushed with ``skopeo`` to a
``docker-registry`` on 127.0.0.1. Each round, in alternating order:

* ours: :func:`collimate_rl.node.images.pull.pull_image` into a fresh ``ImageStore``
  (fetch, verify, unpack the layer);
* the anchor a user without a daemon would script:
  ``skopeo copy docker://... oci:DIR:1`` then ``umoci unpack --rootless``.

Then a second image on the same base (the base plus a small app layer) is pulled into
the store that holds the first: the bytes fetched should be the app layer's (plus its
manifest and config), not the base's again.

Run:  COLLIMATE_TEST_IMAGE_CACHE=/work/cache/rootfs .venv/bin/python benchmarks/bench_images.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from collimate_rl.node.images.manifest import parse_manifest
from collimate_rl.node.images.pull import pull_image
from collimate_rl.node.images.reference import LayoutReference
from collimate_rl.node.images.sources import LayoutSource
from collimate_rl.node.images.store import ImageStore

ROOT = Path(__file__).resolve().parents[1]


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(step: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and its children) of one call."""
    cpu, wall = _cpu(), time.perf_counter()
    step()
    return time.perf_counter() - wall, _cpu() - cpu


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True)


def _build_images(work: Path, rootfs: Path, registry_host: str) -> tuple[str, str, int]:
    """Push deb/py:1 (the rootfs, one layer) and deb/app:1 (it plus a small layer)."""
    layout = work / "build"
    _run("umoci", "init", "--layout", str(layout))
    _run("umoci", "new", "--image", f"{layout}:py")
    _run("umoci", "raw", "add-layer", "--image", f"{layout}:py", str(rootfs))
    _run(
        "umoci",
        "config",
        "--image",
        f"{layout}:py",
        "--config.cmd",
        "python3",
        "--config.workingdir",
        "/app",
        "--config.env",
        "PATH=/usr/bin:/bin",
    )
    app_tar = work / "app.tar"
    payload = os.urandom(512 * 1024)  # incompressible: the app layer's size is known
    with tarfile.open(app_tar, "w") as tar:
        for name, data in (("app/main.py", b"print('hi')\n"), ("app/data.bin", payload)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    _run("umoci", "raw", "add-layer", "--image", f"{layout}:py", "--tag", "app", str(app_tar))
    for tag, name in (("py", "deb/py:1"), ("app", "deb/app:1")):
        _run(
            "skopeo",
            "--insecure-policy",
            "copy",
            "-q",
            "--dest-tls-verify=false",
            "--preserve-digests",
            f"oci:{layout}:{tag}",
            f"docker://{registry_host}/{name}",
        )
    # the app layer's size as umoci wrote it (gzip'd): the last layer of the app manifest
    source = LayoutSource(LayoutReference("oci", str(layout), "app"))
    try:
        app_layer_size = parse_manifest(source.manifest()).layers[-1].size
    finally:
        source.close()
    return f"{registry_host}/deb/py:1", f"{registry_host}/deb/app:1", app_layer_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", default="/var/tmp")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))  # the test helpers: the Debian rootfs, the registry
    from tests._debian_images import debian_rootfs
    from tests.node.images._registry import Registry, missing_tools

    lacking = missing_tools("docker-registry", "skopeo", "umoci")
    if lacking:
        print(lacking, file=sys.stderr)
        return 2
    rootfs = debian_rootfs("bookworm-py")
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="bench-images-") as tmp:
        work = Path(tmp)
        registry = Registry(work / "registry", work / "registry-storage")
        try:
            base_ref, app_ref, app_layer_size = _build_images(work, rootfs, registry.host)
            ours: list[tuple[float, float, float]] = []
            theirs: list[tuple[float, float, float, float]] = []
            for round_ in range(args.rounds):

                def run_ours() -> None:
                    store_dir = work / "store"
                    start = time.perf_counter()
                    fetched_at = [start]

                    def progress(done: int, total: int, what: str) -> None:
                        fetched_at[0] = time.perf_counter()  # the last call: all bytes are in

                    wall, cpu = _timed(
                        lambda: pull_image(base_ref, ImageStore(store_dir), progress=progress)
                    )
                    ours.append((wall, cpu, fetched_at[0] - start))
                    shutil.rmtree(store_dir)

                def run_theirs() -> None:
                    oci, bundle = work / "oci", work / "bundle"
                    copy = _timed(
                        lambda: _run(
                            "skopeo",
                            "--insecure-policy",
                            "copy",
                            "-q",
                            "--src-tls-verify=false",
                            f"docker://{base_ref}",
                            f"oci:{oci}:1",
                        )
                    )
                    unpack = _timed(
                        lambda: _run(
                            "umoci", "unpack", "--rootless", "--image", f"{oci}:1", str(bundle)
                        )
                    )
                    theirs.append((*copy, *unpack))
                    shutil.rmtree(oci)
                    shutil.rmtree(bundle)

                for step in (run_ours, run_theirs) if round_ % 2 == 0 else (run_theirs, run_ours):
                    step()
            store = ImageStore(work / "shared")
            first = pull_image(base_ref, store)
            second = None

            def pull_second() -> None:
                nonlocal second
                second = pull_image(app_ref, store)

            second_wall, _ = _timed(pull_second)
        finally:
            registry.stop()
    assert second is not None
    _report(
        ours,
        theirs,
        first.bytes_fetched,
        second.bytes_fetched,
        app_layer_size,
        second_wall,
        args.rounds,
    )
    return 0


def _report(
    ours: list[tuple[float, float, float]],
    theirs: list[tuple[float, float, float, float]],
    first_bytes: int,
    second_bytes: int,
    app_layer_size: int,
    second_wall: float,
    rounds: int,
) -> None:
    med = statistics.median
    our_wall, our_cpu = med(o[0] for o in ours), med(o[1] for o in ours)
    our_fetch = med(o[2] for o in ours)
    copy_wall, unpack_wall = med(t[0] for t in theirs), med(t[2] for t in theirs)
    their_wall = med(t[0] + t[2] for t in theirs)
    their_cpu = med(t[1] + t[3] for t in theirs)
    print(
        f"bookworm python image, {first_bytes / 1e6:.1f} MB fetched; median of {rounds} rounds in turns"
    )
    print("| runner | wall s | CPU s |")
    print("|---|---|---|")
    print(
        f"| collimate pull_image (fetch + verify + unpack) | {our_wall:.2f} ({our_fetch:.2f} + "
        f"{our_wall - our_fetch:.2f}) | {our_cpu:.2f} |"
    )
    print(
        f"| skopeo copy + umoci unpack --rootless | {their_wall:.2f} ({copy_wall:.2f} + {unpack_wall:.2f}) | {their_cpu:.2f} |"
    )
    print(f"ratio ours/theirs: wall {our_wall / their_wall:.2f}, CPU {our_cpu / their_cpu:.2f}")
    print(
        f"second image on the same base: {second_bytes} bytes fetched in {second_wall:.2f} s "
        f"(its app layer is {app_layer_size} bytes; the base is {first_bytes})"
    )


if __name__ == "__main__":
    raise SystemExit(main())
