# ruff: noqa: ASYNC240
# (the tests inspect the host with plain blocking calls on purpose)
"""The escape battery: each attack in its own test; each is contained and the
node stays healthy (every test ends with a working exec in a fresh session).

The battery runs twice, against a whole node served on a unix socket and on
TCP (``_served.py``): the sandboxes are reached over HTTP like a trainer's,
and a node listening next to them must be out of their reach. Each attack runs
in a session of the built-in ``python3`` template and of an image template (a
Debian bookworm root filesystem as the session's ``/``, ``WorkingDir``
``/sandbox``), whose code runs in the image's own python3."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ._served import TRANSPORTS, NodeSession, ServedNode, add_image_template, host_addresses
from .conftest import SANDBOX_UID, TEST_LIMITS, run

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]

PROJECT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module", params=TRANSPORTS)
async def rt(request: pytest.FixtureRequest, require_bwrap: None) -> AsyncIterator[ServedNode]:
    """The node the sandboxes attack from (overrides the runtime-level fixture)."""
    node = await ServedNode(request.param, TEST_LIMITS, SANDBOX_UID).start()
    try:
        yield node
    finally:
        await node.stop()


@pytest.fixture(params=["python3", "image"])
async def template(request: pytest.FixtureRequest, rt: ServedNode) -> str:
    """The template the attacks run in: the built-in one, or an image template."""
    if request.param == "image":
        await add_image_template(rt)
    return str(request.param)


@pytest.fixture
async def sess(rt: ServedNode, template: str) -> AsyncIterator[NodeSession]:
    s = await rt.create_session(template)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture(autouse=True)
async def node_stays_healthy(rt: ServedNode) -> AsyncIterator[None]:
    yield
    s = await rt.create_session("python3", "health-check")
    try:
        out = await run(s, code="print('healthy')")
        assert out.output == b"healthy\n"
    finally:
        await s.close()


# ---------------------------------------------------------------- network


async def test_tcp_egress_to_host_loopback(sess: NodeSession) -> None:
    hits: list[int] = []

    async def on_conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        hits.append(1)
        w.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2); print('CONNECTED')\n"
            "except OSError as e: print('blocked', e.errno)\n"
        )
        out = await run(sess, code=code)
        assert b"blocked" in out.output and b"CONNECTED" not in out.output
        # also from a separate program (not the warm interpreter)
        out = await run(sess, files=(("probe.py", code.encode()),), command="python3 probe.py")
        assert b"blocked" in out.output and b"CONNECTED" not in out.output
    finally:
        server.close()
        await server.wait_closed()
    assert hits == []


async def test_tcp_egress_to_internet(sess: NodeSession) -> None:
    code = (
        "import socket\n"
        "for host, port in [('1.1.1.1', 80), ('1.1.1.1', 443), ('8.8.8.8', 53)]:\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=2); print('CONNECTED', host)\n"
        "    except OSError as e: print('blocked', e.errno)\n"
    )
    out = await run(sess, code=code)
    assert out.output.count(b"blocked") == 3, out.output


async def test_udp_egress(sess: NodeSession) -> None:
    code = (
        "import socket\n"
        "try:\n"
        "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "    s.sendto(b'x', ('1.1.1.1', 53)); print('SENT')\n"
        "except OSError as e: print('blocked', e.errno)\n"
        "try:\n"
        "    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
        "    s.sendto(b'x', ('2606:4700:4700::1111', 53)); print('SENT6')\n"
        "except OSError as e: print('blocked6', e.errno)\n"
        "try:\n"
        "    socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print('RAW')\n"
        "except OSError as e: print('blockedraw', e.errno)\n"
        "try:\n"
        "    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0); print('NETLINK')\n"
        "except OSError as e: print('blockednl', e.errno)\n"
    )
    out = await run(sess, code=code)
    text = out.output.decode()
    assert "SENT" not in text and "RAW" not in text and "NETLINK" not in text, text
    assert text.count("blocked") == 4


async def test_dns_resolution_fails(sess: NodeSession) -> None:
    code = (
        "import socket\n"
        "try:\n"
        "    print('RESOLVED', socket.getaddrinfo('example.com', 80))\n"
        "except OSError as e: print('blocked', type(e).__name__)\n"
    )
    out = await run(sess, code=code)
    assert b"blocked" in out.output and b"RESOLVED" not in out.output
    out = await run(sess, command="cat /etc/resolv.conf; getent hosts example.com; echo rc=$?")
    assert b"rc=0" not in out.output


async def test_only_loopback_interface(sess: NodeSession) -> None:
    out = await run(sess, command="cat /proc/net/dev")
    ifaces = [ln.split(":")[0].strip() for ln in out.output.decode().splitlines()[2:]]
    assert ifaces == ["lo"]


async def test_cannot_reach_the_node(sess: NodeSession, rt: ServedNode) -> None:
    """The node serving this very sandbox: not its TCP port on any address of the host, not
    its unix socket; and its listener is not even in the sandbox's socket tables."""
    if rt.transport == "tcp":
        targets = [(host, rt.port) for host in host_addresses()]
        code = (
            "import socket\n"
            f"for host, port in {targets!r}:\n"
            "    try:\n"
            "        s = socket.create_connection((host, port), timeout=2)\n"
            "        s.sendall(b'GET /v1/health HTTP/1.0\\r\\n\\r\\n'); print('REACHED', s.recv(64))\n"
            "    except OSError as e: print('blocked', host, e.errno)\n"
        )
        out = await run(sess, code=code)
        assert b"REACHED" not in out.output and out.output.count(b"blocked") == len(targets)
        out = await run(
            sess,
            command=f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{rt.port} && echo REACHED'; echo done",
        )
        assert b"REACHED" not in out.output and out.output.endswith(b"done\n")
        listening = f":{rt.port:04X} "
        out = await run(sess, command="cat /proc/net/tcp /proc/net/tcp6 2>/dev/null")
        assert listening.encode() not in out.output, out.output
    else:
        assert rt.socket_path is not None
        path = str(rt.socket_path)
        code = (
            "import os, socket\n"
            f"print('exists', os.path.exists({path!r}))\n"
            "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
            "try:\n"
            f"    s.connect({path!r}); print('REACHED')\n"
            "except OSError as e: print('blocked', e.errno)\n"
        )
        out = await run(sess, code=code)
        assert out.output == b"exists False\nblocked 2\n", out.output
        out = await run(sess, command="cat /proc/net/unix")
        assert path.encode() not in out.output and rt.socket_path.name.encode() not in out.output
    # ... while the node itself answers right next to it
    assert (await rt.http.get("/v1/health")).json()["status"] == "ok"


