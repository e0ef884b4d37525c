"""The syscall recorder: which calls real workloads make inside the sandbox.

Each workload (Python with numpy, a compiler and its program, pip, a Debian userland, ...) runs
under ``_sandbox/syscall_trace.py``, which lists every syscall number it and its children
make (a ``SECCOMP_RET_USER_NOTIF`` listener). The toolchains run in a node runtime started with
``syscall_policy="record"`` (the sandbox as always, but a call outside the allowlist goes
through instead of getting ENOSYS, so the recorder sees it); a Debian root filesystem's
binaries run chrooted by bubblewrap with the same ``record`` filter. The seccomp allowlist
(``_sandbox/syscall_allowlist.py``) is reviewed against what this finds.

    python -m collimate_rl.node.runtime.syscall_recorder --write docs/syscalls/recorded

re-derives the lists kept in the repository (one JSON file per workload);
``tests/node/runtime/test_syscall_recorder.py`` runs it and fails when a workload makes a
call the allowlist neither allows nor refuses on purpose.

>>> sorted(WORKLOADS)[:3]
['bash', 'c', 'cpp']
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._sandbox import syscall_trace
from ._sandbox.seccomp import DENY_COMMON, build_seccomp_filter
from ._sandbox.syscall_allowlist import allowed_calls
from ._sandbox.syscall_table import SYSCALL_NUMBERS
from .base import ExecSpec, Limits
from .local_runtime import LocalRuntime

__all__ = [
    "DEBIAN_COMMAND",
    "DOCKER_DEFAULT_CAPS",
    "WORKLOADS",
    "Recording",
    "Workload",
    "compare_with_docker",
    "main",
    "names_of",
    "parse_recording",
    "record",
    "record_all",
    "record_rootfs",
]

_MARK = "COLLIMATE-SYSCALLS "
_TRACE = "/tmp/syscall_trace.py"


@dataclass(frozen=True)
class Workload:
    """A command run in a template's session (``template``), with the files it needs."""

    template: str
    command: str
    files: tuple[tuple[str, str], ...] = ()
    #: what its output must contain (the workload really ran)
    expect: str = ""


_NUMPY = """
import numpy as np, random, json, threading, subprocess, tempfile, os
a = np.arange(12.0).reshape(3, 4)
print(int((a @ a.T).trace()), float(np.linalg.norm(a)) > 0, np.random.default_rng(1).integers(9))
t = threading.Thread(target=lambda: sum(range(1000))); t.start(); t.join()
print(subprocess.run(["true"]).returncode, json.dumps(sorted({3, 1})), random.random() < 2)
with tempfile.TemporaryDirectory() as d:
    open(os.path.join(d, "f"), "w").write("x")
print("ok-python")
"""
_C = '#include <stdio.h>\nint main(void){printf("ok-c\\n");return 0;}\n'
_CPP = '#include <iostream>\nint main(){std::cout<<"ok-cpp"<<std::endl;}\n'
_JAVA = 'public class Main{public static void main(String[] a){System.out.println("ok-java");}}\n'
_RUST = 'fn main(){ let v: Vec<u32> = (1..4).collect(); println!("ok-rust {}", v.len()); }\n'
_GO = 'package main\nimport "fmt"\nfunc main(){ fmt.Println("ok-go") }\n'
_PYTEST = "def test_one():\n    assert 1 + 1 == 2\n"
#: builds a one-module wheel by hand (no setuptools or wheel needed in the sandbox)
_WHEEL = """
import zipfile
info = "tiny-1.0.dist-info/"
files = {
    "tiny.py": "X = 'ok-pip'\\n",
    info + "METADATA": "Metadata-Version: 2.1\\nName: tiny\\nVersion: 1.0\\n",
    info + "WHEEL": "Wheel-Version: 1.0\\nGenerator: hand\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
files[info + "RECORD"] = "".join(f"{name},,\\n" for name in [*files, info + "RECORD"])
with zipfile.ZipFile("tiny-1.0-py3-none-any.whl", "w") as whl:
    for name, text in files.items():
        whl.writestr(name, text)
"""

