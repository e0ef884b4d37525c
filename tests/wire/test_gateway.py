"""The gateway client against a contract-faithful fake gateway."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from collimate_rl.errors import (
    CollimateCapacityError,
    CollimateDrainingError,
    CollimateTransportError,
    CollimateUsageError,
    DemoTierLimit,
    ForkShortError,
    GatewayError,
    NetworkRequiresProError,
    QuotaExceededError,
)
from collimate_rl.wire import GatewayClient

from ._fake_gateway import FakeGateway, envelope
from ._server import Reply, ScriptedServer

PRO = "col_pro_abcd1234_" + "s" * 32
DEMO = "col_demo_abcd1234_" + "s" * 32


@pytest.fixture
def gw() -> Iterator[tuple[ScriptedServer, FakeGateway]]:
    srv = ScriptedServer("tcp").start()
    fake = FakeGateway(PRO)
    srv.fallback = fake
    yield srv, fake
    srv.stop()


@pytest.fixture
def make_gw(
    gw: tuple[ScriptedServer, FakeGateway], sleeps: list[float]
) -> Iterator[Callable[..., GatewayClient]]:
    made: list[GatewayClient] = []

    def make(api_key: str = PRO, prefix: str = "", **kw: Any) -> GatewayClient:
        srv, fake = gw
        fake.api_key, fake.prefix = api_key, prefix
        kw.setdefault("sleep", sleeps.append)
        kw.setdefault("rng", random.Random(3))
        client = GatewayClient(api_key, srv.url + prefix, **kw)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def test_bearer_header_on_every_request(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    srv, _ = gw
    client = make_gw()
    client.health()
    sid = client.create_session("python311")["session_id"]
    client.session_exec(sid, code="print(1)")
    client.delete_session(sid)
    assert len(srv.calls()) == 4
    assert {r.headers["authorization"] for r in srv.calls()} == {f"Bearer {PRO}"}
    assert {r.headers["content-type"] for r in srv.calls()} == {"application/json"}


def test_wrong_key_is_unauthorized_and_not_retried(gw: Any) -> None:
    srv, fake = gw
    fake.api_key = PRO
    with (
        GatewayClient("col_pro_wrong_key", srv.url) as client,
        pytest.raises(GatewayError) as info,
    ):
        client.list_templates()
    assert info.value.code == "unauthorized" and info.value.status == 401
    assert str(info.value) == "missing or invalid API key"
    assert len(srv.calls()) == 1


def test_key_and_origin_from_the_environment(gw: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    srv, fake = gw
    fake.api_key = DEMO
    monkeypatch.setenv("COLLIMATE_API_KEY", DEMO)
    monkeypatch.setenv("COLLIMATE_BASE_URL", srv.url)
    with GatewayClient.from_env() as client:
        assert (client.api_key, client.tier, client.fork_cap) == (DEMO, "demo", 4)
        assert client.health().status == "ok"


def test_missing_key_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLLIMATE_API_KEY", raising=False)
    with pytest.raises(CollimateUsageError, match="an API key is required"):
        GatewayClient()


@pytest.mark.parametrize(
    "key, tier, cap",
    [(DEMO, "demo", 4), (PRO, "pro", 32), ("col_ent_x_y", "ent", 64), ("col_gold_x_y", None, 32)],
)
def test_tier_from_key(key: str, tier: str | None, cap: int) -> None:
    client = GatewayClient(key, "https://gw.example")
    assert (client.tier, client.fork_cap) == (tier, cap)
    assert client.base == "https://gw.example"


def test_base_url_path_prefix_is_kept(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    srv, _ = gw
    client = make_gw(prefix="/pfx")
    assert client.images()[0].id == "python311"
    assert srv.calls()[0].path == "/pfx/v1/images"


@pytest.mark.parametrize(
    "reply, cls, code",
    [
        (
            envelope(403, "demo_tier_limit", "demo tier runs 8 concurrent sandboxes"),
            DemoTierLimit,
            "demo_tier_limit",
        ),
        (
            envelope(429, "demo_tier_limit", "demo tier runs 8 concurrent sandboxes"),
            DemoTierLimit,
            "demo_tier_limit",
        ),
        (envelope(402, "quota_exceeded", "quota exceeded"), QuotaExceededError, "quota_exceeded"),
        (
            envelope(402, "insufficient_credits", "top up"),
            QuotaExceededError,
            "insufficient_credits",
        ),
        (envelope(403, "forbidden", "image not allowed"), GatewayError, "forbidden"),
        (envelope(404, "not_found", "no such template"), GatewayError, "not_found"),
        (envelope(400, "bad_request", "bad"), GatewayError, "bad_request"),
        (envelope(401, "unauthorized", "who"), GatewayError, "unauthorized"),
        (envelope(429, "rate_limited", "slow down"), GatewayError, "rate_limited"),
    ],
)
def test_envelopes_are_typed_and_never_retried(
    gw: Any, make_gw: Callable[..., GatewayClient], reply: Reply, cls: type[GatewayError], code: str
) -> None:
    srv, _ = gw
    srv.script("GET", "/v1/templates", reply, Reply(200, {"templates": []}))
    srv.script("POST", "/v1/sandboxes", reply, Reply(201, {"id": "x"}))
    client = make_gw()
    with pytest.raises(cls) as info:
        client.list_templates()
    assert isinstance(info.value, cls) and isinstance(info.value, GatewayError)
    assert (info.value.code, info.value.error_code, info.value.status) == (code, code, reply.status)
    assert str(info.value) == reply.body["message"]  # verbatim, no "HTTP n:" prefix
    with pytest.raises(cls):
        client.create_sandbox("python311")
    assert len(srv.calls()) == 2


def test_daemon_style_envelope_is_accepted(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    srv, _ = gw
    srv.script(
        "GET", "/v1/sandboxes/sb-9", Reply(404, {"error": "gone", "error_code": "not_found"})
    )
    with pytest.raises(GatewayError) as info:
        make_gw().get_sandbox("sb-9")
    assert info.value.code == "not_found" and str(info.value) == "gone"


def test_non_json_error_body(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    srv, _ = gw
    srv.script("GET", "/v1/usage", *[Reply(502, raw=b"<html>bad gateway</html>")] * 4)
    with pytest.raises(GatewayError) as info:
        make_gw().usage()
    assert str(info.value) == "HTTP 502: Bad Gateway" and info.value.code is None
    assert len(srv.calls()) == 4  # idempotent: 502 retried


def test_network_requires_pro(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    client = make_gw(api_key=DEMO)
    with pytest.raises(NetworkRequiresProError) as info:
        client.create_template(name="web", image="nginx", ready={"network": True}, width=1)
    assert isinstance(info.value, GatewayError) and info.value.status == 403


def test_at_capacity_is_retried_on_a_create(
    gw: Any, make_gw: Callable[..., GatewayClient], sleeps: list[float]
) -> None:
    srv, _ = gw
    srv.script("POST", "/v1/sandboxes", envelope(503, "at_capacity", "placer full"))
    resp = make_gw().create_sandbox("python311", label="a", labels={"k": "v"}, secret_refs=["s"])
    assert resp.session_id == resp["id"] == "sb-1" and resp.template_id == "python311"
    assert len(srv.calls("POST", "/v1/sandboxes")) == 2 and len(sleeps) == 1
    assert srv.calls()[-1].body == {
        "template": "python311",
        "label": "a",
        "labels": {"k": "v"},
        "secret_refs": ["s"],
    }


def test_at_capacity_past_the_retries_is_typed(
    gw: Any, make_gw: Callable[..., GatewayClient]
) -> None:
    srv, _ = gw
    srv.script("POST", "/v1/sandboxes", *[envelope(503, "at_capacity", "placer full")] * 3)
    with pytest.raises(CollimateCapacityError) as info:
        make_gw(retries=2).create_sandbox("python311")
    assert isinstance(info.value, GatewayError)


@pytest.mark.parametrize("code", ["draining", "session_bringup_failed", None])
def test_other_5xx_on_a_create_are_not_retried(
    gw: Any, make_gw: Callable[..., GatewayClient], code: str | None
) -> None:
    srv, _ = gw
    body = {"code": code, "message": "nope"} if code else {"message": "nope"}
    srv.script("POST", "/v1/sandboxes", Reply(503, body))
    with pytest.raises(GatewayError) as info:
        make_gw().create_sandbox("python311")
    if code == "draining":
        assert isinstance(info.value, CollimateDrainingError)
    assert len(srv.calls()) == 1


def test_429_on_get_is_not_retried_on_the_gateway(
    gw: Any, make_gw: Callable[..., GatewayClient]
) -> None:
    srv, _ = gw
    srv.script("GET", "/v1/images", Reply(429, {"message": "slow down"}))
    with pytest.raises(GatewayError):
        make_gw().images()
    assert len(srv.calls()) == 1


def test_500_and_drops_on_get_are_retried(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    srv, _ = gw
    srv.script("GET", "/v1/images", Reply(500, {"message": "oops"}), Reply(drop=True))
    assert len(make_gw().images()) == 1
    assert len(srv.calls()) == 3


def test_dropped_exec_is_not_retried(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    srv, _ = gw
    client = make_gw()
    sid = client.create_session("python311").session_id
    srv.script("POST", f"/v1/sandboxes/{sid}/exec", Reply(drop=True))
    with pytest.raises(CollimateTransportError):
        client.session_exec(str(sid), command="true")
    assert len(srv.calls("POST", f"/v1/sandboxes/{sid}/exec")) == 1


# ------------------------------------------------------------------- fork


def test_fork_is_chunked_to_the_tier_cap(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    srv, _fake = gw
    client = make_gw()
    parent = client.create_sandbox("python311").session_id
    labels = [f"l{i}" for i in range(70)]
    resp = client.fork(str(parent), count=70, labels=labels)
    calls = srv.calls("POST", f"/v1/sandboxes/{parent}/fork")
    assert [c.body["count"] for c in calls] == [32, 32, 6]
    assert [c.body["labels"] for c in calls] == [labels[:32], labels[32:64], labels[64:]]
    assert len(resp.children) == 70 and len(set(resp.session_ids)) == 70
    assert resp.parent == parent and all(c.session_id == c.id for c in resp.children)


def test_fork_demo_cap_and_fork_session(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    srv, _ = gw
    client = make_gw(api_key=DEMO)
    parent = str(client.create_session("python311").session_id)
    resp = client.fork_session(parent, 9)
    assert [c.body["count"] for c in srv.calls("POST", f"/v1/sandboxes/{parent}/fork")] == [4, 4, 1]
    assert len(resp["children"]) == 9


def test_short_chunk_raises_and_reaps_every_child(
    gw: Any, make_gw: Callable[..., GatewayClient]
) -> None:
    _srv, fake = gw
    fake.short_fork_chunk = 1
    client = make_gw()
    parent = str(client.create_sandbox("python311").session_id)
    with pytest.raises(ForkShortError) as info:
        client.fork(parent, count=70)
    assert info.value.code == "fork_short"
    assert len(fake.deleted) == 32 + 31
    assert set(fake.sandboxes) == {parent}


def test_fork_error_midway_reaps(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    srv, fake = gw
    client = make_gw()
    parent = str(client.create_sandbox("python311").session_id)
    path = f"/v1/sandboxes/{parent}/fork"
    srv.script("POST", path, Reply(200, {"children": [{"id": "sb-x1"}, {"id": "sb-x2"}]}))
    srv.script("POST", path, envelope(500, "upstream_error", "node lost"))
    fake.sandboxes.update({"sb-x1": {"id": "sb-x1"}, "sb-x2": {"id": "sb-x2"}})
    with pytest.raises(GatewayError, match="node lost"):
        client.fork(parent, count=4, max_per_call=2)
    assert fake.deleted == ["sb-x1", "sb-x2"]
    assert len(srv.calls("POST", path)) == 2  # a non-idempotent fork is not retried


def test_fork_argument_checks(make_gw: Callable[..., GatewayClient]) -> None:
    client = make_gw()
    with pytest.raises(CollimateUsageError):
        client.fork("sb-1", count=0)
    with pytest.raises(CollimateUsageError):
        client.fork("sb-1", count=2, labels=["one"])


# -------------------------------------------------------------- exec_once


def test_exec_once_creates_execs_and_reaps(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    srv, fake = gw
    resp = make_gw().exec_once("python311", code="print(1)", seed="0" * 64, egress={"mode": "none"})
    assert resp.stdout == "ok\n" and resp["seed"] == "0" * 64
    assert [(r.method, r.path) for r in srv.calls()] == [
        ("POST", "/v1/sandboxes"),
        ("POST", "/v1/sandboxes/sb-1/exec"),
        ("DELETE", "/v1/sandboxes/sb-1"),
    ]
    assert srv.calls()[0].body == {"template": "python311", "egress": {"mode": "none"}}
    assert srv.calls()[1].body == {"timeout_seconds": 30, "code": "print(1)", "seed": "0" * 64}
    assert fake.sandboxes == {}


@pytest.mark.parametrize(
    "reply",
    [envelope(500, "upstream_error", "guest agent died"), Reply(drop=True)],
)
def test_exec_once_reaps_on_a_failing_exec(
    gw: Any, make_gw: Callable[..., GatewayClient], reply: Reply
) -> None:
    _srv, fake = gw
    fake.exec_reply = reply
    with pytest.raises((GatewayError, CollimateTransportError)):
        make_gw().exec_once("python311", command="true")
    assert fake.deleted == ["sb-1"] and fake.sandboxes == {}


def test_exec_once_validates_before_creating(
    gw: Any, make_gw: Callable[..., GatewayClient]
) -> None:
    srv, _ = gw
    with pytest.raises(CollimateUsageError, match="one of command/code/commands"):
        make_gw().exec_once("python311")
    assert srv.calls() == []


def test_exec_once_without_an_id(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    srv, fake = gw
    fake.create_without_id = True
    with pytest.raises(GatewayError, match="returned no id; cannot exec or reap"):
        make_gw().exec_once("python311", command="true")
    assert len(srv.calls()) == 1


# ------------------------------------------------------- the rest of the surface


def test_session_parity_aliases(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    client = make_gw()
    sid = str(client.create_session("python311").session_id)
    info = client.get_session(sid)
    assert info.session_id == info["id"] == sid and info["template_id"] == "python311"
    (row,) = client.list_sessions()
    assert row.session_id == sid and row.template_id == "python311"
    assert client.delete_session(sid) == {"deleted": True, "id": sid, "session_id": sid}
    assert client.delete_session(sid) == {"deleted": False, "id": sid, "session_id": sid}


def test_templates(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    srv, _ = gw
    client = make_gw()
    created = client.create_template(
        name="web",
        image="nginx:1",
        ready={"cmd": "true", "http": "", "ports": [8080], "env": {"A": "ready"}},
        env={"A": "env", "B": "env"},
        width=8,
        expected_width=8,
    )
    assert created.id == "tpl-web" and created.phase == "Pending"
    assert srv.calls()[-1].body == {
        "name": "web",
        "image": "nginx:1",
        "pool": {"width": 8},
        "ready": {"cmd": "true", "ports": [8080], "env": {"A": "ready", "B": "env"}},
        "expected_width": 8,
    }
    client.create_template(name="bare", image="alpine", width=2, cold_fraction=25)
    assert srv.calls()[-1].body == {
        "name": "bare",
        "image": "alpine",
        "pool": {"width": 2, "cold_fraction": 25},
    }
    assert client.get_template("tpl-mine").warm == 8
    assert client.list_templates()[0].visibility == "public"
    assert client.expect_width("tpl-mine", 500)["expected_width"] == 64
    assert client.release_template("tpl-mine")["released"] is True
    assert client.delete_template("tpl-mine").deleted
    with pytest.raises(GatewayError, match="shared catalog image") as info:
        client.delete_template("python311")
    assert info.value.status == 403 and info.value.code == "forbidden"
    with pytest.raises(GatewayError) as nf:
        client.get_template("tpl-other")
    assert nf.value.code == "not_found"


@pytest.mark.parametrize(
    "body, key",
    [
        ({"images": [{"id": "a"}]}, "images"),
        ({"templates": [{"id": "a"}]}, "t"),
        ([{"id": "a"}], "l"),
    ],
)
def test_images_shapes(gw: Any, make_gw: Callable[..., GatewayClient], body: Any, key: str) -> None:
    srv, _ = gw
    srv.script("GET", "/v1/images", Reply(200, body))
    assert [i.id for i in make_gw().list_images()] == ["a"]


def test_suspend_resume(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    client = make_gw()
    assert client.suspend("sb-1").state == "suspended"
    assert client.resume("sb-1")["state"] == "running"


def test_connect_url(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    srv, _ = gw
    client = make_gw()
    minted = client.connect_url("sb-1", 8080, ttl_seconds=99999)
    assert minted.url.startswith("wss://gw/connect?port=8080") and minted.expires_at
    assert srv.calls()[-1].body == {"port": 8080, "ttl_seconds": 3600}
    assert client.cdp_url("sb-1", ttl_seconds=0).endswith("&protocol=cdp")
    assert srv.calls()[-1].body == {"port": 9222, "ttl_seconds": 1, "protocol": "cdp"}
    with pytest.raises(GatewayError, match=r"port 5555 .*Ready\(ports=\[5555\]\)") as info:
        client.connect_url("sb-1", 5555)
    assert info.value.code == "port_not_exposed"
    with pytest.raises(CollimateUsageError):
        client.connect_url("sb-1", 8080, protocol="udp")


def test_connect_url_is_pro_only(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    with pytest.raises(GatewayError, match="is a Pro feature") as info:
        make_gw(api_key=DEMO).connect_url("sb-1", 8080)
    assert info.value.status == 403 and info.value.code == "forbidden"


def test_usage_query_params(gw: Any, make_gw: Callable[..., GatewayClient]) -> None:
    srv, _ = gw
    client = make_gw()
    start = "2026-01-01T00:00:00+00:00"
    end = datetime(2026, 2, 1, tzinfo=timezone.utc)
    usage = client.usage(from_ts=start, to_ts=end)
    assert srv.calls()[-1].query == {"from": [start], "to": [end.isoformat()]}
    assert (usage.from_ts, usage["to"], usage.totals) == (start, end.isoformat(), {"cpu_s": 1})
    client.usage()
    assert srv.calls()[-1].query == {}
