"""The unpacker's tar reader against Python's ``tarfile`` in stream mode, on one rootfs tar.

    .venv/bin/python benchmarks/tar_reader.py [TAR] [--rounds 3]

Both read every entry and every byte of content from the same uncompressed tar (default:
the bookworm python rootfs of ``tests/_debian_images.py``, built once per machine), in
turns; wall and process CPU per reader. docs/architecture.md ("Hand-written pieces") cites
the result.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from collimate_rl.node.images._tar import TarReader


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def ours(path: Path) -> int:
    with open(path, "rb", buffering=0) as f:
        reader, total = TarReader(f.read), 0
        for _ in reader.entries():
            for chunk in reader.chunks():
                total += len(chunk)
    return total


def tarfile_stream(path: Path) -> int:
    with open(path, "rb", buffering=0) as f, tarfile.open(fileobj=f, mode="r|") as tf:
        total = 0
        for member in tf:
            handle = tf.extractfile(member) if member.isreg() else None
            while handle is not None and (chunk := handle.read(1 << 20)):
                total += len(chunk)
    return total


def main() -> None:
    default = Path("/var/tmp/collimate-test-rootfs/bookworm-py.tar")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tar", nargs="?", type=Path, default=default)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    readers: list[tuple[str, Callable[[Path], int]]] = [
        ("tarfile r|", tarfile_stream),
        ("ours", ours),
    ]
    for turn in range(1, args.rounds + 1):
        for name, read in readers:
            wall, cpu = time.perf_counter(), _cpu()
            size = read(args.tar)
            wall, cpu = time.perf_counter() - wall, _cpu() - cpu
            print(f"round {turn}: {name:10s} {wall:.2f} s wall, {cpu:.2f} s CPU, {size >> 20} MiB")


if __name__ == "__main__":
    main()