# ---------------------------------------------------------------- filesystem


async def test_cannot_read_project_folder(sess: NodeSession) -> None:
    assert (PROJECT / "pyproject.toml").exists()
    paths = [PROJECT / "pyproject.toml", PROJECT, Path("/work"), PROJECT / ".venv" / "bin"]
    code = f"import os\nfor p in {[str(p) for p in paths]!r}:\n    print(p, os.path.exists(p))\n"
    out = await run(sess, code=code)
    assert b"True" not in out.output, out.output


def image_own(path: str) -> set[str]:
    """The entries the image template's root filesystem has at ``path`` (its own, not the
    host's: an image session sees those instead)."""
    from collimate_rl.node.runtime.image_template import lookup
    from tests.node.images._rootfs import rootfs_layer

    found = lookup((rootfs_layer("bookworm-py"),), path)
    return {p.name for p in found.iterdir()} if found is not None and found.is_dir() else set()


async def test_cannot_read_home_folder(sess: NodeSession, template: str) -> None:
    home = Path(os.path.expanduser("~"))
    host_entries = {p.name for p in home.iterdir()} if home.is_dir() else set()
    out = await run(
        sess,
        code=f"import os\nprint(sorted(os.listdir({str(home)!r})) if os.path.isdir({str(home)!r}) else [])",
    )
    visible = set(eval(out.output.decode()))
    if template == "image":  # the image's own folder there, if it has one
        assert visible == image_own(str(home)), visible
    else:  # at most the node's interpreter prefix (e.g. /root/.pyenv) shows through
        assert visible <= {".pyenv"}, visible
    secrets_ = [n for n in host_entries if n not in visible]
    for name in secrets_[:20]:
        out = await run(sess, command=f"cat {home / name!s} 2>&1; ls {home / name!s} 2>&1")
        assert b"No such file" in out.output or out.output == b"", (name, out.output)


