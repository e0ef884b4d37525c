"""Unpacking an image layer: the node's confined unpacker against ``umoci unpack --rootless``.

    cd /tmp && <venv>/bin/python <checkout>/benchmarks/image_unpack.py [--rounds 3] [--rootfs TAR]

Builds a one-layer OCI image of the bookworm python root filesystem with umoci (``umoci
init``, ``new``, ``raw add-layer``, which gzips it; once, kept in ``--work``), then in turns
unpacks that same gzip layer blob with ``umoci unpack --rootless`` and with the node's
image store (``ImageStore.unpack_layer``: digest check, decompression, the confined
writes, the rename into place; in a fresh process, like umoci). Each run's wall time and
CPU (user, system: ``wait4``'s rusage) are printed, then the medians and the ratios.
The rootfs comes from ``tests/_debian_images.py`` (``$COLLIMATE_TEST_IMAGE_CACHE``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"


def _run(argv: list[str]) -> tuple[float, float, float]:
    """Wall, user and system seconds of one command."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {err[-2000:]}")
    if proc.stderr:
        proc.stderr.close()
    return wall, usage.ru_utime, usage.ru_stime


def _layout(work: Path, rootfs: Path) -> tuple[Path, str]:
    """The umoci layout ``work/oci`` holding ``rootfs`` as one gzip layer; its layer digest."""
    layout = work / "oci"
    if not (layout / "index.json").exists():
        shutil.rmtree(layout, ignore_errors=True)
        subprocess.run(["umoci", "init", "--layout", str(layout)], check=True)
        subprocess.run(["umoci", "new", "--image", f"{layout}:1"], check=True)
        subprocess.run(
            ["umoci", "raw", "add-layer", "--image", f"{layout}:1", str(rootfs)], check=True
        )
    index = json.loads((layout / "index.json").read_text())
    manifest_digest = index["manifests"][0]["digest"]
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / manifest_digest.split(":")[1]).read_text())
    return layout, manifest["layers"][-1]["digest"]


def _ours_once(store_dir: str, blob: str, digest: str) -> None:
    from collimate_rl.node.images.store import ImageStore

    store = ImageStore(Path(store_dir))
    target = store.blob_path(digest)
    if not target.exists():
        os.link(blob, target)  # the blob as a pull leaves it (same file system)
    store.unpack_layer(digest, LAYER_GZIP)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rootfs", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=Path("/var/tmp/collimate-bench-unpack"))
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _ours_once(*args.one)
        return 0
    rootfs = args.rootfs
    if rootfs is None:
        cache = os.environ.get("COLLIMATE_TEST_IMAGE_CACHE", "/var/tmp/collimate-test-rootfs")
        rootfs = Path(cache) / "bookworm-py.tar"
    if not rootfs.exists() or shutil.which("umoci") is None:
        print(f"needs umoci and {rootfs} (tests/_debian_images.py builds it)", file=sys.stderr)
        return 2
    args.work.mkdir(parents=True, exist_ok=True)
    layout, digest = _layout(args.work, rootfs)
    blob = layout / "blobs" / "sha256" / digest.split(":")[1]
    print(
        f"layer {digest}: {blob.stat().st_size / 1e6:.1f} MB gzip, {rootfs.stat().st_size / 1e6:.1f} MB tar"
    )
    results: dict[str, list[tuple[float, float, float]]] = {"umoci": [], "ours": []}
    for round_no in range(args.rounds):
        for name in ("umoci", "ours") if round_no % 2 == 0 else ("ours", "umoci"):
            dest = args.work / f"run-{name}"
            shutil.rmtree(dest, ignore_errors=True)
            subprocess.run(["sync"], check=True)
            if name == "umoci":
                argv = ["umoci", "unpack", "--rootless", "--image", f"{layout}:1", str(dest)]
            else:
                argv = [sys.executable, __file__, "--one", str(dest), str(blob), digest]
            wall, user, system = _run(argv)
            results[name].append((wall, user, system))
            print(
                f"round {round_no + 1} {name:5}  wall {wall:6.2f} s  user {user:5.2f} s  sys {system:5.2f} s"
            )
            shutil.rmtree(dest, ignore_errors=True)
    med = {k: [statistics.median(r[i] for r in v) for i in range(3)] for k, v in results.items()}
    for name, (wall, user, system) in med.items():
        print(
            f"median {name:5}  wall {wall:6.2f} s  user {user:5.2f} s  sys {system:5.2f} s  cpu {user + system:5.2f} s"
        )
    ours, umoci = med["ours"], med["umoci"]
    print(
        f"ours / umoci: wall {ours[0] / umoci[0]:.2f}x, "
        f"cpu {(ours[1] + ours[2]) / (umoci[1] + umoci[2]):.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
