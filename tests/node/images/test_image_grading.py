"""Python grading on an image template: the node's harness ships as a full program (the
image's python3 has no warm harness), and candidates run in the image's own python3.

A served node (``tests/node/runtime/_served.py``) with the image templates ``trixie``
(python 3.13, a Python other than the node's) and ``bookworm``; the SDK's own
``agrade_batch`` over HTTP, as a trainer grades.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from collimate_rl.errors import CollimateServerError
from collimate_rl.grading import UnitTestReward, agrade_batch
from collimate_rl.grading._grade_exec import _WARM
from collimate_rl.node.runtime import ImageRoot, TemplateSpec
from collimate_rl.wire.daemon import AsyncCollimateClient

from ..runtime._served import ServedNode
from ..runtime.conftest import TEST_LIMITS
from ._rootfs import rootfs_layer
from .conftest import IMAGE_SANDBOX_UID, PATH

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]

SPEC = UnitTestReward(
    [{"input": [1, 2], "expected": 3}, {"input": [5, 5], "expected": 10}],
    entry="add",
    per_test_timeout=2.0,
)
#: A candidate that only passes on Python 3.13 (trixie's, not the node's nor bookworm's 3.11):
VERSIONED = (
    "import sys\ndef add(a, b):\n    return a + b if sys.version_info[:2] == (3, 13) else -1\n"
)


def old_python_layer(folder: Path) -> Path:
    """A layer over bookworm whose ``python3`` is a ``python3.8`` (a wrapper of 3.11 that
    names itself so): an image with a Python older than the harness runs in."""
    bindir = folder / "usr" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "python3.8").write_text('#!/bin/sh\nexec /usr/bin/python3.11 "$@"\n')
    (bindir / "python3.8").chmod(0o755)
    (bindir / "python3").symlink_to("python3.8")
    return folder


@pytest.fixture(scope="module")
async def node(
    require_bwrap: None, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServedNode]:
    served = await ServedNode("tcp", TEST_LIMITS, IMAGE_SANDBOX_UID + 2).start()
    old = old_python_layer(tmp_path_factory.mktemp("oldpy") / "layer")
    try:
        for name, layers in (
            ("trixie", (rootfs_layer("trixie-py"),)),
            ("bookworm", (rootfs_layer("bookworm-py"),)),
            ("oldpy", (rootfs_layer("bookworm-py"), old)),
        ):
            image = ImageRoot(layers=layers, env=(("PATH", PATH),), ref=name)
            await served.runtime.add_template(TemplateSpec(name, image=image))
        yield served
    finally:
        await served.stop()


async def test_grades_run_candidates_in_the_images_python(node: ServedNode) -> None:
    client = AsyncCollimateClient(f"http://127.0.0.1:{node.port}")
    completions = [
        "def add(a, b):\n    return a + b\n",
        "def add(a, b):\n    return 3\n",
        "def add(a, b):\n    raise ValueError\n",
        VERSIONED,
    ]
    try:
        results = await agrade_batch(client, "trixie", completions, SPEC, extract=False)
        assert [r.reward for r in results] == [1.0, 0.5, 0.0, 1.0]
        results = await agrade_batch(client, "bookworm", [VERSIONED], SPEC, extract=False)
        assert [r.reward for r in results] == [0.0]
        # the node ran the full program itself: the client never saw a miss, so its
        # grades on warm templates keep the short stub
        assert _WARM.warm(client)
    finally:
        await client.aclose()


async def test_an_image_python_older_than_the_harness_fails_clearly(node: ServedNode) -> None:
    client = AsyncCollimateClient(f"http://127.0.0.1:{node.port}")
    try:
        too_old = r"python3 is 3\.8; Python grading needs 3\.10"
        with pytest.raises(CollimateServerError, match=too_old) as err:
            await agrade_batch(client, "oldpy", ["def add(a, b):\n    return a + b\n"], SPEC)
        assert err.value.status == 400  # a bad request, never a reward
        resp = await client.exec_once("oldpy", code="import sys; print(sys.argv[0] != '')")
        assert resp["stdout"] == "True\n"  # code execs still run
    finally:
        await client.aclose()
