"""Bake a template layer: run trusted setup commands over an overlay whose
upper directory is a host directory, then exit. Runs inside a one-shot bwrap
container (stdlib only)."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import supervisor as sv


def main(argv: list[str]) -> int:
    cfg = json.loads(argv[0])
    proc_dir = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY)
    uid, gid = os.getuid(), os.getgid()
    sv.unshare(sv.CLONE_NEWUSER | sv.CLONE_NEWNS)
    sv._write_id_maps(proc_dir, 1000, uid, gid)
    sv.mount(None, "/", None, sv.MS_REC | sv.MS_PRIVATE, None)
    opts = (
        f"lowerdir={':'.join(cfg['lowers'])},upperdir=/.collimate/out/upper,"
        "workdir=/.collimate/out/work,userxattr"
    )
    sv.mount("overlay", sv.SANDBOX_DIR, "overlay", sv.MS_NOSUID | sv.MS_NODEV, opts)
    sv.mount("none", sv.INTERNAL_DIR, "tmpfs", sv.MS_RDONLY | sv.MS_NOSUID | sv.MS_NODEV, "size=4k")
    sv.drop_all_capabilities(sv._cap_last())
    sv.load_seccomp(sv.build_seccomp_filter(allow_inet=bool(cfg.get("network"))))
    os.chdir(sv.SANDBOX_DIR)
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
