"""Per-session egress on a real node (bwrap): policies, the relay, forks, pip, the API.

The stand-in internet is servers on ``127.0.0.2``/``127.0.0.3`` of the host
(conftest.py). The node is told, with its documented operator settings, to
resolve the test names to them, to count exactly those two addresses as the
internet and to ask no DNS server (nothing leaves the machine). Everything
else on loopback stays private: ``127.0.0.4`` (``private_echo``) is reachable
only when an allowlist names it by IP, and the node's own port never.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from collimate_rl._bearer import bearer_headers
from collimate_rl.cli import main as cli_main
from collimate_rl.errors import CollimateServerError
from collimate_rl.grading import ReplayRecorder, UnitTestReward, grade, grade_batch
from collimate_rl.node import LocalNode
from collimate_rl.sandbox import Sandbox
from collimate_rl.templates import Ready, Template

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/ns/user").exists(), reason="needs Linux namespaces"
)

NAMES = {
    "origin.test": "127.0.0.2",
    "pypi.test": "127.0.0.2",
    "echo.test": "127.0.0.3",
    "github.com": "127.0.0.2",
    "api.github.com": "127.0.0.2",
    "rebind.test": "127.0.0.4",
}


@pytest.fixture(scope="module")
def node() -> Iterator[LocalNode]:
    flags: list[str] = ["--egress-resolve-only"]
    for name, address in NAMES.items():
        flags += ["--egress-resolve", f"{name}={address}"]
    flags += ["--egress-internet", "127.0.0.2/32", "--egress-internet", "127.0.0.3/32"]
    with LocalNode(tcp=True, pool_size=1, extra_args=tuple(flags)) as n:
        yield n


@pytest.fixture(scope="module")
def client(node: LocalNode) -> Iterator[Any]:
    c = node.client()
    yield c
    c.close()


@pytest.fixture(autouse=True)
def _clean(node: LocalNode, client: Any) -> Iterator[None]:
    yield
    assert client.list_sessions() == []
    assert _gate_sockets(node) == []


def _gate_sockets(node: LocalNode) -> list[str]:
    assert node.workdir is not None
    return sorted(p.name for p in (node.workdir / "state" / "t").glob("*/socks/*.net.sock"))


@pytest.fixture
def session(client: Any) -> Iterator[Callable[..., str]]:
    made: list[str] = []

    def make(template: str = "python3-net", egress: dict[str, Any] | None = None) -> str:
        sid = str(client.create_session(template, egress=egress).session_id)
        made.append(sid)
        return sid

    yield make
    for sid in made:
        client.delete_session(sid)


# Runs in the sandbox: each call is (kind, *args); prints one JSON result per call.
PROBE = r"""
import http.client, json, socket, struct, sys, time

def http_get(url):
    # through $HTTP_PROXY, whatever $NO_PROXY says (it exempts loopback)
    conn = http.client.HTTPConnection("127.0.0.1", 3128, timeout=20)
    conn.request("GET", url)
    reply = conn.getresponse()
    return {"status": reply.status, "body": reply.read().decode()}

def tunnel(host, port, payload):
    conn = http.client.HTTPConnection("127.0.0.1", 3128, timeout=20)
    conn.set_tunnel(host, port)
    try:
        conn.connect()
    except OSError as e:
        return {"status": None, "error": str(e)}
    conn.sock.sendall(payload.encode())
    return {"status": 200, "body": conn.sock.recv(65536).decode()}

def socks(host, port, payload):
    s = socket.create_connection(("127.0.0.1", 1080), timeout=20)
    s.sendall(b"\x05\x01\x00")
    assert s.recv(2) == b"\x05\x00"
    name = host.encode()
    s.sendall(bytes([5, 1, 0, 3, len(name)]) + name + struct.pack(">H", port))
    reply = s.recv(10)
    if reply[1] != 0:
        return {"status": reply[1]}
    s.sendall(payload.encode())
    return {"status": 0, "body": s.recv(65536).decode()}

