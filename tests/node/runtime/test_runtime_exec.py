# (the tests inspect the host with plain blocking calls on purpose)
"""Basic exec semantics: command / commands / code, files, exit codes, output."""

from __future__ import annotations

import dataclasses
import signal
import time

import pytest

from collimate_rl.node.runtime import ExecSpec, LocalSession, create_runtime

from .conftest import SANDBOX_UID, TEST_LIMITS, run, seed

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


async def test_command_output_and_exit_code(sess: LocalSession) -> None:
    out = await run(sess, command="echo hello; exit 3")
    assert out.output == b"hello\n"
    assert out.exit_code == 3
    assert not out.timed_out and not out.truncated
    assert out.exec_time_ms > 0


async def test_commands_each_argv_is_one_program(sess: LocalSession) -> None:
    out = await run(sess, commands=(("echo", "hi there"), ("sh", "-c", "echo two words")))
    assert out.output == b"hi there\ntwo words\n"
    assert out.exit_code == 0


async def test_commands_stop_at_first_failure(sess: LocalSession) -> None:
    out = await run(sess, commands=(("echo", "a"), ("sh", "-c", "exit 4"), ("echo", "b")))
    assert out.output == b"a\n"
    assert out.exit_code == 4
    out = await run(sess, commands=(("no-such-program-xyz",),))
    assert out.exit_code == 127


async def test_precedence_command_over_commands_over_code(sess: LocalSession) -> None:
    out = await run(sess, command="echo c", commands=(("echo", "cs"),), code="print('code')")
    assert out.output == b"c\n"
    out = await run(sess, commands=(("echo", "cs"),), code="print('code')")
    assert out.output == b"cs\n"


async def test_code_exit_codes_and_traceback(sess: LocalSession) -> None:
    assert (await run(sess, code="print(1)")).exit_code == 0
    assert (await run(sess, code="import sys; sys.exit(5)")).exit_code == 5
    assert (await run(sess, code="raise SystemExit")).exit_code == 0
    out = await run(sess, code="def f():\n    raise ValueError('boom')\nf()\n")
    assert out.exit_code == 1
    assert b"Traceback" in out.output and b"ValueError: boom" in out.output
    out = await run(sess, code="import os; os.kill(os.getpid(), 9)")
    assert out.exit_code == -9


async def test_code_runs_as_main_with_code_file(sess: LocalSession) -> None:
    out = await run(
        sess, code="import os\nprint(__name__, os.environ['COLLIMATE_CODE_FILE'] == __file__)"
    )
    assert out.output == b"__main__ True\n"


async def test_code_runs_as_python_would_run_its_file(sess: LocalSession) -> None:
    # the file holds the code byte for byte, it runs as Python reads a file (universal
    # newlines), and stdout and stderr are line-buffered
    code = (
        "import os, sys\r\n"
        "data = open(os.environ['COLLIMATE_CODE_FILE'], 'rb').read()\r"
        "print(len(data), data.count(b'\\r\\n'), data.count(b'\\r'))\n"
        "print(sys.stdout.line_buffering, sys.stderr.line_buffering, 'd\u00e9j\u00e0')\n"
    )
    out = await run(sess, code=code)
    want = f"{len(code.encode())} 1 2\nTrue True d\u00e9j\u00e0\n"
    assert out.output == want.encode(), out


async def test_merged_output_order(sess: LocalSession) -> None:
    code = "import sys\nprint('a')\nsys.stderr.write('b\\n')\nprint('c')\nimport os\nos.write(2, b'd\\n')\n"
    out = await run(sess, code=code)
    assert out.output == b"a\nb\nc\nd\n"
    out = await run(sess, command="echo 1; echo 2 >&2; echo 3")
    assert out.output == b"1\n2\n3\n"


