"""Template services on the real local node: a server per session, reached through the bridge.

Each test checks the node is left clean: no session, no relay socket or
service file in the state dir, and the bridged TCP port closed.
"""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.errors import CollimateServerError
from collimate_rl.node import LocalNode
from tests._other_user import connect_as_other_user, needs_root

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/ns/user").exists(), reason="needs Linux namespaces"
)

HTTP_SERVER = "exec python3 -m http.server {port} --bind 127.0.0.1"


@pytest.fixture(scope="module")
def node() -> Iterator[LocalNode]:
    with LocalNode(pool_size=0) as n:
        yield n


@pytest.fixture(scope="module")
def client(node: LocalNode) -> Iterator[Any]:
    c = node.client()
    c.bake_template(
        "svc-web",
        [],
        ready={"cmd": HTTP_SERVER.format(port=8000), "ports": [8000], "http": "/"},
    )
    yield c
    c.close()


@pytest.fixture(autouse=True)
def _clean(node: LocalNode, client: Any) -> Iterator[None]:
    yield
    assert client.list_sessions() == []
    assert _service_files(node) == []


def _service_files(node: LocalNode) -> list[str]:
    """What the sessions left in the host-shared socket dirs (relay sockets, service files)."""
    assert node.workdir is not None
    socks = (node.workdir / "state" / "t").glob("*/socks/*")
    return sorted(p.name for p in socks if p.name != "master.sock")


def _service_running(client: Any, session_id: str) -> bool:
    # (pid 1's command line holds the template config, service command included)
    procs = client.session_exec(session_id, command="ps -eo args").stdout.splitlines()
    return any(line.startswith("python3 -m http.server") for line in procs)


def _get(address: str, path: str = "/") -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://{address}{path}", timeout=10) as reply:
        return int(reply.status)


