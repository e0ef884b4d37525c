"""Seeds reach the sandbox, are applied to random and numpy, and are acknowledged."""

from __future__ import annotations

import pytest

from collimate_rl.node.runtime import LocalRuntime, LocalSession

from .conftest import run, seed

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]

DRAWS = (
    "import random\n"
    "print([random.random() for _ in range(3)])\n"
    "import numpy as np\n"
    "print(np.random.rand(3).tolist(), np.random.randint(0, 10**9))\n"
)


async def test_same_seed_same_draws_across_sessions(rt: LocalRuntime, sess: LocalSession) -> None:
    other = await rt.create_session("python3", "seed-other")
    try:
        a = await run(sess, seed=seed(7), code=DRAWS)
        b = await run(other, seed=seed(7), code=DRAWS)
        c = await run(sess, seed=seed(8), code=DRAWS)
        assert a.exit_code == 0, a.output
        assert a.output == b.output
        rnd_a, np_a = a.output.decode().splitlines()
        rnd_c, np_c = c.output.decode().splitlines()
        assert rnd_a != rnd_c and np_a != np_c
        # random and numpy are not the same stream
        assert rnd_a.split(",")[0].strip("[") != np_a.split(",")[0].strip("[")
    finally:
        await other.close()


async def test_seed_applies_to_preloaded_or_late_numpy(sess: LocalSession) -> None:
    s = seed(99)
    late = await run(sess, seed=s, code="import numpy\nprint(numpy.random.rand())")
    via_from = await run(sess, seed=s, code="from numpy.random import rand\nprint(rand())")
    assert late.output == via_from.output


async def test_seed_is_in_env_and_acknowledged(sess: LocalSession) -> None:
    s = "ab" * 32
    out = await run(sess, seed=s, command="echo $COLLIMATE_SEED")
    assert out.output == (s + "\n").encode() and out.seed_ack == "verified"
    out = await run(sess, seed=s, code="import os; print(os.environ['COLLIMATE_SEED'])")
    assert out.output == (s + "\n").encode() and out.seed_ack == "verified"
    out = await run(sess, seed=s, commands=(("sh", "-c", "echo $COLLIMATE_SEED"),))
    assert out.seed_ack == "verified"


async def test_seed_upper_case_hex(sess: LocalSession) -> None:
    lo = await run(sess, seed="0f" * 32, code="import random; print(random.random())")
    hi = await run(sess, seed="0F" * 32, code="import random; print(random.random())")
    assert lo.output == hi.output


async def test_template_with_preloaded_numpy_env_and_other_interpreter(rt: LocalRuntime) -> None:
    from collimate_rl.node.runtime import TemplateSpec

    await rt.add_template(
        TemplateSpec("py-numpy", preload=("numpy",), env=(("TEMPLATE_VAR", "tv"),))
    )
    await rt.add_template(TemplateSpec("shell", interpreter="/bin/sh"))
    a = await rt.create_session("py-numpy", "pn")
    b = await rt.create_session("python3", "pp")
    c = await rt.create_session("shell", "sh")
    try:
        code = "import sys, os\nprint('numpy' in sys.modules, os.environ['TEMPLATE_VAR'])\n" + DRAWS
        out_a = await run(a, seed=seed(5), code=code)
        assert out_a.output.startswith(b"True tv\n"), out_a.output
        out_b = await run(b, seed=seed(5), code=DRAWS)
        assert out_a.output.split(b"\n", 1)[1] == out_b.output  # same draws, preloaded or not
        out_c = await run(c, code="echo from-sh $COLLIMATE_CODE_FILE | cut -c1-12")
        assert out_c.output == b"from-sh /tmp\n" and out_c.exit_code == 0
    finally:
        for s in (a, b, c):
            await s.close()