WORKLOADS: dict[str, Workload] = {
    "python-numpy": Workload("python3", "python3 prog.py", (("prog.py", _NUMPY),), "ok-python"),
    "c": Workload(
        "c", "gcc -std=gnu11 -O2 -pipe -o main main.c -lm && ./main", (("main.c", _C),), "ok-c"
    ),
    "cpp": Workload(
        "cpp",
        "g++ -std=gnu++17 -O2 -pipe -o main main.cpp && ./main",
        (("main.cpp", _CPP),),
        "ok-cpp",
    ),
    "java": Workload(
        "java",
        "javac -encoding UTF-8 -J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC Main.java"
        " && java -Xss64m -XX:+UseSerialGC -XX:-UsePerfData Main",
        (("Main.java", _JAVA),),
        "ok-java",
    ),
    "javascript": Workload(
        "javascript",
        "node --check main.js && node main.js",
        (("main.js", "console.log('ok-' + 'node');\n"),),
        "ok-node",
    ),
    "rust": Workload(
        "rust",
        "rustc --edition 2021 -O -o main main.rs && ./main",
        (("main.rs", _RUST),),
        "ok-rust",
    ),
    "go": Workload(
        "go",
        # the template's GOCACHE: the standard library compiled once per machine, read-only
        # (a session's own empty cache would compile it into the session's /tmp, past its size)
        "GOPATH=/tmp/go go build -o main main.go && ./main",
        (("main.go", _GO),),
        "ok-go",
    ),
    "bash": Workload(
        "bash",
        "bash main.sh",
        (("main.sh", 'x=$(echo ok-bash | tr a-z a-z); for i in 1 2; do :; done; echo "$x"\n'),),
        "ok-bash",
    ),
    "pip": Workload(
        "python3",
        "python3 -m pip --version && python3 -m pip list >/dev/null && python3 wheel.py"
        " && python3 -m pip install -q --no-index --target /tmp/t tiny-1.0-py3-none-any.whl"
        " && PYTHONPATH=/tmp/t python3 -c 'import tiny; print(tiny.X)'",
        (("wheel.py", _WHEEL),),
        "ok-pip",
    ),
    "pytest": Workload(
        "python3",
        "python3 -m pytest -q -p no:cacheprovider test_one.py && echo ok-pytest",
        (("test_one.py", _PYTEST),),
        "ok-pytest",
    ),
}


@dataclass(frozen=True)
class Recording:
    """What a workload called (names, sorted), how it exited, and its output."""

    calls: tuple[str, ...]
    exit_code: int
    output: str

    def ran(self, workload: Workload) -> bool:
        return self.exit_code == 0 and workload.expect in self.output


def names_of(numbers: list[int], arch: str | None = None) -> tuple[str, ...]:
    """Syscall names for ``numbers`` (``nr-N`` for a number this table lacks)."""
    by_number = {n: name for name, n in SYSCALL_NUMBERS[arch or os.uname().machine].items()}
    return tuple(sorted(by_number.get(n, f"nr-{n}") for n in numbers))


def parse_recording(output: str) -> Recording:
    """The trace's last ``COLLIMATE-SYSCALLS`` line, and the output before it."""
    head, mark, tail = output.rpartition(_MARK)
    if not mark:
        raise ValueError(f"no syscall list in the trace's output: {output[-2000:]!r}")
    said = json.loads(tail.splitlines()[0])
    return Recording(names_of(said["numbers"]), int(said["exit"]), head)


def _trace_source() -> str:
    return Path(syscall_trace.__file__).read_text(encoding="utf-8")