async def test_files_are_written_byte_exact(sess: LocalSession) -> None:
    blob = bytes(range(256)) + b"\x00\x00end-without-newline"
    out = await run(
        sess,
        files=(("data.bin", blob), ("sub/dir/t.txt", b"no newline"), ("/tmp/abs.txt", b"x")),
        code=(
            "import hashlib\n"
            "print(hashlib.sha256(open('data.bin','rb').read()).hexdigest())\n"
            "print(repr(open('/sandbox/sub/dir/t.txt','rb').read()))\n"
            "print(open('/tmp/abs.txt').read())\n"
        ),
    )
    import hashlib

    assert out.exit_code == 0, out.output
    lines = out.output.decode().splitlines()
    assert lines == [hashlib.sha256(blob).hexdigest(), "b'no newline'", "x"]


async def test_files_persist_across_execs(sess: LocalSession) -> None:
    await run(sess, files=(("keep.txt", b"kept"),), command="true")
    await run(sess, command="echo more > more.txt; mkdir -p d && echo y > d/y")
    out = await run(sess, command="cat keep.txt more.txt d/y; pwd; echo $HOME")
    assert out.output == b"keptmore\ny\n/sandbox\n/sandbox\n"


async def test_exec_env_and_template_env(sess: LocalSession) -> None:
    out = await run(sess, command="echo $FOO-$PATH", env=(("FOO", "bar"),))
    assert out.output.startswith(b"bar-")
    out = await run(sess, command="env")
    env = dict(line.split("=", 1) for line in out.output.decode().splitlines() if "=" in line)
    assert "COLLIMATE_SEED" in env
    # nothing leaks from the host environment
    assert not any(k.startswith(("PYTEST", "VIRTUAL_ENV", "SSH_")) for k in env)


async def test_timeout_gives_minus_one_and_message(sess: LocalSession) -> None:
    t0 = time.monotonic()
    out = await run(sess, timeout=0.5, command="echo started; sleep 30")
    assert time.monotonic() - t0 < 5
    assert out.exit_code == -1 and out.timed_out
    assert out.output == b"started\ntimeout after 0.5s"
    out = await run(sess, timeout=1, code="while True: pass")
    assert out.exit_code == -1
    assert out.output.endswith(b"timeout after 1.0s")
    # the session still works
    assert (await run(sess, command="echo ok")).output == b"ok\n"


async def test_python_in_sandbox_and_numpy(sess: LocalSession) -> None:
    out = await run(
        sess, code="import numpy, sys; print(numpy.arange(4).sum(), sys.version_info[0])"
    )
    assert out.output == b"6 3\n", out.output
    out = await run(sess, command="python3 -c 'import numpy; print(numpy.ones(3).sum())'")
    assert out.output == b"3.0\n", out.output


async def test_concurrent_execs_in_one_session(sess: LocalSession) -> None:
    import asyncio

    outs = await asyncio.gather(
        *[run(sess, code=f"import time; time.sleep(0.3); print({i})") for i in range(4)]
    )
    assert [o.output for o in outs] == [f"{i}\n".encode() for i in range(4)]


async def test_output_is_captured_without_trailing_newline(sess: LocalSession) -> None:
    out = await sess.exec(ExecSpec(seed=seed(), command="printf abc"))
    assert out.output == b"abc"


async def test_cancelled_exec_is_killed(sess: LocalSession) -> None:
    import asyncio

    task = asyncio.create_task(run(sess, command="sleep 0.8; echo late > late.txt", timeout=30))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(1.0)
    out = await run(sess, command="ls late.txt 2>&1; ls /proc | grep -c '^[0-9]'")
    assert b"No such file" in out.output


def _process_state(output: bytes) -> dict[str, str]:
    """What ``_STATE`` printed: the fields of ``/proc/self/status`` an exec's process starts
    with, and its open fds."""
    lines = output.decode().splitlines()
    state = {k: v.strip() for k, v in (line.split(":", 1) for line in lines if ":" in line)}
    state["fds"] = " ".join(line for line in lines if line.isdigit())
    # signals 1..31 (32 and up are the C library's own, set up before any exec)
    state["SigIgn"] = f"{int(state['SigIgn'], 16) & 0x7FFFFFFF:08x}"
    return {k: v for k, v in state.items() if k in _expected_state()}


