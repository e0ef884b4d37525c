"""Bake a template layer: run trusted setup commands over an overlay whose
upper directory is a host directory, then exit. Runs inside a one-shot bwrap
container (``supervisor.py bake CONFIG``).

Over a ``python3`` template the commands run in the container's own view (the node's
``/usr`` and Python) with the overlay on ``/sandbox``. Over an image (``cfg["image"]``)
the overlay *is* the image's root, and the commands run inside it, as a session's execs do
(``image_root.py``): the image's ``User`` mapped onto the container's uid, a pid namespace
of their own whose pid 1 (a fork of this process, not dumpable) mounts ``/proc``, binds the
container's ``/dev`` and a scratch ``/tmp`` into the root, ``chroot``s there and changes to
the ``WorkingDir``, drops every capability, loads seccomp, then runs each command with the
image's ``/bin/sh -c`` and the image's environment. Whatever a command leaves running is
killed before the next one starts (as a ``RUN`` of a Dockerfile ends).

A root node runs an image bake *ranged* (``cfg["ranged"]``): bwrap's user namespace maps
uids and gids 0..65535 onto a range of host ids the node reserved (it wrote the maps
itself, ``--userns-block-fd``) and this process keeps its capabilities in it, so there is
no user namespace of our own: the image's files show with their real owners (its layers
are idmapped with the same range), the commands run as the image's ``User`` by
``setuid``, and root among them keeps the capabilities Docker's default gives a
container's root (``chown`` to ``_apt``, ``dpkg``'s ownership of what it unpacks), within
that namespace only. The node makes the layer the sandbox uid's afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
from typing import Any

from .common import kill_and_reap_all, reap_until
from .hardening import drop_all_capabilities, keep_only_capabilities
from .image_root import enter_image_root, image_settings, mount_image_dev
from .layout import INTERNAL_DIR, SANDBOX_DIR
from .seccomp import build_seccomp_filter, load_seccomp
from .syscalls import (
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    PR_SET_DUMPABLE,
    cap_last,
    mount,
    prctl,
    unshare,
    write_id_maps,
)

#: The exit status of a setup whose pid 1 failed before any command ran.
SETUP_BROKEN = 125


def main(argv: list[str]) -> int:
    cfg = json.loads(argv[0])
    if image_settings(cfg) is not None:
        return _bake_image(cfg)
    proc_dir = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY)
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER | CLONE_NEWNS)
    write_id_maps(proc_dir, 1000, uid, gid)
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    mount("overlay", SANDBOX_DIR, "overlay", MS_NOSUID | MS_NODEV, _overlay_options(cfg))
    mount("none", INTERNAL_DIR, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k")
    drop_all_capabilities(cap_last())
    allowlist = cfg.get("syscall_policy", "allowlist") != "record"
    load_seccomp(build_seccomp_filter(allow_inet=bool(cfg.get("network")), allowlist=allowlist))
    os.chdir(SANDBOX_DIR)
    env = {str(k): str(v) for k, v in cfg["env"].items()}
    for cmd in cfg["commands"]:
        sys.stdout.write(f"+ {cmd}\n")
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            os.execve("/bin/sh", ["sh", "-c", cmd], env)
        _, status = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        if rc != 0:
            return rc if rc > 0 else 128 - rc
    return 0


def _overlay_options(cfg: dict[str, Any]) -> str:
    return (
        f"lowerdir={':'.join(cfg['lowers'])},upperdir=/.collimate/out/upper,"
        "workdir=/.collimate/out/work,userxattr"
    )


#: The capabilities a ranged setup's root keeps (Docker's default set; numbers from
#: linux/capability.h): CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP,
#: NET_BIND_SERVICE, NET_RAW, SYS_CHROOT, MKNOD, AUDIT_WRITE, SETFCAP.
ROOT_CAPS = frozenset({0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31})


def _bake_image(cfg: dict[str, Any]) -> int:
    """Run the setup commands inside the image's root (see the module's docstring)."""
    image = image_settings(cfg)
    assert image is not None
    uid, gid, _workdir = image
    if cfg.get("ranged"):  # bwrap's user namespace is the bake's (0..65535 mapped)
        unshare(CLONE_NEWNS | CLONE_NEWPID)
    else:
        proc_dir = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY)
        outer_uid, outer_gid = os.getuid(), os.getgid()
        unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID)
        write_id_maps(proc_dir, uid, outer_uid, outer_gid, gid)  # the image's User, as ours
        os.close(proc_dir)
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    mount("overlay", SANDBOX_DIR, "overlay", MS_NOSUID | MS_NODEV, _overlay_options(cfg))
    prctl(PR_SET_DUMPABLE, 0)  # (inherited by pid 1; its commands are dumpable again)
    last_cap = cap_last()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:  # pid 1 of the setup's pid namespace
        code, step = SETUP_BROKEN, "could not enter the image's root"
        try:
            _enter_image(cfg, image, last_cap)
            step = "stopped"
            code = _run_commands(cfg)
        except BaseException as exc:
            _say(f"collimate: the setup {step}: {type(exc).__name__}: {exc}\n")
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    return rc if rc >= 0 else 128 - rc


def _say(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(1, text.encode(errors="replace"))


def _enter_image(cfg: dict[str, Any], image: tuple[int, int, str], last_cap: int) -> None:
    """pid 1's set-up: the image root's ``/proc``, ``/dev``, scratch ``/tmp`` and (with
    network) the container's ``resolv.conf``; then into the root, without capabilities."""
    flags = MS_NOSUID | MS_NODEV
    mount("proc", os.path.join(SANDBOX_DIR, "proc"), "proc", flags | MS_NOEXEC, None)
    mount_image_dev()
    # scratch files stay out of the layer (the skeleton guarantees the mount point)
    mount("tmpfs", os.path.join(SANDBOX_DIR, "tmp"), "tmpfs", flags, "mode=1777")
    if cfg.get("network"):
        _resolver()
    enter_image_root(image[2])
    os.umask(0o022)
    if cfg.get("ranged"):
        _become(image[0], image[1], last_cap)
    else:
        drop_all_capabilities(last_cap)
    allowlist = cfg.get("syscall_policy", "allowlist") != "record"
    load_seccomp(build_seccomp_filter(allow_inet=bool(cfg.get("network")), allowlist=allowlist))