async def record(runtime: LocalRuntime, workload: Workload, timeout: float = 240.0) -> Recording:
    """Run ``workload`` under the trace in a fresh session of ``runtime`` (which should run
    the ``record`` policy: under the allowlist, a refused call never reaches the trace)."""
    session = await runtime.create_session(workload.template, f"rec-{secrets.token_hex(4)}")
    try:
        files = [(p, s.encode()) for p, s in workload.files]
        files.append((_TRACE, _trace_source().encode()))
        spec = ExecSpec(
            seed=secrets.token_hex(32),
            timeout_seconds=timeout,
            command=f"python3 {_TRACE} /bin/sh -c {_quote(workload.command)}",
            files=tuple(files),
        )
        outcome = await session.exec(spec)
    finally:
        await session.close()
    return parse_recording(outcome.output.decode("utf-8", "replace"))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


#: What a Debian userland's own binaries do (apt, dpkg, coreutils, its python3).
DEBIAN_COMMAND = (
    "apt-get --version >/dev/null && apt-cache policy >/dev/null 2>&1; dpkg -l >/dev/null"
    " && ls -la / >/dev/null && cp /etc/os-release /tmp/x && sort /tmp/x | uniq | wc -l"
    " && tar czf /tmp/x.tgz /etc/apt && gzip -t /tmp/x.tgz && mkdir -p /tmp/d && mv /tmp/x /tmp/d"
    " && python3 -c 'import json, sqlite3; print(\"ok-debian\")'"
    " && if python3 -c 'import pytest' 2>/dev/null; then printf 'def test_a():\\n    assert 1\\n'"
    " > /tmp/test_a.py && python3 -m pytest -q -p no:cacheprovider /tmp/test_a.py; fi"
)


def record_rootfs(root: Path, command: str = DEBIAN_COMMAND) -> Recording:
    """Run ``command`` in the unpacked root filesystem ``root`` (it must have python3),
    chrooted by bubblewrap in fresh namespaces, under the ``record`` seccomp filter."""
    from .bwrap import detect_bwrap

    bwrap = detect_bwrap().path or "bwrap"
    (root / "tmp").mkdir(exist_ok=True)
    trace = root / "tmp" / "syscall_trace.py"
    trace.write_text(_trace_source(), encoding="utf-8")
    r, w = os.pipe()
    os.write(w, build_seccomp_filter(allowlist=False))
    os.close(w)
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--bind", str(root), "/"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--seccomp", str(r), "--chdir", "/tmp"]
    argv += ["--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--cap-drop", "ALL"]
    argv += ["python3", "/tmp/syscall_trace.py", "/bin/sh", "-c", command]
    try:
        done = subprocess.run(argv, pass_fds=(r,), capture_output=True, timeout=300, check=False)
    finally:
        os.close(r)
    return parse_recording((done.stdout + done.stderr).decode("utf-8", "replace"))


async def record_all(names: list[str], limits: Limits | None = None) -> dict[str, Recording]:
    """Record each named workload whose template this machine offers."""
    from . import create_runtime

    runtime = create_runtime("bwrap", limits=limits, syscall_policy="record")
    await runtime.start()
    try:
        offered = set(runtime.templates())
        return {
            name: await record(runtime, WORKLOADS[name])
            for name in names
            if WORKLOADS[name].template in offered
        }
    finally:
        await runtime.close()