def _refused(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_service_is_reachable_survives_execs_and_goes_with_the_session(client: Any) -> None:
    created = client.create_session("svc-web")
    sid, address = created.session_id, created.endpoints["8000"]
    try:
        assert set(created.endpoints) == {"8000"}
        assert address.startswith("127.0.0.1:")
        assert _get(address) == 200
        # the post-exec sweep kills an exec's leftovers but spares the service
        out = client.session_exec(sid, command="sleep 30 & echo started").stdout
        assert "started" in out
        assert _get(address) == 200
        assert _service_running(client, sid)
        assert "sleep 30" not in client.session_exec(sid, command="ps -eo args").stdout
    finally:
        client.delete_session(sid)
    assert _refused(address)


def test_the_session_api_reports_endpoints_only_for_services(client: Any) -> None:
    plain = client.create_session("python3")
    try:
        assert plain.endpoints == {}
    finally:
        client.delete_session(plain.session_id)


def test_only_declared_ports_are_bridged(client: Any) -> None:
    client.bake_template(
        "svc-two-ports",
        [],
        ready={
            "cmd": f"{HTTP_SERVER.format(port=8001)[5:]} & {HTTP_SERVER.format(port=8000)}",
            "ports": [8000],
            "http": "/",
        },
    )
    created = client.create_session("svc-two-ports")
    try:
        assert set(created.endpoints) == {"8000"}
        # both servers run inside; 8001 has no relay socket and no endpoint
        code = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:8001/').status)"
        out = client.session_exec(created.session_id, code=code).stdout
        assert "Address family not supported" in out or "[Errno 97]" in out  # execs: no AF_INET
    finally:
        client.delete_session(created.session_id)


def test_a_service_cannot_reach_the_host_or_other_sessions(client: Any) -> None:
    victim = client.create_session("svc-web")
    try:
        port = int(victim.endpoints["8000"].rsplit(":", 1)[1])
        probe = (
            "import os, socket\n"
            "def try_tcp(host, port):\n"
            "    try:\n"
            "        socket.create_connection((host, port), timeout=2).close()\n"
            "        return 'connected'\n"
            "    except OSError as exc:\n"
            "        return type(exc).__name__\n"
            "def try_netlink():\n"
            "    try:\n"
            "        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()\n"
            "        return 'opened'\n"
            "    except OSError as exc:\n"
            "        return str(exc.errno)\n"
            f"lines = ['bridge=' + try_tcp('127.0.0.1', {port}),\n"
            "         'netlink=' + try_netlink(),\n"
            "         'outside=' + try_tcp('1.1.1.1', 53),\n"
            "         'internals=' + ','.join(os.listdir('/.collimate'))]\n"
            "open('/sandbox/probe.txt', 'w').write(chr(10).join(lines))\n"
        )
        client.bake_template(
            f"svc-probe-{port}",
            [f"cat > probe.py <<'EOF'\n{probe}EOF"],
            ready={
                "cmd": f"python3 probe.py; {HTTP_SERVER.format(port=8000)}",
                "ports": [8000],
                "http": "/",
            },
        )
        attacker = client.create_session(f"svc-probe-{port}")
        try:
            report = client.session_exec(attacker.session_id, command="cat probe.txt").stdout
        finally:
            client.delete_session(attacker.session_id)
        # its own loopback only: the node's bridge port and the outside are unreachable,
        # and the host-shared socket directory (every session's relay) is hidden
        assert "bridge=ConnectionRefusedError" in report
        assert "netlink=97" in report  # seccomp: IP and unix sockets only (EAFNOSUPPORT)
        assert "outside=OSError" in report or "outside=TimeoutError" in report
        assert "internals=\n" in report + "\n"
        assert _get(victim.endpoints["8000"]) == 200
    finally:
        client.delete_session(victim.session_id)


def test_an_exec_cannot_reach_the_socket_folder_through_the_keeper(client: Any) -> None:
    # K keeps a descriptor of the host-shared socket folder (every session's server
    # socket, the master's); /proc/<K>/fd must not hand it to the session's code.
    created = client.create_session("svc-web")
    try:
        scan = client.session_exec(
            created.session_id,
            code="import os\nseen = []\n"
            "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
            "    try:\n"
            "        for fd in os.listdir(f'/proc/{pid}/fd'):\n"
            "            path = f'/proc/{pid}/fd/{fd}'\n"
            "            if os.path.isdir(path):\n"
            "                seen += os.listdir(path)\n"
            "    except OSError:\n"
            "        pass\n"
            "print([name for name in seen if name.endswith('.sock')])",
        )
        assert scan.stdout.strip() == "[]"
        assert _get(created.endpoints["8000"]) == 200
    finally:
        client.delete_session(created.session_id)


def test_a_crashing_service_fails_the_create_with_its_output(client: Any) -> None:
    client.bake_template(
        "svc-crash",
        [],
        ready={"cmd": "echo boom-from-service >&2; exit 3", "ports": [8000], "http": "/"},
    )
    with pytest.raises(CollimateServerError) as info:
        client.create_session("svc-crash")
    assert info.value.error_code == "service_not_ready"
    assert "exited with 3" in str(info.value) and "boom-from-service" in str(info.value)


def test_a_service_that_never_answers_times_out(client: Any) -> None:
    client.bake_template(
        "svc-silent",
        [],
        ready={"cmd": "sleep 600", "ports": [8000], "http": "/", "http_timeout_s": 1},
    )
    with pytest.raises(CollimateServerError) as info:
        client.create_session("svc-silent")
    assert info.value.error_code == "service_not_ready"
    assert "did not answer within 1s" in str(info.value)


def test_service_sessions_cannot_be_forked(client: Any) -> None:
    created = client.create_session("svc-web")
    try:
        with pytest.raises(CollimateServerError) as info:
            client.fork_session(created.session_id, 1)
        assert info.value.error_code == "bad_request"
        assert _get(created.endpoints["8000"]) == 200
    finally:
        client.delete_session(created.session_id)


@pytest.mark.parametrize(
    ("ready", "needle"),
    [
        ({"http": "/", "ports": []}, "ready.http needs ready.ports"),
        ({"ports": [8000]}, "ready.ports needs ready.cmd"),
        ({"cmd": "x", "ports": [0]}, "ports"),
    ],
)
def test_bad_service_bakes_are_refused(client: Any, ready: dict[str, Any], needle: str) -> None:
    with pytest.raises(CollimateServerError) as info:
        client.bake_template("svc-bad", [], ready=ready)
    assert info.value.status == 400 and needle in str(info.value)
    assert "svc-bad" not in client.templates()


def test_stopping_the_node_closes_every_bridge() -> None:
    with LocalNode(pool_size=0) as node:
        client = node.client()
        client.bake_template(
            "svc-web",
            [],
            ready={"cmd": HTTP_SERVER.format(port=8000), "ports": [8000], "http": "/"},
        )
        address = client.create_session("svc-web").endpoints["8000"]
        assert _get(address) == 200
        client.close()
    assert _refused(address)


def test_an_unreadable_port_answers_a_closed_connection(client: Any) -> None:
    # the service runs but nothing listens on the declared port yet: the bridge
    # accepts and closes, it does not hang
    client.bake_template("svc-late", [], ready={"cmd": "sleep 600", "ports": [8000]})
    created = client.create_session("svc-late")
    try:
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            _get(created.endpoints["8000"])
    finally:
        client.delete_session(created.session_id)


def test_service_templates_are_not_pooled(local_node: Any, local_client: Any) -> None:
    # the shared node keeps a warm pool: a pooled service session would run a
    # server for nobody (its relay socket would show up in the state dir)
    local_client.bake_template(
        "svc-unpooled",
        [],
        ready={"cmd": HTTP_SERVER.format(port=8000), "ports": [8000], "http": "/"},
    )
    created = local_client.create_session("svc-unpooled")
    local_client.delete_session(created.session_id)
    time.sleep(1.0)  # a refill would have started by now
    leftovers = [n for n in _service_files(local_node) if ".p8000." in n or ".svc." in n]
    assert leftovers == []


def test_an_exec_killing_the_service_breaks_only_its_own_session(client: Any) -> None:
    other = client.create_session("svc-web")
    victim = client.create_session("svc-web")
    try:
        client.session_exec(victim.session_id, command="kill -9 -1; true")
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            _get(victim.endpoints["8000"])
        assert client.session_exec(victim.session_id, command="echo alive").stdout == "alive\n"
        assert not _service_running(client, victim.session_id)  # swept with its dead keeper
        assert _get(other.endpoints["8000"]) == 200
    finally:
        client.delete_session(victim.session_id)
        client.delete_session(other.session_id)


def test_a_backgrounded_server_works_as_on_the_gateway(client: Any) -> None:
    # gateway templates start their server in the background (the bake's WARM_CMD
    # returns); the same Ready works here: the command exits 0, its server lives on
    client.bake_template(
        "svc-bg",
        [],
        ready={
            "cmd": "nohup python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &",
            "ports": [8000],
            "http": "/",
        },
    )
    created = client.create_session("svc-bg")
    try:
        assert _get(created.endpoints["8000"]) == 200
        client.session_exec(created.session_id, command="true")  # a sweep
        assert _get(created.endpoints["8000"]) == 200
    finally:
        client.delete_session(created.session_id)


@needs_root
def test_another_local_user_cannot_reach_a_service_port(node: LocalNode, client: Any) -> None:
    created = client.create_session("svc-web")
    address = created.endpoints["8000"]
    log = next((node.workdir or Path()).glob("state/t/*/socks/*.svc.log"))
    request = b"GET /?from-another-user HTTP/1.0\r\n\r\n"
    try:
        assert _get(address, "/?from-the-node-user") == 200  # the node's own uid is served
        seen = connect_as_other_user(address, request)
        # a closed connection: no byte of the service's answer, and it never saw the request
        assert seen in ("read 0 bytes: b''", "error ConnectionResetError"), seen
        assert "?from-the-node-user" in log.read_text()
        assert "from-another-user" not in log.read_text()
        assert _get(address) == 200  # and the port still serves its owner
    finally:
        client.delete_session(created.session_id)
