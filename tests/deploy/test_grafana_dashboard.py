"""The shipped Grafana dashboard asks only for metrics and labels a real node exports."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collimate_rl.node import LocalNode
from collimate_rl.node.metrics import NodeMetrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "collimate-nodes.json"
#: Labels Prometheus adds to every series it scrapes (and the fleet's file-SD labels).
TARGET_LABELS = {"instance", "job", "collimate_node", "ray_node_id", "collimate_state"}
_METRIC = re.compile(r"\b((?:collimate|process)_[a-z_]+)\b")
_BY = re.compile(r"\bby\s*\(([^)]*)\)")
_MATCHER = re.compile(r"([a-z_]+)\s*(?:=~|!~|!=|=)\s*\"")


def _exprs(dashboard: dict[str, Any]) -> Iterator[str]:
    for panel in dashboard["panels"]:
        for target in panel.get("targets", ()):
            yield target["expr"]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):
            yield query["query"]


@pytest.fixture(scope="module")
def exported() -> dict[str, set[str]]:
    """Every series name a real node exports, and each one's label names."""
    with (
        LocalNode(isolation="none", pool_size=0) as node,
        node.client() as client,
        node.http() as http,
    ):
        client.exec_once("python3", command="true")
        session = client.create_session("python3").session_id  # a live one, per template
        text = http.get("/metrics").text
        client.delete_session(session)
    declared = {  # a labelled family has no series until its first child exists
        collector._name: set(collector._labelnames)  # type: ignore[attr-defined]
        for collector in NodeMetrics(process=False).registry._collector_to_names  # type: ignore[attr-defined]
        if hasattr(collector, "_labelnames")
    }
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}.get(
            family.type, ("",)
        )
        labels = declared.get(family.name, set())
        for s in family.samples:
            labels |= set(s.labels) - {"le"}
        for suffix in suffixes:
            names[family.name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    return names


def test_the_dashboard_is_grafana_json() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel
            assert {"x", "y", "w", "h"} <= set(panel["gridPos"])


def test_every_query_names_exported_metrics_and_labels(exported: dict[str, set[str]]) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    seen: set[str] = set()
    for expr in _exprs(dashboard):
        metrics = set(_METRIC.findall(expr))
        assert metrics, f"no node metric in {expr!r}"
        unknown = metrics - set(exported)
        assert not unknown, f"{expr!r} asks for {unknown}, which no node exports"
        labels = {label.strip() for group in _BY.findall(expr) for label in group.split(",")}
        labels |= set(_MATCHER.findall(expr))
        known = set().union(*(exported[m] for m in metrics)) | TARGET_LABELS
        assert labels - {""} <= known, f"{expr!r} uses labels {labels - known} its metrics lack"
        seen |= metrics
    # the panels cover what the issue asks an operator to see
    for wanted in (
        "collimate_execs_total",
        "collimate_grades_total",
        "collimate_exec_duration_seconds_bucket",
        "collimate_grade_duration_seconds_bucket",
        "collimate_create_duration_seconds_bucket",
        "collimate_fork_duration_seconds_bucket",
        "collimate_execs_in_flight",
        "collimate_exec_queue_length",
        "collimate_admission_refusals_total",
        "collimate_sessions",
        "collimate_egress_connections_total",
        "collimate_cancellations_total",
        "collimate_infra_errors_total",
        "collimate_image_pulls_total",
        "collimate_image_store_bytes",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    ):
        assert wanted in seen, wanted


def test_the_check_catches_a_wrong_name(exported: dict[str, set[str]]) -> None:
    assert "collimate_execs_total" in exported and "collimate_exec_total" not in exported
    assert "outcome" in exported["collimate_execs_total"]
    assert "template" not in exported["collimate_execs_total"]