async def test_cannot_read_shadow_or_host_etc(sess: NodeSession, template: str) -> None:
    if template == "image":  # the image's own /etc (its shadow is the image's), never the host's
        out = await run(sess, command="ls -A /etc; cat /etc/passwd")
        assert set(out.output.decode().split()[: len(image_own("/etc"))]) == image_own("/etc")
        assert b"cloudsdk" not in out.output and b"sandbox:x:1000" not in out.output
        return
    out = await run(sess, command="cat /etc/shadow; ls /etc")
    assert b"root:" not in out.output
    listed = set(out.output.decode().split())
    assert "shadow" not in listed and "ssh" not in listed
    out = await run(sess, command="cat /etc/passwd")
    assert b"sandbox:x:1000" in out.output and b"cloudsdk" not in out.output


async def test_cannot_see_other_sessions_files(rt: ServedNode, template: str) -> None:
    a = await rt.create_session(template, "secret-a")
    b = await rt.create_session(template, "secret-b")
    try:
        await run(
            a, files=(("secret.txt", b"TOPSECRET-A"),), command="cp secret.txt /tmp/secret.txt"
        )
        assert (await run(a, command="cat secret.txt")).output == b"TOPSECRET-A"
        probes = (
            "cat /sandbox/secret.txt /tmp/secret.txt 2>/dev/null\n"
            "for p in /proc/*/root /proc/*/cwd; do cat $p/sandbox/secret.txt $p/secret.txt $p/tmp/secret.txt 2>/dev/null; done\n"
            "ls -la /.collimate /.collimate/* 2>/dev/null\n"
            "grep -r TOPSECRET / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr --exclude-dir=dev 2>/dev/null\n"
            "echo done\n"
        )
        out = await run(b, command=probes, timeout=60)
        assert b"TOPSECRET" not in out.output, out.output
        assert out.output.endswith(b"done\n")
        out = await run(b, code="import os; print(os.listdir('/.collimate'))")
        # an image session's root has no such folder at all
        assert out.output == b"[]\n" or (template == "image" and b"FileNotFoundError" in out.output)
    finally:
        await a.close()
        await b.close()


async def test_cannot_write_outside(
    sess: NodeSession, rt: ServedNode, template: str, tmp_path: Path
) -> None:
    targets = [
        "/usr/pwned",
        "/etc/pwned",
        "/pwned",
        "/opt/collimate/site/pwned",
        "/.collimate/pwned",
        "/proc/pwned",
        "/dev/pwned",
    ]
    code = (
        "import os\n"
        f"for t in {targets!r}:\n"
        "    try:\n"
        "        open(t, 'w').write('x'); print('WROTE', t)\n"
        "    except OSError as e: print('denied', t, e.errno)\n"
        "try:\n"
        "    os.chmod('/usr/bin/env', 0o777); print('CHMOD')\n"
        "except OSError as e: print('denied chmod', e.errno)\n"
    )
    out = await run(sess, code=code)
    if template == "image":  # root of its own root: writes land in the session's upper layer
        assert b"WROTE /etc/pwned" in out.output and b"CHMOD" in out.output, out.output
        assert b"WROTE /.collimate" not in out.output and b"WROTE /proc" not in out.output
        assert b"WROTE /dev" not in out.output and b"WROTE /opt" not in out.output
        other = await rt.create_session(template)  # not in the image, nor another session
        try:
            out = await run(
                other, command="ls /usr/pwned /etc/pwned /pwned 2>&1; stat -c %a /usr/bin/env"
            )
            assert out.output.count(b"No such file") == 3 and out.output.endswith(b"755\n")
        finally:
            await other.close()
        assert image_own("/etc") and "pwned" not in image_own("/etc")
    else:
        assert b"WROTE" not in out.output and b"CHMOD" not in out.output, out.output
    for t in ("/usr/pwned", "/etc/pwned", "/pwned"):
        assert not os.path.exists(t)


