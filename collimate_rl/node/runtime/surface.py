"""The surface report (``collimate doctor``): which isolation layers are active on this host.

Measured, not assumed: a probe runs as a sandboxed process in a real session of a fresh local
node and reports what the kernel says of it (``/proc/self/status``, its namespaces against the
node's, the Landlock ABI), beside the node's own facts (the seccomp allowlist's size, the
memory cgroup, the sandbox uid).

    collimate doctor [--json]

exits 0 when every layer is active, 1 when one is missing (the report says which).

>>> sorted(NAMESPACES)
['ipc', 'mnt', 'net', 'pid', 'user']
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import secrets
import sys
from typing import Any

from ._sandbox.landlock import landlock_abi, probe_error
from ._sandbox.syscall_allowlist import allowed_calls
from ._sandbox.syscall_table import SYSCALL_NUMBERS
from .base import ExecSpec

__all__ = [
    "NAMESPACES",
    "PROBE",
    "allowed_call_count",
    "build_report",
    "log_missing_layers",
    "main",
]

log = logging.getLogger("collimate_rl.node")

NAMESPACES = ("user", "pid", "mnt", "net", "ipc")
#: Run inside the sandbox (stdlib only): what the kernel says of this process.
PROBE = """
import ctypes, json, os
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines()
              if ":\\t" in line)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
abi = libc.syscall(444, None, 0, 1)
ns = {}
for name in ("user", "pid", "mnt", "net", "ipc"):
    ns[name] = os.readlink("/proc/self/ns/" + name)
print("SURFACE " + json.dumps({
    "uid": os.getuid(), "gid": os.getgid(),
    "seccomp": status.get("Seccomp", "").strip(),
    "seccomp_filters": status.get("Seccomp_filters", "").strip(),
    "no_new_privs": status.get("NoNewPrivs", "").strip(),
    "cap_eff": status.get("CapEff", "").strip(),
    "landlock_abi": abi if abi > 0 else 0,
    "namespaces": ns,
}))
"""
_SECCOMP_MODES = {"0": "disabled", "1": "strict", "2": "filter"}


def log_missing_layers() -> None:
    """Say once, at start, what the kernel lacks (Landlock is defense in depth: go on)."""
    why = probe_error()
    if why is not None:
        log.warning("Landlock fence off: %s; the other layers still apply", why)


def allowed_call_count(arch: str | None = None) -> int:
    """How many syscalls a sandboxed process of ``arch`` may make (the allowlist)."""
    table = SYSCALL_NUMBERS[arch or os.uname().machine]
    return sum(1 for name in allowed_calls(arch or os.uname().machine) if name in table)


def _host_namespaces() -> dict[str, str]:
    return {name: os.readlink(f"/proc/self/ns/{name}") for name in NAMESPACES}


async def probe_sandbox(runtime: Any, template: str = "python3") -> dict[str, Any]:
    """What a sandboxed process of ``runtime`` reports of itself (a real session's exec)."""
    session = await runtime.create_session(template, f"doctor-{secrets.token_hex(4)}")
    try:
        outcome = await session.exec(
            ExecSpec(seed=secrets.token_hex(32), timeout_seconds=30, code=PROBE)
        )
    finally:
        await session.close()
    text = outcome.output.decode("utf-8", "replace")
    for line in text.splitlines():
        if line.startswith("SURFACE "):
            found: dict[str, Any] = json.loads(line[len("SURFACE ") :])
            return found
    raise RuntimeError(f"the probe said nothing (exit {outcome.exit_code}): {text[-500:]}")


def build_report(inside: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    """The layers, each ``{"active": bool, ...facts}``, from the probe and the node's info."""
    host_ns = _host_namespaces()
    ns = {name: inside["namespaces"][name] != host_ns[name] for name in NAMESPACES}
    mode = _SECCOMP_MODES.get(inside["seccomp"], inside["seccomp"])
    caps = int(inside["cap_eff"] or "0", 16)
    uid = info.get("sandbox_uid")
    layers: dict[str, dict[str, Any]] = {
        f"{name} namespace": {"active": private, "private": private} for name, private in ns.items()
    }
    layers["seccomp"] = {
        "active": mode == "filter",
        "mode": mode,
        "filters": inside.get("seccomp_filters"),
        "allowed_calls": allowed_call_count(),
        "policy": "allowlist (other calls ENOSYS)",
    }
    layers["no_new_privs and capabilities"] = {
        "active": inside["no_new_privs"] == "1" and caps == 0,
        "no_new_privs": inside["no_new_privs"] == "1",
        "effective_capabilities": inside["cap_eff"],
    }
    layers["landlock"] = {
        "active": landlock_abi() > 0,
        "abi": landlock_abi(),
        "why_not": probe_error(),
    }
    layers["memory cgroup"] = {
        "active": bool(info.get("memory_cgroup")),
        "path": info.get("memory_cgroup"),
        "limit_bytes": info.get("memory_limit_bytes"),
    }
    layers["sandbox uid"] = {
        "active": uid not in (None, 0),
        "host_uid": uid,
        "uid_inside": inside["uid"],
    }
    return layers


async def doctor(template: str = "python3") -> dict[str, Any]:
    """Start a local node's runtime, probe a sandbox, stop it; the report."""
    from . import create_runtime

    runtime = create_runtime("bwrap")
    await runtime.start()
    try:
        inside = await probe_sandbox(runtime, template)
        info = dict(runtime.info(), memory_limit_bytes=runtime.memory_limit_bytes)
    finally:
        await runtime.close()
    return build_report(inside, info)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="collimate doctor", description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON for machines")
    parser.add_argument("--template", default="python3", help="the template probed")
    args = parser.parse_args(argv)
    try:
        report = asyncio.run(doctor(args.template))
    except Exception as exc:  # bwrap unusable, no template: say why
        print(f"collimate doctor: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    ok = all(layer["active"] for layer in report.values())
    if args.json:
        print(json.dumps({"ok": ok, "layers": report}, indent=1))
    else:
        for name, layer in report.items():
            facts = ", ".join(f"{k}={v}" for k, v in layer.items() if k != "active")
            print(f"{'ok ' if layer['active'] else 'OFF'}  {name:32} {facts}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