# Each runs as the exec's own process (argv lists: no shell in between).
_STATE = (("cat", "/proc/self/status"), ("ls", "/proc/self/fd"))
#: Whether a program of an argv list is the init's own child (spawned) or its exec's (forked).
_PARENT = ("sh", "-c", 'read -r pid comm state ppid rest < /proc/$$/stat; echo "ppid $ppid"')
#: A shell command's shell leads its own session (field 6 of its stat is its pid).
_SESSION = 'read -r pid comm state ppid pgrp sid rest < /proc/$$/stat; [ "$sid" = "$pid" ]'


def _expected_state() -> dict[str, str]:
    zero = "0000000000000000"
    return {
        **dict.fromkeys(("SigBlk", "CapEff", "CapPrm", "CapBnd"), zero),
        "SigIgn": "00000000",
        "NoNewPrivs": "1",
        "Seccomp": "2",
        "fds": "0 1 2 3",  # stdin, the output twice, and ls's own directory
    }


async def test_a_spawned_program_starts_like_a_forked_exec(sess: LocalSession) -> None:
    # A light session's exec box spawns programs (no fork of the warm image): stdin on
    # /dev/null, default signals, its own session, no capability, nothing else inherited.
    out = await run(sess, commands=(*_STATE, _PARENT))
    assert out.exit_code == 0, out.output
    assert _process_state(out.output) == _expected_state()
    assert out.output.endswith(b"ppid 1\n")
    assert (await run(sess, command=_SESSION)).exit_code == 0
    probe = await run(sess, command="readlink /proc/self/fd/0; (exit 7)")
    assert (probe.output, probe.exit_code) == (b"/dev/null\n", 7)
    assert (await run(sess, command="kill -9 $$")).exit_code == -9
    for argv, code in ((("sh", "-c", "kill -9 $$"),), 137), ((("no-such-program-xyz",),), 127):
        assert (await run(sess, commands=argv)).exit_code == code  # as a shell reports them


async def test_an_exec_the_init_cannot_spawn_is_forked_the_same(require_bwrap: None) -> None:
    # An address-space limit below the init's own size: the init forks the exec instead.
    limits = dataclasses.replace(TEST_LIMITS, address_space_bytes=32 << 20)
    rt = create_runtime("bwrap", limits=limits, sandbox_uid=SANDBOX_UID + 8)
    await rt.start()
    try:
        s = await rt.create_session("python3", "t-tight")
        assert isinstance(s, LocalSession)
        out = await run(s, commands=(*_STATE, _PARENT))
        assert out.exit_code == 0, out.output
        assert _process_state(out.output) == _expected_state()
        assert not out.output.endswith(b"ppid 1\n")  # a forked exec ran it
        assert (await run(s, command=_SESSION)).exit_code == 0
        out = await run(s, command="head -c 100000000 /dev/zero | wc -c")
        assert out.output == b"100000000\n"
        await s.close()
    finally:
        await rt.close()


async def test_signals_the_node_was_started_with_ignored_reach_no_exec(
    require_bwrap: None,
) -> None:
    # Under nohup or as a shell's background job the node starts with SIGHUP, SIGINT or
    # SIGQUIT ignored; an exec must still start with every signal at its default.
    ignored = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)
    saved = [signal.signal(sig, signal.SIG_IGN) for sig in ignored]
    try:
        rt = create_runtime("bwrap", limits=TEST_LIMITS, sandbox_uid=SANDBOX_UID + 9)
        await rt.start()
    finally:
        for sig, handler in zip(ignored, saved, strict=True):
            signal.signal(sig, handler)
    try:
        s = await rt.create_session("python3", "t-signals")
        assert isinstance(s, LocalSession)
        for commands in ((_STATE[0],), (("sh", "-c", "cat /proc/self/status"),)):
            out = await run(s, commands=commands)
            assert _process_state(out.output)["SigIgn"] == "00000000", out.output
        await s.close()
    finally:
        await rt.close()
