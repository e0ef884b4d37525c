"""The batch extensions against a real node over real HTTP: ``/v1/exec/batch``, ``/v1/sessions/delete``."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from collimate_rl.node.models import MAX_BATCH_ITEMS

from .conftest import ThreadedNode, python_template
from .test_node_contract import assert_envelope, create

SEED = "0123456789abcdef" * 4


def test_items_run_in_their_sessions_and_one_shot(http: httpx.Client, template: str) -> None:
    a, b = create(http, template), create(http, template)
    items = [
        {
            "session_id": a,
            "files": [{"path": "x.txt", "content": "in a ✓"}],
            "command": "cat x.txt",
        },
        {"session_id": b, "command": "ls x.txt 2>/dev/null || echo none", "seed": SEED},
        {
            "template_id": template,
            "code": "import os; print(os.environ['COLLIMATE_SEED'])",
            "seed": SEED,
        },
        {"session_id": a, "code": "raise SystemExit(4)"},
    ]
    resp = http.post("/v1/exec/batch", json={"items": items})
    assert resp.status_code == 200, resp.text
    results = resp.json()["results"]
    assert [r["stdout"] for r in results[:3]] == ["in a ✓", "none\n", SEED + "\n"]
    assert results[1]["seed"] == SEED and results[1]["seed_ack"] in ("verified", "off")
    assert results[3]["exit_code"] == 4
    # the one-shot item left no session behind; the others keep their files
    listed = {s["session_id"] for s in http.get("/v1/sessions").json()}
    assert {a, b} <= listed
    again = http.post(f"/v1/sessions/{a}/exec", json={"command": "cat x.txt"}).json()
    assert again["stdout"] == "in a ✓"
    for sid in (a, b):
        http.delete(f"/v1/sessions/{sid}")


def test_an_item_fails_alone(http: httpx.Client, template: str) -> None:
    sid = create(http, template)
    items = [
        {"session_id": "no-such-session", "command": "true"},
        {"session_id": sid, "command": "echo ok"},
        {"template_id": "no-such-template", "command": "true"},
        {"command": "true"},  # neither a session nor a template
    ]
    results = http.post("/v1/exec/batch", json={"items": items}).json()["results"]
    assert (results[0]["error_code"], results[0]["status"]) == ("no_such_session", 404)
    assert results[1]["stdout"] == "ok\n"
    assert (results[2]["error_code"], results[2]["status"]) == ("no_template", 404)
    assert (results[3]["error_code"], results[3]["status"]) == ("bad_request", 400)
    http.delete(f"/v1/sessions/{sid}")


def test_bad_batches_are_400(http: httpx.Client, template: str) -> None:
    assert_envelope(http.post("/v1/exec/batch", json={"items": []}), 400, "bad_request")
    too_many = [{"template_id": template, "command": "true"}] * (MAX_BATCH_ITEMS + 1)
    assert_envelope(http.post("/v1/exec/batch", json={"items": too_many}), 400, "bad_request")
    bad_item = [{"template_id": template, "command": "true", "timeout_seconds": 0}]
    assert_envelope(http.post("/v1/exec/batch", json={"items": bad_item}), 400, "bad_request")
    assert_envelope(http.post("/v1/sessions/delete", json={"session_ids": []}), 400, "bad_request")


def test_delete_many(http: httpx.Client, template: str) -> None:
    ids = [create(http, template) for _ in range(3)]
    resp = http.post("/v1/sessions/delete", json={"session_ids": [*ids, "never-was", ids[0]]})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert sorted(body["deleted"]) == sorted(ids) and body["missing"] == ["never-was"]
    listed = {s["session_id"] for s in http.get("/v1/sessions").json()}
    assert not listed & set(ids)
    for sid in ids:
        assert http.post(f"/v1/sessions/{sid}/exec", json={"command": "true"}).status_code == 404


def test_items_past_the_free_places_are_shed_not_run(
    node_factory: Callable[..., ThreadedNode],
) -> None:
    node = node_factory(max_inflight=1, queue=1)
    with node.client() as http:
        template = python_template(http.get("/v1/health").json()["templates"])
        items = [
            {"template_id": template, "code": f"open('/tmp/ran', 'a'); print({i})"}
            for i in range(5)
        ]
        results = http.post("/v1/exec/batch", json={"items": items}).json()["results"]
        assert [r["stdout"] for r in results[:2]] == ["0\n", "1\n"]
        for shed in results[2:]:
            assert (shed["error_code"], shed["status"]) == ("at_capacity", 503)
        # the places are free again once the batch ended
        assert http.get("/v1/health").json()["queued"] == 0
        again = http.post("/v1/exec/batch", json={"items": items[:2]}).json()["results"]
        assert [r["stdout"] for r in again] == ["0\n", "1\n"]


def test_a_draining_node_refuses_the_whole_batch(
    node_factory: Callable[..., ThreadedNode],
) -> None:
    node = node_factory()
    with node.client() as http:
        node.app.state.node.begin_drain()
        item = {"template_id": "python3", "command": "true"}
        resp = http.post("/v1/exec/batch", json={"items": [item]})
        assert_envelope(resp, 503, "draining")
