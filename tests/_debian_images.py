"""Real Debian root filesystems for the image tests, built offline with ``mmdebstrap``.

Each flavour is built once per machine (a CI run, a developer's box) into a cache folder and
reused: ``mmdebstrap --variant=minbase --mode=root --format=tar SUITE OUT.tar`` from Debian's
package mirror, ~15-35 s each. Where ``mmdebstrap`` is missing or cannot run (not root, no
mirror), :func:`debian_rootfs` skips the calling test and says why.

>>> sorted(FLAVOURS)
['bookworm-nopy', 'bookworm-py', 'bookworm-pytest', 'trixie-py']
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

# name -> (suite, packages to include): a python3 (3.11), one with pytest and git (repository
# tasks), a newer Python than the node's (trixie: 3.13), and none at all.
FLAVOURS: dict[str, tuple[str, tuple[str, ...]]] = {
    "bookworm-py": ("bookworm", ("python3",)),
    "bookworm-pytest": ("bookworm", ("python3", "python3-pytest", "git")),
    "trixie-py": ("trixie", ("python3",)),
    "bookworm-nopy": ("bookworm", ()),
}


def cache_dir() -> Path:
    """Where built tarballs are kept: ``$COLLIMATE_TEST_IMAGE_CACHE``, else under /var/tmp."""
    return Path(os.environ.get("COLLIMATE_TEST_IMAGE_CACHE", "/var/tmp/collimate-test-rootfs"))


def debian_rootfs(flavour: str) -> Path:
    """The rootfs tarball of ``flavour``, built on first use; skips the test if it cannot be."""
    suite, packages = FLAVOURS[flavour]
    out = cache_dir() / f"{flavour}.tar"
    if out.exists():
        return out
    mmdebstrap = shutil.which("mmdebstrap")
    if mmdebstrap is None:
        pytest.skip("mmdebstrap is not installed (apt-get install mmdebstrap)")
    if os.geteuid() != 0:
        pytest.skip("building a Debian rootfs with mmdebstrap --mode=root needs root")
    out.parent.mkdir(parents=True, exist_ok=True)
    # One build per flavour even when several test processes ask at once.
    with open(out.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.exists():
            return out
        partial = out.with_suffix(".partial.tar")
        args = [mmdebstrap, "-q", "--variant=minbase", "--mode=root", "--format=tar"]
        if packages:
            args.append("--include=" + ",".join(packages))
        done = subprocess.run(
            [*args, suite, str(partial)], capture_output=True, text=True, timeout=600
        )
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            pytest.skip(f"mmdebstrap could not build {flavour}: {done.stderr.strip()[-400:]}")
        partial.rename(out)
    return out
