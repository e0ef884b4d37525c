"""Fixtures for the runtime tests: real processes, real namespaces, no mocks.

One bwrap runtime is shared by the whole run (module tests create their own
sessions); tests that need a pristine runtime (leaks, the ``none`` driver)
build their own. Bwrap tests skip, with the probe's reason, when
``detect_bwrap()`` says bwrap cannot run here.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from collimate_rl.node.runtime import (
    ExecOutcome,
    ExecSpec,
    Limits,
    LocalRuntime,
    LocalSession,
    create_runtime,
    detect_bwrap,
)

#: Each test run sandboxes as its own host uid, so concurrent runs cannot
#: confuse each other's process scans.
SANDBOX_UID = 61000 + os.getpid() % 3000

TEST_LIMITS = Limits(
    cpu_seconds=20,
    address_space_bytes=1 << 30,
    processes=48,
    file_size_bytes=32 << 20,
    open_files=256,
    session_disk_bytes=64 << 20,
)


def bwrap_reason() -> str | None:
    status = detect_bwrap(SANDBOX_UID)
    return None if status.usable else status.reason


def seed(n: int = 1) -> str:
    return f"{n:064x}"


def rand_seed() -> str:
    return secrets.token_hex(32)


async def run(sess: LocalSession, timeout: float = 20.0, **kw: object) -> ExecOutcome:
    kw.setdefault("seed", rand_seed())
    return await sess.exec(ExecSpec(timeout_seconds=timeout, **kw))  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def require_bwrap() -> None:
    reason = bwrap_reason()
    if reason is not None:
        pytest.skip(f"bwrap unusable: {reason}")


# Package scope (not session): anyio keeps its event loop running while an async
# fixture is alive, which would break later ``anyio.run`` doctests in this process.
@pytest.fixture(scope="package")
async def rt(require_bwrap: None) -> AsyncIterator[LocalRuntime]:
    runtime = create_runtime("bwrap", limits=TEST_LIMITS, sandbox_uid=SANDBOX_UID)
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.close()


@pytest.fixture
async def sess(rt: LocalRuntime) -> AsyncIterator[LocalSession]:
    s = await rt.create_session("python3", f"t-{secrets.token_hex(4)}")
    assert isinstance(s, LocalSession)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def tmp_state() -> AsyncIterator[Path]:  # type: ignore[misc]
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp) / "state"
