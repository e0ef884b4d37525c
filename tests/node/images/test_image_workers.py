"""Grades on image templates by the image's warm fork-server (``_sandbox/image_zygote.py``,
``warm_image.py``): image workers run the harness in the image's own Python, each candidate
is a clone of the fork-server in namespaces and a copy-on-write root of its own.

Each test attacks or checks one property through real grades over HTTP (the SDK's
``agrade``/``agrade_batch``): the candidate reports what it sees as its return value, and
the test's expected value is what a contained candidate must see.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.grading import GradeResult, UnitTestReward, agrade, agrade_batch
from collimate_rl.node.runtime import ImageRoot, TemplateSpec
from collimate_rl.node.runtime.host_paths import SUPERVISOR_DIR
from collimate_rl.wire.daemon import AsyncCollimateClient

from ..runtime._served import ServedNode
from ..runtime.conftest import TEST_LIMITS
from ._rootfs import rootfs_layer
from .conftest import IMAGE_SANDBOX_UID, PATH

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]

UID = IMAGE_SANDBOX_UID + 3
ADD = UnitTestReward(
    [{"input": [1, 2], "expected": 3}, {"input": [5, 5], "expected": 10}], entry="add"
)


def probe_spec(expected: Any) -> UnitTestReward:
    """A spec whose one test passes when the candidate's ``probe()`` returns ``expected``."""
    return UnitTestReward([{"input": [], "expected": expected}], entry="probe", per_test_timeout=5)


def no_ctypes_layer(folder: Path) -> Path:
    """A layer over bookworm whose Python has no working ``ctypes``: it cannot serve as the
    warm fork-server (which needs it for namespaces and mounts); the harness can run."""
    package = folder / "usr" / "lib" / "python3.11" / "ctypes"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('no ctypes in this image')\n")
    return folder


@pytest.fixture(scope="module")
async def node(
    require_bwrap: None, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServedNode]:
    served = await ServedNode("tcp", TEST_LIMITS, UID).start()
    broken = no_ctypes_layer(tmp_path_factory.mktemp("noctypes") / "layer")
    try:
        for name, layers in (
            ("trixie", (rootfs_layer("trixie-py"),)),
            ("bookworm", (rootfs_layer("bookworm-py"),)),
            ("noctypes", (rootfs_layer("bookworm-py"), broken)),
        ):
            image = ImageRoot(layers=layers, env=(("PATH", PATH),), ref=name)
            await served.runtime.add_template(TemplateSpec(name, image=image))
        yield served
    finally:
        await served.stop()


@pytest.fixture
async def client(node: ServedNode) -> AsyncIterator[AsyncCollimateClient]:
    client = AsyncCollimateClient(f"http://127.0.0.1:{node.port}")
    try:
        yield client
    finally:
        await client.aclose()


async def stats(node: ServedNode, template: str) -> dict[str, Any]:
    host = node.runtime._hosts[template]
    reply: dict[str, Any] = await host.master({"op": "stats"})
    return reply


async def probe(client: AsyncCollimateClient, body: str, expected: Any) -> GradeResult:
    """Grade ``def probe():`` + ``body`` on bookworm; the result (1.0: it returned ``expected``)."""
    code = "def probe():\n" + "".join(f"    {line}\n" for line in body.splitlines())
    return await agrade(client, "bookworm", code, probe_spec(expected), extract=False)


async def test_grades_run_on_image_workers_in_the_images_python(
    node: ServedNode, client: AsyncCollimateClient
) -> None:
    before = await stats(node, "trixie")
    versioned = (
        "import sys\ndef add(a, b):\n    return a + b if sys.version_info[:2] == (3, 13) else 0\n"
    )
    completions = [
        "def add(a, b):\n    return a + b\n",
        "def add(a, b):\n    return 3\n",
        versioned,
    ]
    results = await agrade_batch(client, "trixie", completions * 4, ADD, extract=False)
    assert [r.reward for r in results] == [1.0, 0.5, 1.0] * 4, [r.error for r in results]
    after = await stats(node, "trixie")
    assert after["image_grades"] - before.get("image_grades", 0) == 12  # none fell back
    assert after["image_zygote_starts"] == 1  # one warm fork-server serves them all
    assert after["image_workers"] <= 8  # a worker per concurrent grade at most, reused