async def test_the_internal_folder_is_an_empty_read_only_cover(
    sess: NodeSession, template: str
) -> None:
    """A box binds an empty dir over ``/.collimate``: the bind carries its source's flags
    (read-only, nosuid, nodev, noexec), here as the kernel reports them to the box. An image
    session's root (the image's) has no such folder at all."""
    if template == "image":
        # (the overlay's options name its layers' paths in the container, not a mount point)
        out = await run(
            sess, command="ls -d /.collimate 2>&1; awk '{print $2}' /proc/mounts | grep -c coll"
        )
        assert out.output == b"ls: cannot access '/.collimate': No such file or directory\n0\n"
        return
    code = (
        "import os\n"
        "flags = os.statvfs('/.collimate').f_flag\n"
        "names = ('ST_RDONLY', 'ST_NOSUID', 'ST_NODEV', 'ST_NOEXEC')\n"
        "print(os.listdir('/.collimate'), [n for n in names if flags & getattr(os, n)])\n"
    )
    out = await run(sess, code=code)
    assert out.output == b"[] ['ST_RDONLY', 'ST_NOSUID', 'ST_NODEV', 'ST_NOEXEC']\n"


# ---------------------------------------------------------------- processes


async def test_cannot_see_host_processes(sess: NodeSession) -> None:
    out = await run(
        sess, code="import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
    )
    pids = eval(out.output.decode())
    assert 1 in pids and len(pids) <= 4, pids
    out = await run(sess, command="cat /proc/1/cmdline | tr '\\0' ' '")
    assert b"supervisor.py" in out.output  # pid 1 is the session server, not the host init
    assert str(os.getpid()).encode() not in out.output


