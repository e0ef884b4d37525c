"""Image templates on the local node: the image's root filesystem is each session's ``/``.

Real Debian root filesystems (bookworm with python 3.11, trixie with 3.13, one without
python3), real bwrap containers, real overlays: the image's Env, WorkingDir and User, its
own binaries and python3, copy-on-write sessions and forks, byte-exact files, seeds,
limits, and the node's runtime out of the candidate's sight.
"""

from __future__ import annotations

import base64
import secrets
from pathlib import Path

import pytest

from collimate_rl.node.runtime import ImageWithoutPython, LocalRuntime, LocalSession
from collimate_rl.node.runtime.host_paths import SUPERVISOR_DIR, python_paths

from ..runtime.conftest import TEST_LIMITS, run, seed
from ..runtime.test_runtime_lifecycle import procs_of_uid, until_no_process_of
from ._rootfs import rootfs_layer

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


async def session(rt: LocalRuntime, template: str) -> LocalSession:
    s = await rt.create_session(template, f"{template}-{secrets.token_hex(4)}")
    assert isinstance(s, LocalSession)
    return s


async def test_the_image_root_env_workdir_and_user(img_rt: LocalRuntime) -> None:
    s = await session(img_rt, "bookworm")
    try:
        out = await run(
            s,
            command="id -u; id -g; pwd; echo $FOO $HOME; cat /etc/debian_version; "
            "python3 -c 'import sys; print(sys.version_info[:2])'; ls -ld /root",
        )
        lines = out.output.decode().splitlines()
        assert out.exit_code == 0, out.output
        assert lines[:4] == ["0", "0", "/work", "bar /root"]
        assert lines[4].startswith("12.")  # bookworm's own /etc
        assert lines[5] == "(3, 11)"
        assert lines[6].startswith("drwx------") and " root root " in lines[6]
    finally:
        await s.close()


async def test_code_runs_the_images_own_python(img_rt: LocalRuntime) -> None:
    s = await session(img_rt, "trixie")
    try:
        code = "import os, sys\nprint(sys.version_info[:2], sys.executable)\n"
        code += "print(os.environ['COLLIMATE_SEED'])\n"
        out = await run(s, code=code, seed=seed(7))
        assert out.exit_code == 0, out.output
        assert out.output.decode().splitlines() == ["(3, 13) /usr/bin/python3", seed(7)]
        assert out.seed_ack == "verified"
        out = await run(s, command="echo $COLLIMATE_SEED", seed=seed(9))
        assert out.output == f"{seed(9)}\n".encode() and out.seed_ack == "verified"
    finally:
        await s.close()


async def test_an_image_without_python_refuses_code_clearly(img_rt: LocalRuntime) -> None:
    s = await session(img_rt, "nopy")
    try:
        with pytest.raises(ImageWithoutPython, match="no python3"):
            await run(s, code="print(1)")
        out = await run(s, command="ls /usr/bin/python3; echo rc=$?; ls /usr/bin/env")
        assert b"rc=2" in out.output and b"/usr/bin/env" in out.output
        out = await run(s, commands=(("sh", "-c", "echo argv works"),))
        assert out.output == b"argv works\n"
    finally:
        await s.close()


async def test_writes_are_copy_on_write_per_session(img_rt: LocalRuntime) -> None:
    layer = rootfs_layer("bookworm-py")
    before = sorted(p.name for p in (layer / "etc").iterdir())
    a, b = await session(img_rt, "bookworm"), await session(img_rt, "bookworm")
    try:
        out = await run(a, command="echo mine > /etc/marker && rm /etc/hostname && cat /etc/marker")
        assert out.output == b"mine\n", out.output
        out = await run(b, command="cat /etc/marker; test -e /etc/hostname && echo present")
        assert b"No such file" in out.output and b"present" in out.output
        out = await run(a, command="test -e /etc/hostname || echo deleted")
        assert out.output == b"deleted\n"
    finally:
        await a.close()
        await b.close()
    assert sorted(p.name for p in (layer / "etc").iterdir()) == before