async def test_a_candidate_sees_only_itself(client: AsyncCollimateClient) -> None:
    """Its own pid namespace: not the fork-server, the workers, nor other candidates (the
    batch runs them side by side)."""
    body = "import os\nreturn sorted(p for p in os.listdir('/proc') if p.isdigit())"
    code = "def probe():\n" + "".join(f"    {line}\n" for line in body.splitlines())
    results = await agrade_batch(client, "bookworm", [code] * 6, probe_spec(["1"]), extract=False)
    assert [r.reward for r in results] == [1.0] * 6, [r.tests for r in results]


async def test_the_nodes_files_are_not_in_a_candidates_root(client: AsyncCollimateClient) -> None:
    node_paths = ["/.collimate", "/opt/collimate", "/sandbox", str(SUPERVISOR_DIR)]
    node_paths += [sys.base_prefix, sys.prefix]  # the node's Python
    body = f"import os\nreturn [p for p in {node_paths!r} if os.path.exists(p)]"
    result = await probe(client, body, [])
    assert result.reward == 1.0, result.tests


async def test_a_candidate_cannot_mount_or_make_namespaces(client: AsyncCollimateClient) -> None:
    """The fork-server may (to build each root); the filter every candidate loads may not."""
    body = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "out = []\n"
        "for call in (lambda: libc.unshare(0x10000000), lambda: libc.unshare(0x00020000),\n"
        "             lambda: libc.mount(b'none', b'/tmp', b'tmpfs', 0, None),\n"
        "             lambda: libc.umount2(b'/proc', 2)):\n"
        "    out.append((call(), ctypes.get_errno()))\n"
        "return out"
    )
    result = await probe(client, body, [[-1, 1]] * 4)  # EPERM, every one
    assert result.reward == 1.0, result.tests


async def test_a_candidate_has_no_network(client: AsyncCollimateClient) -> None:
    body = (
        "import socket\n"
        "try:\n"
        "    socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
        "except OSError as exc:\n"
        "    return exc.errno\n"
        "return 0"
    )
    result = await probe(client, body, 97)  # EAFNOSUPPORT
    assert result.reward == 1.0, result.tests


async def test_a_candidates_writes_reach_no_other_grade_nor_its_session(
    node: ServedNode, client: AsyncCollimateClient
) -> None:
    write = (
        "open('/tmp/leak', 'w').write('x')\n"
        "open('/etc/leak', 'w').write('x')\n"  # the image's root is writable (copy-on-write)
        "return True"
    )
    read = "import os\nreturn [p for p in ('/tmp/leak', '/etc/leak') if os.path.exists(p)]"
    session = await client.create_session("bookworm")
    sid = str(session["session_id"])
    try:
        code = "def probe():\n" + "".join(f"    {line}\n" for line in write.splitlines())
        wrote = await agrade(
            client, "bookworm", code, probe_spec(True), extract=False, session_id=sid
        )
        assert wrote.reward == 1.0, wrote.tests
        assert (await probe(client, read, [])).reward == 1.0  # another grade: nothing
        seen = await client.session_exec(sid, command="ls /tmp/leak /etc/leak 2>&1; true")
        assert "No such file" in seen["stdout"], seen  # the session's files: nothing either
    finally:
        await client.delete_session(sid)


async def test_a_session_with_files_of_its_own_grades_in_them(
    node: ServedNode, client: AsyncCollimateClient
) -> None:
    """A grade sees the session's files: one that has its own takes the exec path."""
    session = await client.create_session("bookworm")
    sid = str(session["session_id"])
    try:
        await client.session_exec(sid, command="echo 41 > /data.txt")
        before = (await stats(node, "bookworm")).get("image_grades", 0)
        code = "def probe():\n    return int(open('/data.txt').read()) + 1\n"
        result = await agrade(
            client, "bookworm", code, probe_spec(42), extract=False, session_id=sid
        )
        assert result.reward == 1.0, (result.error, result.tests)
        assert (await stats(node, "bookworm")).get("image_grades", 0) == before  # fell back
    finally:
        await client.delete_session(sid)