@pytest.fixture
def host_sleeper() -> AsyncIterator[subprocess.Popen[bytes]]:  # type: ignore[misc]
    proc = subprocess.Popen(["sleep", "120"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


async def test_cannot_kill_host_process(
    sess: NodeSession, host_sleeper: subprocess.Popen[bytes]
) -> None:
    pid = host_sleeper.pid
    code = (
        "import os, signal\n"
        f"for sig in (signal.SIGKILL, signal.SIGTERM):\n"
        "    try:\n"
        f"        os.kill({pid}, sig); print('SIGNALLED')\n"
        "    except OSError as e: print('denied', e.errno)\n"
        "try:\n"
        "    os.kill(-1, signal.SIGKILL)\n"
        "except OSError as e: print('kill -1', e.errno)\n"
    )
    out = await run(sess, code=code)
    assert b"SIGNALLED" not in out.output or os.getpid() == 1
    await asyncio.sleep(0.2)
    assert host_sleeper.poll() is None, "host process was killed from the sandbox"


async def test_fork_bomb_is_contained(rt: ServedNode, template: str) -> None:
    s = await rt.create_session(template, "bomb")
    try:
        t0 = time.monotonic()
        code = (
            "import os\n"
            "n = 0\n"
            "while True:\n"
            "    try:\n"
            "        os.fork(); n += 1\n"
            "    except OSError:\n"
            "        pass\n"
        )
        out = await run(s, timeout=3, code=code)
        assert out.exit_code == -1 and out.timed_out
        assert time.monotonic() - t0 < 15
        out = await run(s, command="ls /proc | grep -c '^[0-9]'")
        # the bomb is gone: server, factory, exec child, ls, grep
        assert int(out.output) <= 5
        out = await run(s, command="sh -c ':(){ :|:& };:' ; echo survived", timeout=3)
        assert (await run(s, command="echo alive")).output == b"alive\n"
    finally:
        await s.close()


async def test_memory_bomb_is_contained(sess: NodeSession) -> None:
    out = await run(sess, code="a = bytearray(8 << 30)")
    assert out.exit_code == 1 and b"MemoryError" in out.output
    out = await run(sess, code="x = []\nwhile True:\n    x.append(bytearray(64 << 20))")
    assert out.exit_code == 1 and b"MemoryError" in out.output
    assert (await run(sess, command="echo ok")).output == b"ok\n"


async def test_disk_fill_is_contained(sess: NodeSession) -> None:
    before = shutil.disk_usage("/").free
    code = (
        "import errno\n"
        "chunk = b'x' * (1 << 20)\n"
        "def fill(prefix):\n"
        "    i = 0\n"
        "    try:\n"
        "        while True:\n"
        "            with open(prefix + str(i), 'wb') as f:\n"
        "                for _ in range(8): f.write(chunk); f.flush()\n"
        "            i += 1\n"
        "    except OSError as e:\n"
        "        print('stopped', errno.errorcode[e.errno], i)\n"
        "fill('/sandbox/fill')\n"
        "fill('/tmp/fill')\n"
    )
    out = await run(sess, code=code, timeout=60)
    assert out.output.count(b"stopped ENOSPC") == 2, out.output
    after = shutil.disk_usage("/").free
    assert before - after < 32 << 20  # the host disk is untouched (the layer is a tmpfs)
    await run(sess, command="rm -f /sandbox/fill* /tmp/fill*")
    assert (await run(sess, command="echo ok > ok.txt && cat ok.txt")).output == b"ok\n"


async def test_file_size_limit(sess: NodeSession) -> None:
    out = await run(sess, code="open('big', 'wb').write(b'x' * (48 << 20))")
    assert out.exit_code == 1 and b"File too large" in out.output


async def test_output_flood_is_truncated(sess: NodeSession) -> None:
    t0 = time.monotonic()
    out = await run(sess, command="yes floodfloodflood", timeout=60)
    took = time.monotonic() - t0
    assert out.truncated
    assert len(out.output) == 16 * 1024 * 1024
    assert took < 10, took
    out = await run(sess, code="import os\nwhile True: os.write(1, b'z' * 65536)", timeout=60)
    assert out.truncated and len(out.output) == 16 * 1024 * 1024
    assert (await run(sess, command="echo ok")).output == b"ok\n"


async def test_infinite_loop_times_out(sess: NodeSession) -> None:
    t0 = time.monotonic()
    out = await run(sess, command="while :; do :; done", timeout=1)
    assert out.exit_code == -1 and out.output.endswith(b"timeout after 1.0s")
    assert time.monotonic() - t0 < 5


async def test_daemonized_child_does_not_outlive_exec(sess: NodeSession) -> None:
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        for fd in (0, 1, 2): os.close(fd)\n"
        "        for i in range(40):\n"
        "            time.sleep(0.05)\n"
        "            open('/sandbox/late.txt', 'a').write('x')\n"
        "        os._exit(0)\n"
        "    os._exit(0)\n"
        "print('parent done')\n"
    )
    out = await run(sess, code=code)
    assert out.output == b"parent done\n"
    out = await run(sess, command="ls /proc | grep -c '^[0-9]'")
    assert int(out.output) <= 5  # server, factory, exec child, ls, grep
    await asyncio.sleep(1.0)
    out = await run(sess, command="cat /sandbox/late.txt 2>/dev/null | wc -c")
    n1 = int(out.output)
    await asyncio.sleep(0.5)
    out = await run(sess, command="cat /sandbox/late.txt 2>/dev/null | wc -c")
    assert int(out.output) == n1 and n1 < 3


async def test_background_job_killed_with_exec(sess: NodeSession) -> None:
    out = await run(sess, command="(sleep 2; echo late > /sandbox/bg.txt) & echo started")
    assert out.output == b"started\n"
    await asyncio.sleep(2.5)
    out = await run(sess, command="ls /sandbox/bg.txt 2>&1")
    assert b"No such file" in out.output


async def test_ptrace_is_denied(sess: NodeSession) -> None:
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "r = libc.ptrace(16, 1, 0, 0)\n"  # PTRACE_ATTACH to the session server
        "print('attach', r, ctypes.get_errno())\n"
        "r = libc.ptrace(0, 0, 0, 0)\n"  # PTRACE_TRACEME
        "print('traceme', r, ctypes.get_errno())\n"
        "try:\n"
        "    open('/proc/1/mem', 'rb').read(1); print('MEM')\n"
        "except OSError as e: print('mem denied', e.errno)\n"
        "import os\n"
        "print('vm', libc.process_vm_readv(1, 0, 0, 0, 0, 0), ctypes.get_errno())\n"
    )
    out = await run(sess, code=code)
    lines = out.output.decode().splitlines()
    assert lines[0] == "attach -1 1" and lines[1] == "traceme -1 1", lines
    assert "MEM" not in out.output.decode()
    assert lines[3] == "vm -1 1"