#: Docker's default capability set (a container's calls gated on one of these are allowed).
DOCKER_DEFAULT_CAPS = frozenset(
    [
        "CAP_CHOWN",
        "CAP_DAC_OVERRIDE",
        "CAP_FSETID",
        "CAP_FOWNER",
        "CAP_MKNOD",
        "CAP_NET_RAW",
        "CAP_SETGID",
        "CAP_SETUID",
        "CAP_SETFCAP",
        "CAP_SETPCAP",
        "CAP_NET_BIND_SERVICE",
        "CAP_SYS_CHROOT",
        "CAP_KILL",
        "CAP_AUDIT_WRITE",
    ]
)
_DOCKER_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def compare_with_docker(profile: dict[str, Any], arch: str) -> dict[str, Any]:
    """Docker's default ``profile`` (moby's ``default.json``, parsed) against our allowlist on
    ``arch``: the names each allows, per rule kind, and the differences (facts only)."""
    known = set(SYSCALL_NUMBERS[arch])
    allowed: set[str] = set()
    with_args: dict[str, list[str]] = {}
    errnos: dict[str, str] = {}
    with_caps: dict[str, list[str]] = {}
    for rule in profile["syscalls"]:
        inc, exc = rule.get("includes") or {}, rule.get("excludes") or {}
        if _DOCKER_ARCH[arch] not in inc.get("arches", [_DOCKER_ARCH[arch]]):
            continue
        if _DOCKER_ARCH[arch] in exc.get("arches", []):
            continue
        names = [n for n in rule["names"] if n in known]
        caps = set(inc.get("caps") or [])
        if caps and not caps & DOCKER_DEFAULT_CAPS:
            for n in names:
                with_caps[n] = sorted(set(with_caps.get(n, [])) | caps)
            continue
        if set(exc.get("caps") or []) & DOCKER_DEFAULT_CAPS:
            continue
        for n in names:
            if rule["action"] != "SCMP_ACT_ALLOW":
                errnos[n] = f"errno {rule.get('errnoRet')}"
                continue
            allowed.add(n)
            for a in rule.get("args") or []:
                op = a["op"].replace("SCMP_CMP_", "")
                with_args.setdefault(n, []).append(f"arg{a['index']} {op} {a['value']}")
    ours = {n for n in allowed_calls(arch) if n in known}
    return {
        "docker_allows": sorted(allowed),
        "docker_allows_only_with_arguments": dict(sorted(with_args.items())),
        "docker_errno": dict(sorted(errnos.items())),
        "docker_allows_only_with_capability": with_caps,
        "ours_allow": sorted(ours),
        "only_docker_allows": sorted(allowed - ours),
        "only_ours_allow": sorted(ours - allowed),
        "ours_refuse_with_eperm": sorted(n for n in (*DENY_COMMON, "iopl", "ioperm") if n in known),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workloads", nargs="*", default=sorted(WORKLOADS))
    parser.add_argument("--write", type=Path, help="folder for one <workload>.json each")
    parser.add_argument("--rootfs", type=Path, action="append", default=[], help="a rootfs tar")
    parser.add_argument(
        "--docker-profile",
        type=Path,
        help="moby's profiles/seccomp/default.json: rewrite docs/syscalls/docker-default.json "
        "(--docker-source names its version) and record nothing",
    )
    parser.add_argument("--docker-source", type=json.loads, default={}, help="JSON facts")
    args = parser.parse_args(argv)
    if args.docker_profile is not None:
        profile = json.loads(args.docker_profile.read_text())
        out = {
            "source": args.docker_source,
            "default_action": f"{profile['defaultAction']} (errno {profile.get('defaultErrnoRet')})",
            "docker_default_capabilities": sorted(DOCKER_DEFAULT_CAPS),
            "arches": {arch: compare_with_docker(profile, arch) for arch in ("x86_64", "aarch64")},
        }
        print(json.dumps(out, indent=1))
        return 0
    found = asyncio.run(record_all(args.workloads)) if args.workloads != ["none"] else {}
    for tar in args.rootfs:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["tar", "-xf", str(tar), "-C", tmp], check=True)
            found[f"debian-{tar.stem}"] = record_rootfs(Path(tmp))
    failed = 0
    for name, rec in sorted(found.items()):
        workload = WORKLOADS.get(name, Workload("", "", expect="ok-debian"))
        failed += not rec.ran(workload)
        print(f"{name}: {len(rec.calls)} calls, exit {rec.exit_code}, ran: {rec.ran(workload)}")
        if not rec.ran(workload):
            print(rec.output[-3000:])
        if args.write is not None:
            args.write.mkdir(parents=True, exist_ok=True)
            data = {"workload": name, "arch": os.uname().machine, "calls": list(rec.calls)}
            (args.write / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
