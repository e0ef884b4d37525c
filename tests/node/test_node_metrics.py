"""``GET /metrics`` on a real node: the counters move by exactly the work done.

The text is parsed with prometheus-client's own parser; every check is a
difference between two scrapes around known work.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from collimate_rl.grading import UnitTestReward, grade
from collimate_rl.node.app import create_app
from collimate_rl.node.metrics import NodeMetrics
from collimate_rl.wire.daemon import CollimateClient

from .conftest import ThreadedNode, python_template
from .fakes import FakeRuntime

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

SPEC = UnitTestReward([{"input": [2, 3], "expected": 5}], entry="add")


def scrape(http: httpx.Client) -> Samples:
    resp = http.get("/metrics")
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(resp.text):
        for s in family.samples:
            samples[s.name, frozenset(s.labels.items())] = s.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def client_of(node: ThreadedNode) -> CollimateClient:
    if node.uds_path is not None:
        return CollimateClient(unix_socket=str(node.uds_path))
    return CollimateClient(node.base_url)


def test_counters_move_by_the_work_done(node_factory: Callable[..., ThreadedNode]) -> None:
    node = node_factory(pool_size=1)
    template = python_template(node.runtime.templates())
    with node.client() as http:
        before = scrape(http)
        for code in ("exit 0", "exit 0", "exit 0", "exit 4", "exit 5"):
            r = http.post("/v1/exec", json={"template_id": template, "command": code})
            assert r.status_code == 200, r.text
        timed = http.post(
            "/v1/exec", json={"template_id": template, "command": "sleep 30", "timeout_seconds": 1}
        )
        assert timed.json()["exit_code"] == -1
        sid = http.post("/v1/sessions", json={"template_id": template}).json()["session_id"]
        assert http.post(f"/v1/sessions/{sid}/exec", json={"command": "true"}).status_code == 200
        forked = http.post(f"/v1/sessions/{sid}/fork", json={"count": 2})
        assert forked.status_code == 201, forked.text
        missing = http.post("/v1/sessions/ses_nope/exec", json={"command": "true"})
        assert missing.status_code == 404
        batch = http.post(
            "/v1/exec/batch",
            json={
                "items": [
                    {"template_id": template, "command": "true"},
                    {"session_id": sid, "command": "exit 1"},
                ]
            },
        )
        assert batch.status_code == 200
        mid = scrape(http)  # sessions are live here: the parent and its two children
        assert value(mid, "collimate_sessions", template=template) == 3
        for child in forked.json()["children"]:
            http.delete(f"/v1/sessions/{child['id']}")
        http.delete(f"/v1/sessions/{sid}")
        after = scrape(http)

    d = lambda name, **kw: delta(before, after, name, **kw)  # noqa: E731
    assert d("collimate_execs_total", kind="oneshot", outcome="ok") == 4  # 3 + a batch item
    assert d("collimate_execs_total", kind="oneshot", outcome="nonzero_exit") == 2
    assert d("collimate_execs_total", kind="oneshot", outcome="timeout") == 1
    assert d("collimate_execs_total", kind="session", outcome="ok") == 1
    assert d("collimate_execs_total", kind="session", outcome="nonzero_exit") == 1
    assert d("collimate_execs_total", kind="session", outcome="error") == 1  # the 404
    assert d("collimate_exec_duration_seconds_count", kind="oneshot") == 7
    assert d("collimate_exec_duration_seconds_count", kind="session") == 2
    # the timed-out exec took a second: it is in the 2.5 s bucket, not the 0.5 s one
    assert d("collimate_exec_duration_seconds_sum", kind="oneshot") >= 1.0
    assert d("collimate_fork_duration_seconds_count") == 1
    assert d("collimate_forked_sessions_total") == 2
    creates = d("collimate_create_duration_seconds_count", pool="hit") + d(
        "collimate_create_duration_seconds_count", pool="miss"
    )
    assert creates == 1  # the POST /v1/sessions (one-shot execs are execs, not creates)
    assert d("collimate_grades_total", outcome="verdict") == 0  # no grade was sent
    assert d("collimate_http_requests_total", route="POST /v1/exec", status="200") == 6
    assert (
        d("collimate_http_requests_total", route="POST /v1/sessions/{id}/exec", status="404") == 1
    )
    # a scrape is counted once answered: the first and the middle one
    assert d("collimate_http_requests_total", route="GET /metrics", status="200") == 2
    assert value(after, "collimate_sessions", template=template) == 0
    assert value(after, "collimate_execs_in_flight") == 0
    assert value(after, "collimate_exec_queue_length") == 0
    assert value(after, "collimate_exec_slots") == node.node.config.max_inflight
    assert value(after, "process_resident_memory_bytes") > 10e6
    assert value(after, "process_cpu_seconds_total") > 0
    assert value(after, "collimate_node_draining") == 0


def test_grades_count_on_the_node(node_factory: Callable[..., ThreadedNode]) -> None:
    node = node_factory()
    template = python_template(node.runtime.templates())
    if "python3" not in node.runtime.templates():
        pytest.skip("no python3 template")
    with node.client() as http, client_of(node) as client:
        before = scrape(http)
        right = grade(client, template, "def add(a, b):\n    return a + b\n", SPEC, extract=False)
        wrong = grade(client, template, "def add(a, b):\n    return 0\n", SPEC, extract=False)
        assert (right.reward, wrong.reward) == (1.0, 0.0)
        after = scrape(http)
    # both reached a verdict (pass or fail is the trainer's to read from the frame)
    assert delta(before, after, "collimate_grades_total", outcome="verdict") == 2
    assert delta(before, after, "collimate_grade_duration_seconds_count") == 2
    # a grade is an exec too
    assert delta(before, after, "collimate_execs_total", kind="oneshot", outcome="ok") == 2


def test_refusals_and_draining_are_counted(node_factory: Callable[..., ThreadedNode]) -> None:
    node = node_factory(max_inflight=1, queue=0)
    template = python_template(node.runtime.templates())
    with node.client() as http:
        before = scrape(http)
        items = [{"template_id": template, "command": "sleep 1"}] * 3
        results = http.post("/v1/exec/batch", json={"items": items}).json()["results"]
        assert [r.get("error_code") for r in results] == [None, "at_capacity", "at_capacity"]
        node.node.begin_drain()
        refused = http.post("/v1/exec", json={"template_id": template, "command": "true"})
        assert refused.json()["error_code"] == "draining"
        after = scrape(http)
    assert delta(before, after, "collimate_admission_refusals_total", reason="at_capacity") == 2
    assert delta(before, after, "collimate_admission_refusals_total", reason="draining") == 1
    assert delta(before, after, "collimate_execs_total", kind="oneshot", outcome="refused") == 3
    assert value(after, "collimate_node_draining") == 1


def test_the_endpoint_needs_the_token(node_factory: Callable[..., ThreadedNode]) -> None:
    node = node_factory(token="s3cret-token-for-metrics")
    with node.client() as http:
        assert http.get("/metrics").status_code == 401
        ok = http.get("/metrics", headers={"Authorization": "Bearer s3cret-token-for-metrics"})
        assert ok.status_code == 200
        assert "collimate_execs_total" in ok.text


def test_nodes_in_one_process_count_apart(node_factory: Callable[..., ThreadedNode]) -> None:
    one, two = node_factory(), node_factory()
    template = python_template(one.runtime.templates())
    with one.client() as a, two.client() as b:
        before = scrape(b)
        assert (
            a.post("/v1/exec", json={"template_id": template, "command": "true"}).status_code == 200
        )
        assert delta(before, scrape(b), "collimate_execs_total", kind="oneshot", outcome="ok") == 0


def test_image_hooks_and_names() -> None:
    metrics = NodeMetrics(process=False)
    metrics.image_pull("ok", 3_000_000)
    metrics.image_pull("ok", 1_000)
    metrics.image_pull("error")
    metrics.set_store_bytes(5_000_000)
    samples: dict[str, Any] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for s in family.samples:
            samples[s.name + str(sorted(s.labels.items()))] = s.value
    assert samples["collimate_image_pulls_total[('outcome', 'ok')]"] == 2
    assert samples["collimate_image_pulls_total[('outcome', 'error')]"] == 1
    assert samples["collimate_image_pull_bytes_total[]"] == 3_001_000
    assert samples["collimate_image_store_bytes[]"] == 5_000_000
    # Prometheus' conventions: the prefix, and the unit or _total suffix
    for family in text_string_to_metric_families(metrics.render().decode()):
        assert family.name.startswith("collimate_"), family.name
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples)
        if family.type == "histogram":
            assert family.name.endswith("_seconds"), family.name
    assert not math.isnan(samples["collimate_image_store_bytes[]"])
    assert re.fullmatch(r"[a-z_]+", "collimate_image_store_bytes")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/health"),
        ("POST", "/v1/exec"),
        ("POST", "/metrics"),
        ("GET", "/metrics/../v1/health"),
        ("GET", "/v1/sessions"),
        ("DELETE", "/v1/sessions/ses_x"),
    ],
)
async def test_the_metrics_token_opens_nothing_but_the_metrics(
    tmp_path: Path, method: str, path: str
) -> None:
    app = create_app(
        FakeRuntime(state_dir=tmp_path),
        token="the-node-token-1234",
        metrics_token="the-scrapers-token-5678",
    )
    scraper = {"Authorization": "Bearer the-scrapers-token-5678"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://node") as http:
        assert (await http.get("/metrics", headers=scraper)).status_code == 200
        attack = await http.request(method, path, headers=scraper, json={"command": "id"})
        assert attack.status_code == 401, (method, path, attack.status_code)
        assert attack.json()["error_code"] == "unauthorized"


def test_a_client_that_leaves_is_a_cancellation(node_factory: Callable[..., ThreadedNode]) -> None:
    node = node_factory()
    template = python_template(node.runtime.templates())
    with node.client() as http:
        before = scrape(http)
        with node.client(timeout=1.0) as impatient, pytest.raises(httpx.ReadTimeout):
            impatient.post("/v1/exec", json={"template_id": template, "command": "sleep 30"})
        deadline = time.monotonic() + 20
        while True:  # the node notices the closed connection, then cancels the exec
            after = scrape(http)
            if delta(before, after, "collimate_cancellations_total", route="POST /v1/exec"):
                break
            assert time.monotonic() < deadline, "no cancellation counted"
            time.sleep(0.1)
    assert delta(before, after, "collimate_cancellations_total", route="POST /v1/exec") == 1
    assert delta(before, after, "collimate_execs_total", kind="oneshot", outcome="cancelled") == 1
    assert value(after, "collimate_execs_in_flight") == 0
    assert (
        delta(before, after, "collimate_http_requests_total", route="POST /v1/exec", status="499")
        == 1
    )


def test_a_metrics_token_needs_the_nodes_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from collimate_rl.node.server import main as serve_main

    token = tmp_path / "metrics-token"
    token.write_text("a-metrics-token-1234")
    token.chmod(0o600)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        code = serve_main(
            ["--isolation", "none", "--port", "0", "--metrics-token-file", str(token)]
        )
    finally:
        for handler in set(root.handlers) - set(handlers):  # serve's own log handler
            root.removeHandler(handler)
        root.setLevel(level)
    assert code == 2  # refused before anything was bound or started
    assert "--metrics-token-file needs --token-file" in capsys.readouterr().err
