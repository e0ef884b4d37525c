"""Unpacked layers as overlayfs lower layers, the way the node's sandboxes mount them:
unprivileged, in a user namespace, with ``userxattr``.

Checks that an unprivileged uid may create the 0:0 whiteouts (Linux 5.8+), in and out of
a user namespace; that such an overlay honours the whiteouts and the
``user.overlay.opaque`` xattr the unpacker writes; and that a real Debian root
filesystem, unpacked by the store, runs its own ``python3`` through such an overlay.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from collimate_rl.node.images.store import ImageStore
from collimate_rl.node.images.unpack import unpack_layer_blob

from ._layers import directory, file, layer_blob

_UNPRIVILEGED = 2_000_000_123  # a uid no account uses (sandbox_uid.py's range)
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_PR_SET_DUMPABLE = 4
_libc = ctypes.CDLL(None, use_errno=True)

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="drops to an unprivileged uid: root only")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the unprivileged uid can reach (pytest's tmp_path is 0700 root's)."""
    path = Path(tempfile.mkdtemp(prefix="collimate-overlay-test-"))
    os.chmod(path, 0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _check(ok: int, what: str) -> None:
    if ok != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _as_unprivileged(fn: Callable[[], str], *, userns: bool) -> str:
    """Run ``fn`` in a child dropped to an unprivileged uid (and maybe in a new user+mount
    namespace, uid 1000 inside); returns what it returned, or raises what it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(_UNPRIVILEGED)
            os.setuid(_UNPRIVILEGED)
            if userns:
                _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)  # so /proc/self/*_map are ours
                _check(_libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS), "unshare")
                Path("/proc/self/setgroups").write_text("deny")
                Path("/proc/self/uid_map").write_text(f"1000 {_UNPRIVILEGED} 1")
                Path("/proc/self/gid_map").write_text(f"1000 {_UNPRIVILEGED} 1")
            out = "ok " + fn()
        except BaseException as exc:
            out = f"error {type(exc).__name__}: {exc}"
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as pipe:
        out = pipe.read().decode()
    os.waitpid(pid, 0)
    if not out.startswith("ok "):
        if "unshare" in out and "EPERM" in out.upper():
            pytest.skip(f"no unprivileged user namespaces here: {out}")
        raise AssertionError(out)
    return out[3:]


def _mount_overlay(lowers: list[Path], scratch: Path) -> Path:
    """Mount, like the sandboxes do: lowerdir top first, ``userxattr``; returns the mount."""
    for sub in ("upper", "work", "merged"):
        (scratch / sub).mkdir()
    opts = (
        f"lowerdir={':'.join(str(p) for p in reversed(lowers))},"
        f"upperdir={scratch / 'upper'},workdir={scratch / 'work'},userxattr"
    )
    _check(
        _libc.mount(b"overlay", str(scratch / "merged").encode(), b"overlay", 0, opts.encode()),
        "mount overlay",
    )
    return scratch / "merged"


@needs_root
@pytest.mark.parametrize("userns", [False, True], ids=["plain", "userns"])
def test_an_unprivileged_uid_unpacks_whiteouts(shared_dir: Path, userns: bool) -> None:
    blob = layer_blob([file("etc/.wh.motd"), file("var/.wh..wh..opq"), file("bin/sh", b"#")])
    blob_path = blob.write(shared_dir / "blob")
    os.chmod(blob_path, 0o644)
    work = shared_dir / "work"
    work.mkdir()
    os.chown(work, _UNPRIVILEGED, _UNPRIVILEGED)

    def unpack() -> str:
        layer = work / "layer"
        unpack_layer_blob(blob_path, blob.digest, blob.media_type, layer)
        st = os.lstat(layer / "etc" / "motd")
        return f"{st.st_mode:o} {st.st_rdev} {os.getxattr(layer / 'var', 'user.overlay.opaque')!r}"

    assert _as_unprivileged(unpack, userns=userns) == "20000 0 b'y'"


@needs_root
def test_an_overlay_in_a_user_namespace_honours_whiteouts_and_opaque_dirs(
    shared_dir: Path,
) -> None:
    store = ImageStore(shared_dir / "store")
    lower = layer_blob(
        [
            file("etc/motd", b"hello"),
            file("etc/keep", b"k"),
            file("var/cache/old", b"o"),
            directory("var/cache/olddir"),
        ]
    )
    upper = layer_blob(
        [file("etc/.wh.motd"), file("var/cache/.wh..wh..opq"), file("var/cache/new", b"n")]
    )
    dirs = []
    for blob in (lower, upper):
        store.put_blob(blob.digest, blob.data)
        dirs.append(store.unpack_layer(blob.digest, blob.media_type))
    scratch = shared_dir / "scratch"
    scratch.mkdir()
    os.chown(scratch, _UNPRIVILEGED, _UNPRIVILEGED)

    def look() -> str:
        merged = _mount_overlay(dirs, scratch)
        return repr(
            (sorted(os.listdir(merged / "etc")), sorted(os.listdir(merged / "var" / "cache")))
        )

    assert _as_unprivileged(look, userns=True) == repr((["keep"], ["new"]))


@needs_root
@pytest.mark.slow
def test_a_real_rootfs_runs_its_python_as_an_overlay_lower_layer(shared_dir: Path) -> None:
    from _debian_images import debian_rootfs  # tests/ is on the path (its conftest)

    rootfs = debian_rootfs("bookworm-py")
    store = ImageStore(shared_dir / "store")
    digest = (
        "sha256:"
        + subprocess.run(
            ["sha256sum", str(rootfs)], capture_output=True, text=True, check=True
        ).stdout.split()[0]
    )
    try:
        os.link(rootfs, store.blob_path(digest))  # the blob as a pull would leave it
    except OSError:
        shutil.copyfile(rootfs, store.blob_path(digest))
    layer = store.unpack_layer(digest, "application/vnd.oci.image.layer.v1.tar")
    report = store.layer_report(digest)
    assert report is not None and report.entries > 10_000
    scratch = shared_dir / "scratch"
    scratch.mkdir()
    os.chown(scratch, _UNPRIVILEGED, _UNPRIVILEGED)

    def run_python() -> str:
        merged = _mount_overlay([layer], scratch)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the grandchild
            os.dup2(w, 1)
            os.chroot(merged)
            os.chdir("/")
            code = "import sys, sqlite3, json; print(sys.version_info[:2], os.getuid())"
            os.execve(
                "/usr/bin/python3",
                ["python3", "-c", "import os; " + code],
                {"PATH": "/usr/bin:/bin"},
            )
        os.close(w)
        with os.fdopen(r) as out:
            text = out.read().strip()
        _, status = os.waitpid(pid, 0)
        return f"{text} rc={os.waitstatus_to_exitcode(status)}"

    assert _as_unprivileged(run_python, userns=True) == "(3, 11) 1000 rc=0"
