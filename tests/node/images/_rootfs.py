"""Unpacked Debian root filesystems as image layers, for the image-template tests.

The tarballs come from ``tests/_debian_images.py`` (built once per machine with
mmdebstrap); each is unpacked once, as root (owners kept: root's, as an image store unpacks
them), into ``<cache>/<flavour>.layer``, without the device nodes mmdebstrap leaves in
``/dev`` (an image store neutralises those; sessions get the node's ``/dev``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests._debian_images import cache_dir, debian_rootfs


def rootfs_layer(flavour: str) -> Path:
    """The unpacked layer of ``flavour``; skips the test where it cannot be had."""
    if os.geteuid() != 0:
        pytest.skip("unpacking a root filesystem with its owners needs root")
    tar = debian_rootfs(flavour)
    out = cache_dir() / f"{flavour}.layer"
    if out.is_dir():
        return out
    with open(cache_dir() / f"{flavour}.layer.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.is_dir():
            return out
        partial = cache_dir() / f"{flavour}.layer.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(mode=0o755)
        done = subprocess.run(
            ["tar", "-x", "-f", str(tar), "-C", str(partial), "--exclude=./dev/*"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            pytest.skip(f"cannot unpack {tar}: {done.stderr.strip()[-400:]}")
        partial.rename(out)
    return out
