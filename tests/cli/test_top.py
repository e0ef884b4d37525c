"""``collimate top`` against real nodes: under a pseudo-terminal, piped, as JSON, over a fleet file."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from prometheus_client.parser import text_string_to_metric_families

from collimate_rl.cli import main
from collimate_rl.node import LocalNode
from collimate_rl.wire.node_metrics import NodeSnapshot, parse_samples

COLLIMATE = [sys.executable, "-m", "collimate_rl.cli"]


@pytest.fixture(scope="module")
def node() -> Iterator[LocalNode]:
    with LocalNode(isolation="none", pool_size=0) as n:
        yield n


def test_top_redraws_under_a_pty_and_ends_cleanly_on_ctrl_c(node: LocalNode) -> None:
    assert node.socket_path is not None
    child = pexpect.spawn(
        COLLIMATE[0],
        [*COLLIMATE[1:], "top", "--url", f"unix:{node.socket_path}", "--interval", "0.3"],
        env={**os.environ, "TERM": "xterm", "COLUMNS": "160", "LINES": "40"},
        dimensions=(40, 160),
        timeout=30,
        encoding="utf-8",
    )
    try:
        child.expect("exec/s")
        with node.client() as client:
            for _ in range(5):
                assert client.exec_once("python3", command="true").exit_code == 0
        # a redraw shows the five execs' rate (a number > 0 in the exec/s column)
        child.expect(r"collimate top")
        child.expect(r"exec/s")
        time.sleep(0.5)
        child.sendintr()  # Ctrl-C, as the terminal sends it
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, (child.exitstatus, child.signalstatus)
    assert "Traceback" not in (child.before or "")


def test_top_once_and_json_count_the_work(
    node: LocalNode, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"unix:{node.socket_path}"
    assert main(["top", "--url", url, "--json", "--interval", "0.1"]) == 0
    before = json.loads(capsys.readouterr().out)
    with node.client() as client:
        for command in ("true", "true", "exit 2"):
            client.exec_once("python3", command=command)
    assert main(["top", "--url", url, "--json", "--interval", "0.1"]) == 0
    after = json.loads(capsys.readouterr().out)
    (name,) = after
    moved = {k: after[name]["execs"][k] - before[name]["execs"][k] for k in after[name]["execs"]}
    assert moved["ok"] == 2 and moved["nonzero_exit"] == 1
    assert main(["top", "--url", url, "--once", "--interval", "0.1"]) == 0
    table = capsys.readouterr().out
    assert "exec/s" in table and "p99ms" in table and "unix:" in table


def test_top_without_a_node_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in ("COLLIMATE_SERVE_URL", "COLLIMATE_SERVE_SOCKET"):
        monkeypatch.delenv(var, raising=False)
    assert main(["top", "--once"]) == 2
    assert "needs a node" in capsys.readouterr().err


def test_an_unreachable_node_is_a_row_not_a_crash(
    node: LocalNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sd = tmp_path / "fleet.json"
    sd.write_text(json.dumps([{"targets": ["127.0.0.1:9"], "labels": {"collimate_node": "gone"}}]))
    code = main(
        [
            "top",
            "--url",
            f"unix:{node.socket_path}",
            "--sd-file",
            str(sd),
            "--once",
            "--interval",
            "0.1",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "gone" in out and "ConnectError" in out and "total" in out


def test_our_parser_reads_what_prometheus_client_reads(node: LocalNode) -> None:
    with node.http() as http:
        text = http.get("/metrics").text
    ours = [(n, labels, v) for n, labels, v in parse_samples(text)]
    theirs = [
        (s.name, dict(s.labels), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]
    key = lambda t: (t[0], sorted(t[1].items()))  # noqa: E731
    assert sorted(ours, key=key) == sorted(theirs, key=key)
    snap = NodeSnapshot.from_text(text)
    assert snap.slots > 0 and snap.rss_bytes > 0