def _iz_pids() -> list[int]:
    """The host pids of this module's image fork-servers and their workers."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            owner = os.stat(f"/proc/{entry}").st_uid
        except OSError:
            continue
        if owner == UID and b"-B" in argv and b"-S" in argv and b"-c" in argv:
            found.append(int(entry))
    return found


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next(int(ln.split()[1]) for ln in fh if ln.startswith("PPid:"))
    except (OSError, StopIteration):
        return 0


async def test_candidates_that_hang_or_crash_leave_nothing_behind(
    node: ServedNode, client: AsyncCollimateClient
) -> None:
    await agrade(client, "bookworm", "def add(a, b):\n    return a + b\n", ADD, extract=False)
    await asyncio.sleep(0.5)
    settled = len(_iz_pids())
    spec = UnitTestReward([{"input": [1, 2], "expected": 3}], entry="add", per_test_timeout=1.0)
    hang = "def add(a, b):\n    while True:\n        pass\n"
    crash = "import os\ndef add(a, b):\n    os.kill(os.getpid(), 9)\n"
    forks = (
        "import os\ndef add(a, b):\n    for _ in range(20):\n        os.fork()\n    return a + b\n"
    )
    results = await agrade_batch(client, "bookworm", [hang, crash, forks] * 2, spec, extract=False)
    assert [r.reward for r in results][:2] == [0.0, 0.0]
    assert not any(r.infra_error for r in results), [r.error for r in results]
    await asyncio.sleep(1.0)
    assert len(_iz_pids()) <= settled + 2, _iz_pids()  # the server and idle workers, no more


async def test_a_killed_fork_server_is_started_again(
    node: ServedNode, client: AsyncCollimateClient
) -> None:
    good = "def add(a, b):\n    return a + b\n"
    assert (await agrade(client, "bookworm", good, ADD, extract=False)).reward == 1.0
    starts = (await stats(node, "bookworm"))["image_zygote_starts"]
    pids = _iz_pids()
    for pid in pids:
        if _parent(pid) not in pids:  # the server itself (its workers are its children)
            with contextlib.suppress(ProcessLookupError):  # (a candidate that just ended)
                os.kill(pid, signal.SIGKILL)
    await asyncio.sleep(0.5)
    results = [await agrade(client, "bookworm", good, ADD, extract=False) for _ in range(3)]
    assert [r.reward for r in results] == [1.0] * 3, [r.error for r in results]
    assert (await stats(node, "bookworm"))["image_zygote_starts"] == starts + 1


async def test_a_candidates_bombs_are_contained(
    node: ServedNode, client: AsyncCollimateClient
) -> None:
    """Its limits are a box's: memory, disk (its layer's tmpfs, the file size limit) and
    processes (counted in its own user namespace); the node grades on."""
    memory = "try:\n    bytearray(1 << 40)\nexcept MemoryError:\n    return True\nreturn False"
    disk = (
        "block = b'x' * (1 << 20)\n"
        "try:\n"
        "    with open('/tmp/fill', 'wb') as fh:\n"
        "        while True:\n"
        "            fh.write(block)\n"
        "except OSError as exc:\n"
        "    return exc.errno in (27, 28)\n"  # EFBIG, ENOSPC
        "return False"
    )
    forks = (
        "import os\n"
        "for _ in range(100000):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            import time; time.sleep(30); os._exit(0)\n"
        "    except OSError:\n"
        "        return True\n"  # EAGAIN: the process limit
        "return False"
    )
    for body in (memory, disk, forks):
        result = await probe(client, body, True)
        assert result.reward == 1.0, (body, result.error, result.tests)
    good = "def add(a, b):\n    return a + b\n"
    assert (await agrade(client, "bookworm", good, ADD, extract=False)).reward == 1.0


async def test_an_image_whose_python_cannot_serve_grades_on_the_exec_path(
    node: ServedNode, client: AsyncCollimateClient
) -> None:
    good, wrong = "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return 3\n"
    results = await agrade_batch(client, "noctypes", [good, wrong] * 2, ADD, extract=False)
    assert [r.reward for r in results] == [1.0, 0.5] * 2, [r.error for r in results]
    after = await stats(node, "noctypes")
    assert after.get("image_grades", 0) == 0 and after["image_zygote_starts"] == 1  # tried once


async def test_a_candidate_is_seeded_as_on_python3(client: AsyncCollimateClient) -> None:
    """Common random numbers: the same seed gives an image's candidate the same stream as a
    ``python3`` template's (both 3.11 here), and the grade acknowledges it."""
    seed = "5e" * 32
    code = "import random\ndef probe():\n    return [random.random() for _ in range(3)]\n"
    results = []
    for template in ("python3", "bookworm"):
        spec = probe_spec(None)
        results.append(await agrade(client, template, code, spec, extract=False, seed=seed))
    python3, image = results
    assert image.seed_ack == python3.seed_ack == "verified"
    got = [r.tests[0].detail for r in results]  # "got [...]": the stream each one drew
    assert got[0] == got[1] and got[0].startswith("got [0."), got
