"""What a candidate box starts with: its exec's environment and stdio of its own.

A box starts from the zygote's state, not from a fresh interpreter's: the zygote
holds the environment every exec of the template shares and stdio objects made for
the boxes (``zygote.py``), and the master sends a box only the environment's
changes (``environ.py``). These check what a candidate sees against a plain exec
of the same session, and that nothing one candidate leaves in its stdio reaches
another.
"""

from __future__ import annotations

import json
import secrets

import pytest

from collimate_rl.grading import UnitTestReward
from collimate_rl.node.runtime import ExecSpec, LocalRuntime

from .conftest import rand_seed, run
from .test_fastpath_attacks import grade_in, sessions

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]

REPORT_ENV = (
    "import json, os\n"
    "def add(x, y):\n"
    "    with open('/tmp/candidate-env.json', 'w') as fh:\n"
    "        json.dump(dict(os.environ), fh)\n"
    "    return x + y\n"
)
EXEC_ENV = (("GRADE_VAR", "from the exec"), ("PATH", "/opt/custom/bin:/usr/bin:/bin"))


async def test_a_candidate_sees_exactly_its_execs_environment(rt: LocalRuntime) -> None:
    (sess,) = await sessions(rt, 1)
    seed = rand_seed()
    try:
        nonce = secrets.token_hex(16)
        spec = UnitTestReward([{"input": [1, 2], "expected": 3}], entry="add")
        program = spec.build(REPORT_ENV, nonce=nonce, timeout_seconds=30)
        (payload,) = program.files
        out = await sess.exec(
            ExecSpec(
                seed=seed,
                timeout_seconds=30,
                code=program.warm_code,
                files=((payload["path"], payload["content"].encode()),),
                env=EXEC_ENV,
            )
        )
        frame = spec.read_frame(out.output.decode(), nonce)
        assert frame is not None and frame.passed == 1, out
        dump = "import json, os; print(json.dumps(dict(os.environ)))"
        plain = json.loads((await run(sess, seed=seed, code=dump, env=EXEC_ENV)).output)
        seen = json.loads((await run(sess, command="cat /tmp/candidate-env.json")).output)
    finally:
        await sess.close()
    assert seen["GRADE_VAR"] == "from the exec"
    assert seen["PATH"] == "/opt/custom/bin:/usr/bin:/bin"
    assert seen["COLLIMATE_SEED"] == seed
    del plain["COLLIMATE_CODE_FILE"]  # the plain exec's own code file
    assert seen == plain  # nothing of the harness, the zygote or the master's own


LEAVE_OUTPUT = (
    "import os, sys\n"
    "def add(x, y):\n"
    "    sys.stdout.write('LEFT-IN-A-BUFFER')\n"
    "    sys.stderr.write('LEFT-ON-STDERR')\n"
    "    os._exit(0)\n"
)
REPORT_STDIO = (
    "import sys\n"
    "def add(x, y):\n"
    "    out, err, inp = sys.stdout, sys.stderr, sys.stdin\n"
    "    print('STDIO', out.encoding, out.errors, out.seekable(), out.isatty(),\n"
    "          out.line_buffering, err.line_buffering, inp.readable(), inp.read(),\n"
    "          sys.__stdout__ is out, sys.__stderr__ is err, sys.__stdin__ is inp, flush=True)\n"
    "    return x + y\n"
)


async def test_a_candidates_stdio_is_its_own_and_as_a_fresh_process_has_it(
    rt: LocalRuntime,
) -> None:
    first, second = await sessions(rt, 2)
    try:
        await grade_in(first, LEAVE_OUTPUT)  # dies with unflushed output in its buffers
        frames = [await grade_in(s, REPORT_STDIO) for s in (second, first, second)]
    finally:
        await first.close()
        await second.close()
    for frame in frames:
        assert frame.passed == 1, frame
        # as a fresh interpreter has them: on pipes, and the originals (``sys.__stdout__``)
        assert "STDIO utf-8 backslashreplace False False False True True  True True True" in (
            frame.output_tail
        )
        assert "LEFT-" not in frame.output_tail