def direct(host, port, payload):
    try:
        socket.create_connection((host, port), timeout=5).close()
        return {"status": "connected"}
    except OSError as e:
        return {"status": type(e).__name__, "error": str(e)}

for call in json.loads(sys.argv[1] if len(sys.argv) > 1 else CALLS):
    start = time.monotonic()
    kind, args = call[0], call[1:]
    try:
        out = {"http": http_get, "tunnel": tunnel, "socks": socks, "direct": direct}[kind](*args)
    except Exception as e:
        out = {"status": None, "error": repr(e)}
    out["seconds"] = time.monotonic() - start
    print(json.dumps(out))
"""


def probe(client: Any, sid: str, *calls: tuple[Any, ...]) -> list[dict[str, Any]]:
    code = f"CALLS = {json.dumps(json.dumps([list(c) for c in calls]))}\n" + PROBE
    result = client.session_exec(sid, code=code, timeout_seconds=60)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert result.exit_code == 0 and len(lines) == len(calls), result.stdout
    return [json.loads(line) for line in lines]


def test_allowed_hosts_are_reachable_over_http_connect_and_socks(
    client: Any, session: Callable[..., str], origin: tuple[str, int], echo: tuple[str, int]
) -> None:
    sid = session(egress={"allow": ["origin.test", "echo.test"]})
    got = probe(
        client,
        sid,
        ("http", f"http://origin.test:{origin[1]}/a?b=c"),
        ("tunnel", "echo.test", echo[1], "via CONNECT"),
        ("socks", "echo.test", echo[1], "via SOCKS5"),
    )
    assert got[0]["status"] == 200 and got[0]["body"].startswith("hello /a?b=c")
    assert got[1] == {**got[1], "status": 200, "body": "via CONNECT"}
    assert got[2] == {**got[2], "status": 0, "body": "via SOCKS5"}
    info = client.get_session(sid)
    assert info["egress"]["policy"] == {"mode": "allowlist", "allow": ["origin.test", "echo.test"]}
    hosts = info["egress"]["hosts"]
    assert hosts["origin.test"]["allowed"] == 1 and hosts["echo.test"]["allowed"] == 2
    assert hosts["echo.test"]["bytes_out"] >= len("via CONNECTvia SOCKS5")
    assert info["egress"]["denied"] == 0


@pytest.mark.parametrize(
    ("egress", "host", "why"),
    [
        ({"deny": ["origin.test"]}, "origin.test", "matches the deny entry 'origin.test'"),
        ({"allow": ["echo.test"]}, "origin.test", "no allow entry names it"),
        ({"mode": "none"}, "origin.test", "this session has no egress"),
        ({"mode": "open"}, "127.0.0.1", "a loopback address"),
        ({"mode": "open"}, "127.0.0.4", "a loopback address"),
        ({"mode": "open"}, "rebind.test", "resolves to 127.0.0.4, a loopback address"),
        ({"mode": "open"}, "169.254.169.254", "a link-local address"),
        ({"preset": "rl-leakage"}, "api.github.com", "matches the deny entry '*.github.com'"),
    ],
)
def test_refusals_are_immediate_and_name_the_policy_and_host(
    client: Any,
    session: Callable[..., str],
    origin: tuple[str, int],
    egress: dict[str, Any],
    host: str,
    why: str,
) -> None:
    sid = session(egress=egress)
    port = origin[1]
    got = probe(
        client,
        sid,
        ("http", f"http://{host}:{port}/"),
        ("tunnel", host, 443, ""),
        ("socks", host, port, ""),
    )
    assert got[0]["status"] == 403
    assert f"{host}:{port} refused by egress policy" in got[0]["body"] and why in got[0]["body"]
    assert got[1]["status"] is None and "403" in got[1]["error"]
    assert got[2]["status"] == 2  # SOCKS5: connection not allowed by ruleset
    assert all(g["seconds"] < 1.0 for g in got), got
    assert client.get_session(sid)["egress"]["hosts"][host]["denied"] == 3


def test_a_direct_socket_to_an_outside_address_fails(
    client: Any, session: Callable[..., str], origin: tuple[str, int]
) -> None:
    sid = session(egress={"mode": "open"})
    got = probe(
        client,
        sid,
        ("direct", "127.0.0.2", origin[1], ""),  # the session's own loopback: nobody there
        ("direct", "10.255.255.1", 80, ""),
        ("direct", "2001:db8::1", 80, ""),
    )
    assert got[0]["status"] == "ConnectionRefusedError"
    assert got[1]["status"] == "OSError" and "unreachable" in got[1]["error"]
    assert got[2]["status"] == "OSError" and "unreachable" in got[2]["error"]
    assert all(g["seconds"] < 1.0 for g in got)
    other = client.session_exec(
        sid,
        code="import socket\n"
        "for fam in (socket.AF_NETLINK, socket.AF_PACKET):\n"
        "    try: socket.socket(fam, socket.SOCK_RAW); print('opened')\n"
        "    except OSError as e: print(e.errno)\n"
        "try: socket.getaddrinfo('origin.test', 80); print('resolved')\n"
        "except OSError as e: print('no dns')\n",
    )
    assert other.stdout.split() == ["97", "97", "no", "dns"]  # EAFNOSUPPORT; no resolver


def test_two_sessions_of_one_template_run_two_policies_at_once(
    client: Any, session: Callable[..., str], origin: tuple[str, int], echo: tuple[str, int]
) -> None:
    only_origin = session(egress={"allow": ["origin.test"]})
    only_echo = session(egress={"allow": ["echo.test"]})
    calls = (("http", f"http://origin.test:{origin[1]}/"), ("socks", "echo.test", echo[1], "x"))
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(lambda sid: probe(client, sid, *calls * 3), (only_origin, only_echo))
    assert [g["status"] for g in a] == [200, 2] * 3
    assert [g["status"] for g in b] == [403, 0] * 3


def test_the_nodes_own_port_is_unreachable_even_when_allowlisted(
    client: Any, session: Callable[..., str], node: LocalNode, private_echo: tuple[str, int]
) -> None:
    node_port = int(node.base_url.rsplit(":", 1)[1])
    sid = session(egress={"allow": ["127.0.0.1", "127.0.0.4", f"localhost:{node_port}"]})
    got = probe(
        client,
        sid,
        ("http", f"http://127.0.0.1:{node_port}/v1/health"),
        ("socks", "127.0.0.1", node_port, ""),
        ("socks", "127.0.0.4", private_echo[1], "named by IP"),
    )
    assert got[0]["status"] == 403 and "this node's own listening socket" in got[0]["body"]
    assert got[1]["status"] == 2
    assert got[2]["status"] == 0 and got[2]["body"] == "named by IP"


def test_a_fork_keeps_its_parents_policy(
    client: Any, origin: tuple[str, int], echo: tuple[str, int]
) -> None:
    parent = client.create_session("python3-net", egress={"allow": ["origin.test"]}).session_id
    try:
        children = [c["session_id"] for c in client.fork_session(parent, 2)["children"]]
        try:
            for child in children:
                got = probe(
                    client,
                    child,
                    ("http", f"http://origin.test:{origin[1]}/"),
                    ("socks", "echo.test", echo[1], ""),
                )
                assert [g["status"] for g in got] == [200, 2]
                info = client.get_session(child)
                assert info["template_id"] == "python3-net"
                assert info["egress"]["policy"] == {"mode": "allowlist", "allow": ["origin.test"]}
        finally:
            for child in children:
                client.delete_session(child)
    finally:
        client.delete_session(parent)


PIP = (
    "PIP_CONFIG_FILE=/dev/null python3 -m pip download tinypkg==0.1 --no-deps "
    "--index-url http://pypi.test:{port}/simple/ -d /tmp/dl --retries 0 --timeout 10 "
    "--no-cache-dir --disable-pip-version-check --trusted-host pypi.test && ls /tmp/dl"
)


def test_pip_download_from_an_allowed_index_works_and_fails_when_not_allowed(
    client: Any, session: Callable[..., str], pypi_index: tuple[str, int]
) -> None:
    allowed = session(egress={"allow": ["pypi.test"]})
    done = client.session_exec(allowed, command=PIP.format(port=pypi_index[1]), timeout_seconds=120)
    assert done.exit_code == 0, done.stdout
    assert "tinypkg-0.1-py3-none-any.whl" in done.stdout
    refused = session(egress={"allow": ["files.pythonhosted.org"]})
    start = time.monotonic()
    failed = client.session_exec(
        refused, command=PIP.format(port=pypi_index[1]), timeout_seconds=120
    )
    assert failed.exit_code != 0 and "No matching distribution" in failed.stdout
    assert "tinypkg-0.1-py3-none-any.whl" not in failed.stdout
    assert time.monotonic() - start < 30  # refused at once (pip's own start-up aside)
    # pip reads the refused index page as "no versions"; the node counted the refusals
    assert client.get_session(refused)["egress"]["hosts"]["pypi.test"]["denied"] >= 1
    assert client.get_session(allowed)["egress"]["hosts"]["pypi.test"]["bytes_in"] > 500


@pytest.mark.parametrize(
    ("egress", "field", "words"),
    [
        ({"mode": "bogus"}, "egress.mode", "'open', 'none', 'allowlist' or 'denylist'"),
        ({"allow": ["10.0.0.0/33"]}, "egress.allow.0", "not a valid CIDR"),
        ({"allow": ["a.test"], "deny": ["b.test"]}, "egress", "allow cannot be combined"),
        ({"mode": "open", "allow": []}, "egress", "mode 'open' takes no allow"),
        ({"preset": "nope"}, "egress.preset", "unknown preset"),
        ({"alow": ["a.test"]}, "egress", "unknown key 'alow'"),
    ],
)
def test_malformed_policies_are_400s_naming_the_field_and_create_nothing(
    node: LocalNode, client: Any, egress: dict[str, Any], field: str, words: str
) -> None:
    with node.http() as http:
        for path, body in (
            ("/v1/sessions", {"template_id": "python3-net", "egress": egress}),
            ("/v1/exec", {"template_id": "python3-net", "code": "print(1)", "egress": egress}),
            ("/v1/templates", {"template_id": "never", "network": True, "egress": egress}),
        ):
            reply = http.post(path, json=body)
            assert reply.status_code == 400, reply.text
            error = reply.json()["error"]
            assert reply.json()["error_code"] == "bad_request"
            assert error.startswith(f"{field}: ") and words in error, error
    assert "never" not in client.templates()


def test_a_policy_on_a_template_without_network_is_the_contracts_400(
    client: Any, session: Callable[..., str]
) -> None:
    for call in (
        lambda: client.create_session("python3", egress={"preset": "rl-leakage"}),
        lambda: client.exec_once("python3", code="print(1)", egress={"mode": "open"}),
    ):
        with pytest.raises(CollimateServerError) as info:
            call()
        assert info.value.status == 400 and "template is vsock-only" in str(info.value)
        assert "'python3-net'" in str(info.value)  # the message names the twin
    sid = session("python3", egress={"mode": "none"})  # none is always fine
    assert "egress" not in client.get_session(sid).raw
    assert "python3-net" in client.templates()


def test_a_networked_template_defaults_to_open(
    client: Any, session: Callable[..., str], origin: tuple[str, int]
) -> None:
    sid = session()
    got = probe(
        client, sid, ("http", f"http://origin.test:{origin[1]}/"), ("http", "http://127.0.0.1:9/")
    )
    assert [g["status"] for g in got] == [200, 403]
    assert client.get_session(sid)["egress"]["policy"] == {"mode": "open"}


def test_one_shot_execs_grades_and_the_manifest_carry_the_policy(
    client: Any, origin: tuple[str, int], tmp_path: Path
) -> None:
    url = f"http://origin.test:{origin[1]}/"
    fetch = f"import urllib.request\ntry:\n    print(urllib.request.urlopen({url!r}).status)\nexcept Exception as e:\n    print(e)"
    ok = client.exec_once("python3-net", code=fetch, egress={"allow": ["origin.test"]})
    no = client.exec_once("python3-net", code=fetch, egress={"deny": ["origin.test"]})
    assert ok.stdout.strip() == "200" and "403" in no.stdout
    spec = UnitTestReward([{"input": [], "expected": 200}], entry="status")
    answer = f"def status():\n    import urllib.request\n    return urllib.request.urlopen({url!r}).status\n"
    manifest = tmp_path / "m.jsonl"
    with ReplayRecorder(manifest) as recorder:
        passed = grade(
            client,
            "python3-net",
            answer,
            spec,
            extract=False,
            recorder=recorder,
            egress={"allow": ["origin.test"]},
        )
        failed = grade(
            client,
            "python3-net",
            answer,
            spec,
            extract=False,
            recorder=recorder,
            egress={"mode": "none"},
        )
        # grade_batch takes our node's batch route: the same policy per item, the same manifest
        batched = grade_batch(
            client,
            "python3-net",
            [answer, answer],
            spec,
            extract=False,
            recorder=recorder,
            egress={"mode": "none"},
        )
    assert passed.reward == 1.0 and failed.reward == 0.0
    assert [r.reward for r in batched] == [0.0, 0.0]
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert [r["egress"] for r in rows] == [{"allow": ["origin.test"]}] + [{"mode": "none"}] * 3


def test_networked_bakes_with_a_default_policy_that_a_call_overrides(
    client: Any, session: Callable[..., str], origin: tuple[str, int]
) -> None:
    handle = Template.bake(
        client, name="net-baked", image="python3", ready=Ready(network=True), width=1
    )
    assert handle.id == "net-baked"
    client.bake_template("net-deny", [], base="net-baked", egress={"deny": ["origin.test"]})
    with pytest.raises(CollimateServerError) as info:  # a default needs a network
        client.bake_template("plain-deny", ["true"], egress={"deny": ["origin.test"]})
    assert "template is vsock-only" in str(info.value)
    url = f"http://origin.test:{origin[1]}/"
    assert probe(client, session("net-baked"), ("http", url))[0]["status"] == 200
    assert probe(client, session("net-deny"), ("http", url))[0]["status"] == 403
    assert probe(client, session("net-deny", {"mode": "open"}), ("http", url))[0]["status"] == 200


def test_sandbox_and_the_cli_take_egress(
    client: Any, node: LocalNode, origin: tuple[str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://origin.test:{origin[1]}/"
    fetch = f"import urllib.request; print(urllib.request.urlopen({url!r}).read().decode())"
    with Sandbox("python3-net", client=client, egress={"allow": ["origin.test"]}) as box:
        assert box.exec(fetch).stdout.startswith("hello /")
        assert client.get_session(box.session_id).egress["policy"]["mode"] == "allowlist"

    assert node.workdir is not None  # a TCP LocalNode requires its bearer token

    def cli(*argv: str) -> tuple[int, str]:
        code = cli_main(
            [*argv, "--url", node.base_url, "--token-file", str(node.workdir / "token")]
        )
        return code, capsys.readouterr().out

    code, out = cli(
        "exec", "--template", "python3-net", "--egress", "deny:origin.test", "--code", fetch
    )
    assert code != 0 and "403" in out
    code, out = cli(
        "exec", "--template", "python3-net", "--egress", "allow:origin.test", "--code", fetch
    )
    assert code == 0 and out.startswith("hello /")
    # a networked bake from the CLI: no setup needed, a default policy that a call overrides
    assert cli("bake", "cli-net", "--network", "--egress", '{"deny": ["origin.test"]}')[0] == 0
    code, out = cli("exec", "--template", "cli-net", "--code", fetch)
    assert code != 0 and "403" in out
    code, out = cli("exec", "--template", "cli-net", "--egress", "open", "--code", fetch)
    assert code == 0 and out.startswith("hello /")
    assert cli("exec", "--template", "python3-net", "--egress", "allow", "--code", "1")[0] == 2


def test_the_session_cannot_reach_the_socket_folder_or_move_its_gate(
    client: Any, session: Callable[..., str], origin: tuple[str, int]
) -> None:
    sid = session(egress={"allow": ["origin.test"]})
    scan = client.session_exec(
        sid,
        code="import os\nfound = []\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n"
        "        for fd in os.listdir(f'/proc/{pid}/fd'):\n"
        "            found.append(os.readlink(f'/proc/{pid}/fd/{fd}'))\n"
        "    except OSError:\n"
        "        pass\n"
        "print([f for f in found if 'collimate' in f or 'socks' in f])\n"
        "print(os.path.exists('/.collimate/socks'))",
    )
    assert scan.stdout.split("\n")[:2] == ["[]", "False"]
    # killing the relay only ends this session's own egress, at once
    killed = client.session_exec(
        sid,
        code="import os, signal\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try: os.kill(int(pid), signal.SIGKILL)\n"
        "    except OSError: pass\n",
    )
    assert killed.exit_code in (0, -9)
    got = probe(client, sid, ("http", f"http://origin.test:{origin[1]}/"))
    assert got[0]["status"] is None and got[0]["seconds"] < 1.0


def test_gates_go_with_their_sessions(node: LocalNode, client: Any) -> None:
    sid = client.create_session("python3-net").session_id
    assert len(_gate_sockets(node)) == 1
    client.delete_session(sid)
    assert _gate_sockets(node) == []


def test_the_none_driver_offers_no_network_and_refuses_policies(tmp_path: Path) -> None:
    import asyncio

    from collimate_rl.node.core import Node
    from collimate_rl.node.egress import EgressPolicy
    from collimate_rl.node.errors import NodeError
    from collimate_rl.node.runtime import create_runtime

    async def check() -> None:
        node = Node(create_runtime("none", state_dir=tmp_path / "state"))
        with pytest.warns(RuntimeWarning):
            await node.start()
        try:
            assert "python3-net" not in node.runtime.templates()
            with pytest.raises(NodeError) as info:
                node.egress_for("python3", EgressPolicy(mode="open"))
            assert "template is vsock-only" in info.value.message
            assert "isolation=none" in info.value.message
            assert node.egress_for("python3", EgressPolicy(mode="none")) is None
        finally:
            await node.close()

    asyncio.run(check())


def test_the_health_endpoint_lists_the_twins(node: LocalNode) -> None:
    with httpx.Client(base_url=node.base_url, headers=bearer_headers(node.token)) as http:
        templates = http.get("/v1/health").json()["templates"]
    assert {"python3", "python3-net"} <= set(templates)
    assert not any(re.fullmatch(r"py-net", t) for t in templates)


def _egress_counts(node: LocalNode) -> dict[tuple[str, str], float]:
    from prometheus_client.parser import text_string_to_metric_families

    with node.http() as http:
        text = http.get("/metrics").text
    return {
        (s.labels["decision"], s.labels["reason"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "collimate_egress_connections_total"
    }


def test_the_nodes_metrics_count_egress_decisions_by_reason(
    node: LocalNode, client: Any, session: Callable[..., str], origin: tuple[str, int]
) -> None:
    before = _egress_counts(node)
    sid = session(egress={"allow": ["origin.test"]})
    got = probe(
        client,
        sid,
        ("http", f"http://origin.test:{origin[1]}/"),
        ("http", f"http://origin.test:{origin[1]}/again"),
        ("http", f"http://echo.test:{origin[1]}/"),
        ("http", f"http://127.0.0.4:{origin[1]}/"),
    )
    assert [g["status"] for g in got] == [200, 200, 403, 403]
    after = _egress_counts(node)
    moved = {k: after[k] - before.get(k, 0.0) for k in after if after[k] != before.get(k, 0.0)}
    assert moved == {("allowed", "policy"): 2, ("denied", "not_allowed"): 2}
