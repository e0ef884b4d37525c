"""Python grading on an image template: the node's harness ships as a full program (the
image's python3 has no warm harness), and candidates run in the image's own python3.

A served node (``tests/node/runtime/_served.py``) with the image templates ``trixie``
(python 3.13, a Python other than the node's) and ``bookworm``; the SDK's own
``agrade_batch`` over HTTP, as a trainer grades.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from collimate_rl.grading import UnitTestReward, agrade_batch
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


@pytest.fixture(scope="module")
async def node(require_bwrap: None) -> AsyncIterator[ServedNode]:
    served = await ServedNode("tcp", TEST_LIMITS, IMAGE_SANDBOX_UID + 2).start()
    try:
        for name, flavour in (("trixie", "trixie-py"), ("bookworm", "bookworm-py")):
            image = ImageRoot(layers=(rootfs_layer(flavour),), env=(("PATH", PATH),), ref=flavour)
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
    finally:
        await client.aclose()