def _become(uid: int, gid: int, last_cap: int) -> None:
    """A ranged setup's identity: the image's ``User``; root keeps :data:`ROOT_CAPS` (the
    bounding set holds no more, so nothing it runs gains another), anyone else none."""
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)  # (to 0 from a mapped non-root uid: the permitted set becomes effective)
    if uid != 0:
        drop_all_capabilities(last_cap)
        return
    keep_only_capabilities(ROOT_CAPS, last_cap)


def _resolver() -> None:
    """Show the container's ``/etc/resolv.conf`` (the host's, for a networked bake) over the
    image's own, read-only, when the image has one as a plain file (nothing is created in it,
    and a link is not followed out of the image's root)."""
    etc = os.path.join(SANDBOX_DIR, "etc")
    conf = os.path.join(etc, "resolv.conf")
    try:
        if not stat.S_ISDIR(os.lstat(etc).st_mode) or not stat.S_ISREG(os.lstat(conf).st_mode):
            return
        os.stat("/etc/resolv.conf")
    except OSError:
        return
    mount("/etc/resolv.conf", conf, None, MS_BIND, None)  # (read-only as bwrap bound it)


def _run_commands(cfg: dict[str, Any]) -> int:
    """Each command with the image's ``/bin/sh -c``, in order; the first failure's status."""
    env = {str(k): str(v) for k, v in cfg["env"].items()}
    os.closerange(3, 1 << 16)  # nothing of the container's stays open in the image's root
    for cmd in cfg["commands"]:
        _say(f"+ {cmd}\n")
        pid = os.fork()
        if pid == 0:
            try:  # (dumpable again, as any program it starts)
                os.execve("/bin/sh", ["sh", "-c", cmd], env)
            except BaseException as exc:
                _say(f"collimate: cannot run the image's /bin/sh: {exc}\n")
            os._exit(127)
        status = reap_until(pid)
        kill_and_reap_all()  # what the command left running
        rc = os.waitstatus_to_exitcode(status)
        if rc != 0:
            return rc if rc > 0 else 128 - rc
    return 0