async def test_mount_and_unshare_are_denied(sess: NodeSession) -> None:
    code = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('unshare', libc.unshare(0x10000000), ctypes.get_errno())\n"
        "print('unshare_ns', libc.unshare(0x20000), ctypes.get_errno())\n"
        "print('mount', libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno())\n"
        "print('umount', libc.umount2(b'/.collimate', 2), ctypes.get_errno())\n"
        "print('chroot', libc.chroot(b'/tmp'), ctypes.get_errno())\n"
        "print('bpf', libc.syscall(321, 0, 0, 0), ctypes.get_errno())\n"
        "print('clone3', libc.syscall(435, 0, 0), ctypes.get_errno())\n"
        "print('setns', libc.setns(0, 0), ctypes.get_errno())\n"
    )
    out = await run(sess, code=code)
    lines = dict(ln.split(" ", 1) for ln in out.output.decode().splitlines())
    assert lines["unshare"] == "-1 1" and lines["unshare_ns"] == "-1 1"
    assert lines["mount"] == "-1 1" and lines["umount"] == "-1 1"
    assert lines["chroot"] == "-1 1" and lines["bpf"] == "-1 1" and lines["setns"] == "-1 1"
    assert lines["clone3"] == "-1 38"  # ENOSYS: glibc falls back to clone
    out = await run(sess, command="unshare -r true; echo rc=$?")
    assert b"rc=0" not in out.output
    out = await run(sess, command="grep -E '^(Seccomp|NoNewPrivs|CapEff|CapBnd)' /proc/self/status")
    assert b"Seccomp:\t2" in out.output and b"NoNewPrivs:\t1" in out.output
    assert b"CapEff:\t0000000000000000" in out.output and b"CapBnd:\t0000000000000000" in out.output


async def test_sandboxed_uid_is_not_root_on_host(sess: NodeSession) -> None:
    task = asyncio.create_task(run(sess, command="sleep 3.217"))
    try:
        found: list[str] = []
        for _ in range(100):
            await asyncio.sleep(0.05)
            for p in Path("/proc").iterdir():
                if not p.name.isdigit():
                    continue
                try:
                    if (p / "cmdline").read_bytes() == b"sleep\x003.217\x00":
                        found.append((p / "status").read_text())
                except OSError:
                    continue
            if found:
                break
        assert found, "sandboxed process not found on the host"
        status = dict(ln.split(":", 1) for ln in found[0].splitlines())
        uids = status["Uid"].split()
        assert "0" not in uids and int(uids[0]) == SANDBOX_UID
        assert "0" not in status["Gid"].split()
        assert int(status["CapEff"].strip(), 16) == 0
        assert int(status["CapPrm"].strip(), 16) == 0
        assert status["Seccomp"].strip() == "2"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_signals_to_session_server_are_harmless(sess: NodeSession) -> None:
    code = "import os, signal\nfor s in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL, signal.SIGSTOP):\n    os.kill(1, s)\nprint('sent')\n"
    out = await run(sess, code=code)
    assert out.output == b"sent\n"
    assert (await run(sess, command="echo alive")).output == b"alive\n"


async def test_ptys_and_ipc_are_per_session(rt: ServedNode, template: str) -> None:
    a = await rt.create_session(template, "pty-a")
    b = await rt.create_session(template, "pty-b")
    try:
        code_a = (
            "import os, pty, time\n"
            "m, s = pty.openpty()\n"
            "print(os.ttyname(s))\n"
            "import sys; sys.stdout.flush()\n"
            "time.sleep(1.5)\n"
        )
        task = asyncio.create_task(run(a, code=code_a))
        await asyncio.sleep(0.5)
        out = await run(b, command="ls /dev/pts; ipcs -q 2>/dev/null | tail -n +4")
        assert out.output.split() == [b"ptmx"], out.output
        out_a = await task
        assert out_a.output.startswith(b"/dev/pts/"), out_a.output
    finally:
        await a.close()
        await b.close()