async def test_forks_share_the_parent_and_write_privately(img_rt: LocalRuntime) -> None:
    parent = await session(img_rt, "bookworm")
    try:
        await run(parent, command="mkdir -p /srv/app && echo v1 > /srv/app/state")
        kids = await parent.fork([f"k{i}-{secrets.token_hex(3)}" for i in range(3)])
        for i, kid in enumerate(kids):
            out = await run(kid, command=f"cat /srv/app/state; echo k{i} > /srv/app/state")
            assert out.output == b"v1\n"
        outs = [await run(k, command="cat /srv/app/state") for k in kids]
        assert [o.output for o in outs] == [b"k0\n", b"k1\n", b"k2\n"]
        out = await run(parent, command="cat /srv/app/state; python3 -c 'print(2+2)'")
        assert out.output == b"v1\n4\n"
        grandkids = await kids[0].fork(["g-" + secrets.token_hex(3)])
        out = await run(grandkids[0], command="cat /srv/app/state; ls /proc/1/root")
        assert out.output.startswith(b"k0\n")
        for s in (*kids, *grandkids):
            await s.close()
    finally:
        await parent.close()


async def test_files_are_byte_exact_in_the_image_root(img_rt: LocalRuntime) -> None:
    blob = bytes(range(256)) * 3 + b"\r\n\x00no newline"
    s = await session(img_rt, "bookworm")
    try:
        out = await run(
            s,
            files=(("data/blob.bin", blob), ("/opt/abs.bin", blob)),
            command="base64 -w0 data/blob.bin; echo; base64 -w0 /work/data/blob.bin; echo; "
            "base64 -w0 /opt/abs.bin",
        )

        lines = out.output.decode().split("\n")
        assert [base64.b64decode(x) for x in lines] == [blob, blob, blob]
        out = await run(s, code=f"print(open('/opt/abs.bin', 'rb').read() == {blob!r})")
        assert out.output == b"True\n"
    finally:
        await s.close()


async def test_timeouts_and_limits_hold(img_rt: LocalRuntime) -> None:
    s = await session(img_rt, "bookworm")
    try:
        out = await run(s, command="sleep 30", timeout=1)
        assert out.timed_out and out.exit_code == -1
        # files under RLIMIT_FSIZE each, together past the session's disk
        each = TEST_LIMITS.file_size_bytes // (1 << 20) - 1
        count = TEST_LIMITS.session_disk_bytes // (each << 20) + 1
        out = await run(
            s,
            command=f"for i in $(seq {count}); do "
            f"dd if=/dev/zero of=/big$i bs=1M count={each} 2>&1 | grep -i 'space'; done",
        )
        assert b"No space left" in out.output, out.output
        out = await run(
            s,
            command="rm -f /big*; grep -E '^Max (processes|open files)' /proc/self/limits "
            "| awk '{print $(NF-2)}'",
        )
        assert out.output.split() == [
            str(TEST_LIMITS.processes).encode(),
            str(TEST_LIMITS.open_files).encode(),
        ]
    finally:
        await s.close()


async def test_the_image_user_is_mapped_onto_the_sandbox_uid(img_rt: LocalRuntime) -> None:
    s = await session(img_rt, "appuser")
    try:
        out = await run(
            s,
            command="id; echo $HOME; touch $HOME/mine && echo home-ok; "
            "touch /etc/theirs 2>&1 | grep -c 'Permission denied'",
        )
        lines = out.output.decode().splitlines()
        assert lines[0].startswith("uid=1001(app) gid=1001(app)"), lines
        assert lines[1:] == ["/home/app", "home-ok", "1"]
    finally:
        await s.close()


