"""Bake a template layer: run trusted setup commands over an overlay whose
upper directory is a host directory, then exit. Runs inside a one-shot bwrap
container (``supervisor.py bake CONFIG``)."""

from __future__ import annotations

import json
import os
import sys

from .hardening import drop_all_capabilities
from .layout import INTERNAL_DIR, SANDBOX_DIR
from .seccomp import build_seccomp_filter, load_seccomp
from .syscalls import (
    CLONE_NEWNS,
    CLONE_NEWUSER,
    MS_NODEV,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    cap_last,
    mount,
    unshare,
    write_id_maps,
)


def main(argv: list[str]) -> int:
    cfg = json.loads(argv[0])
    proc_dir = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY)
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER | CLONE_NEWNS)
    write_id_maps(proc_dir, 1000, uid, gid)
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    opts = (
        f"lowerdir={':'.join(cfg['lowers'])},upperdir=/.collimate/out/upper,"
        "workdir=/.collimate/out/work,userxattr"
    )
    mount("overlay", SANDBOX_DIR, "overlay", MS_NOSUID | MS_NODEV, opts)
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
