"""Whatever the recorder finds for each workload is in the allowlist (or refused on purpose).

The test that fails when a toolchain upgrade needs a new call: every workload whose template
this machine offers runs under the syscall trace in a real sandbox of the ``record`` policy,
and then, unchanged, in a sandbox of the allowlist, where it must still work. A Debian root
filesystem's binaries are recorded too where one is cached (``tests/_debian_images.py``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from collimate_rl.node.runtime import LocalRuntime, create_runtime
from collimate_rl.node.runtime._sandbox.syscall_allowlist import REFUSED_ON_PURPOSE, allowed_calls
from collimate_rl.node.runtime.syscall_recorder import (
    WORKLOADS,
    Recording,
    record,
    record_rootfs,
)

from .conftest import SANDBOX_UID, TEST_LIMITS, run

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]
LIMITS = TEST_LIMITS.__class__(**{**TEST_LIMITS.__dict__, "cpu_seconds": 120, "processes": 256})


def _unexpected(rec: Recording) -> set[str]:
    return set(rec.calls) - allowed_calls(os.uname().machine) - set(REFUSED_ON_PURPOSE)


@pytest.fixture(scope="module")
async def recording_rt(require_bwrap: None) -> AsyncIterator[LocalRuntime]:
    runtime = create_runtime(
        "bwrap", limits=LIMITS, sandbox_uid=SANDBOX_UID, syscall_policy="record"
    )
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.close()


@pytest.mark.parametrize("name", sorted(WORKLOADS))
async def test_a_workloads_calls_are_in_the_allowlist(
    name: str, recording_rt: LocalRuntime, rt: LocalRuntime
) -> None:
    workload = WORKLOADS[name]
    if workload.template not in recording_rt.templates():
        pytest.skip(f"no {workload.template} template here")
    rec = await record(recording_rt, workload)
    if name == "pytest" and "No module named pytest" in rec.output:
        pytest.skip("pytest is not importable in this host's sandbox")
    assert rec.ran(workload), rec.output[-3000:]
    assert len(rec.calls) > 20  # the trace saw the workload, not nothing
    assert not _unexpected(rec), f"{name} needs calls the allowlist lacks: {_unexpected(rec)}"
    # and the same workload works where the allowlist applies (a refused call is harmless)
    sess = await rt.create_session(workload.template, f"allow-{name}")
    try:
        files = tuple((p, s.encode()) for p, s in workload.files)
        out = await run(sess, timeout=240, command=workload.command, files=files)
    finally:
        await sess.close()  # type: ignore[attr-defined]
    assert out.exit_code == 0 and workload.expect in out.output.decode(), out.output[-3000:]


def _rootfs_tar() -> Path | None:
    cache = Path(os.environ.get("COLLIMATE_TEST_IMAGE_CACHE", "/var/tmp/collimate-test-rootfs"))
    for name in ("trixie-py.tar", "bookworm-py.tar"):
        if (cache / name).is_file():
            return cache / name
    return None


def test_a_debian_userlands_calls_are_in_the_allowlist(require_bwrap: None, tmp_path: Path) -> None:
    tar = _rootfs_tar()
    if tar is None:
        pytest.skip("no cached Debian root filesystem (tests/_debian_images.py builds one)")
    subprocess.run(["tar", "-xf", str(tar), "-C", str(tmp_path)], check=True)
    rec = record_rootfs(tmp_path)
    assert rec.exit_code == 0 and "ok-debian" in rec.output, rec.output[-3000:]
    assert not _unexpected(rec), _unexpected(rec)