async def test_the_nodes_runtime_is_out_of_sight(img_rt: LocalRuntime) -> None:
    """Nothing of the node's is a path in the image root: its supervisor, its Python, its
    state dir, the image's own layer on the host, another template's layers."""
    _exe, prefix = python_paths()
    hidden = [
        "/.collimate",
        "/.collimate/sup",
        str(SUPERVISOR_DIR),
        str(img_rt.state_dir),
        str(rootfs_layer("bookworm-py")),
        str(rootfs_layer("trixie-py")),
    ]
    if not str(prefix).startswith("/usr"):
        hidden.append(str(prefix))
    s = await session(img_rt, "bookworm")
    try:
        probe = "; ".join(f"test -e '{p}' && echo 'SEEN {p}'" for p in hidden)
        out = await run(s, command=probe + "; echo done")
        assert out.output == b"done\n", out.output
        # pid 1 is the box's init: not dumpable, so neither its root nor its memory
        out = await run(
            s, command="ls /proc/1/root/ 2>&1; readlink -v /proc/1/exe 2>&1; cat /proc/1/environ"
        )
        assert out.output.count(b"Permission denied") == 3, out.output
        out = await run(
            s, command="cat /proc/self/mountinfo | awk '{print $5}' | sort -u | tr '\\n' ' '"
        )
        assert b"/.collimate" not in out.output and b"/usr/lib/python" not in out.output
    finally:
        await s.close()


async def test_close_leaves_nothing(require_bwrap: None, tmp_path: Path) -> None:
    from collimate_rl.node.runtime import TemplateSpec, create_runtime

    from .conftest import IMAGE_SANDBOX_UID, image

    uid = IMAGE_SANDBOX_UID + 1
    rt = create_runtime("bwrap", state_dir=tmp_path / "state", limits=TEST_LIMITS, sandbox_uid=uid)
    await rt.start()
    try:
        await rt.add_template(TemplateSpec("img", image=image((rootfs_layer("bookworm-py"),))))
        s = await session(rt, "img")
        await run(s, command="sleep 60 & echo started")
        kids = await s.fork(["a", "b"])
        for k in kids:
            await run(k, command="echo hi > /x")
        assert procs_of_uid(uid)
    finally:
        await rt.close()
    assert await until_no_process_of(uid) == []
    assert not (tmp_path / "state").exists()


async def test_the_classic_chroot_escapes_fail(img_rt: LocalRuntime) -> None:
    """A chroot jail is only as good as what the jailed lack: the capability to chroot
    again, a descriptor of a folder outside, a process outside to borrow a root from, a
    way to mount or to make namespaces. Each attempt, from the image's own python3."""
    code = r"""
import ctypes, os
def attempt(name, fn):
    try:
        fn()
        print(name, "SUCCEEDED")
    except OSError as e:
        print(name, "refused", e.errno)
def chroot_again():
    os.makedirs("/tmp/jail", exist_ok=True)
    os.chroot("/tmp/jail")
def outside_fds():
    for fd in os.listdir("/proc/self/fd"):
        target = os.readlink("/proc/self/fd/" + fd)
        if target.startswith("/") and not target.startswith(("/dev", "/proc", "/tmp")):
            raise AssertionError(target)
    raise PermissionError(1, "no descriptor outside the root")
def borrow_root():
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            os.listdir("/proc/%s/root/.collimate" % pid)
    raise FileNotFoundError(2, "no process shows another root")
libc = ctypes.CDLL(None, use_errno=True)
def mount_proc():
    if libc.mount(b"proc", b"/mnt", b"proc", 0, None) != 0:
        raise OSError(ctypes.get_errno(), "mount")
def new_userns():
    if libc.unshare(0x10000000) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
for name, fn in (("chroot", chroot_again), ("fds", outside_fds), ("borrow", borrow_root),
                 ("mount", mount_proc), ("userns", new_userns)):
    attempt(name, fn)
"""
    s = await session(img_rt, "bookworm")
    try:
        out = await run(s, code=code)
        assert out.exit_code == 0, out.output
        assert b"SUCCEEDED" not in out.output and out.output.count(b"refused") == 5, out.output
    finally:
        await s.close()
