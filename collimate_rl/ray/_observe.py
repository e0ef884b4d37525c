"""Watching a fleet: its nodes' metrics in one call, and Prometheus' file-based discovery.

``RayFleet(metrics_sd_file=PATH)`` keeps ``PATH`` a Prometheus ``file_sd_configs``
file: one target group per node that serves (healthy or draining), labelled with
its tag and Ray node, rewritten (atomically, only when it changed) whenever the
fleet follows the cluster, and emptied when the fleet closes. Next to it,
``PATH.token`` (mode 0600) holds the fleet's read-only metrics token: every node
accepts it for ``GET /metrics`` and for nothing else. Prometheus reads both::

    scrape_configs:
      - job_name: collimate
        authorization:
          credentials_file: /var/lib/prometheus/collimate/fleet.json.token
        file_sd_configs:
          - files: [/var/lib/prometheus/collimate/fleet.json]

>>> from collimate_rl.ray._directory import FleetNode, NodeState
>>> groups = sd_groups([FleetNode("n1", "r1", "http://10.0.0.5:8123", NodeState.HEALTHY),
...                     FleetNode("n2", "r2", "", NodeState.STARTING)])
>>> groups
[{'targets': ['10.0.0.5:8123'], 'labels': {'collimate_node': 'n1', 'ray_node_id': 'r1', 'collimate_state': 'healthy'}}]
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from collimate_rl.ray._directory import FleetNode
from collimate_rl.wire.node_metrics import NodeSnapshot, fetch_metrics

__all__ = [
    "FleetStats",
    "NodeStats",
    "collect_stats",
    "sd_groups",
    "write_private",
    "write_sd_file",
]


def sd_groups(nodes: Sequence[FleetNode]) -> list[dict[str, Any]]:
    """The file-SD target groups of the nodes that serve."""
    groups = []
    for node in nodes:
        if not node.address or not node.state.serves_sessions:
            continue
        groups.append(
            {
                "targets": [urlsplit(node.address).netloc],
                "labels": {
                    "collimate_node": node.tag,
                    "ray_node_id": node.ray_node_id,
                    "collimate_state": node.state.value,
                },
            }
        )
    return groups


def _replace(path: Path, text: str, mode: int) -> None:
    """Write ``text`` to ``path`` atomically (a reader sees the old or the new file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_sd_file(path: Path, nodes: Sequence[FleetNode], last: str | None = None) -> str:
    """Write the SD file for ``nodes`` unless its text is ``last``; the text written."""
    text = json.dumps(sd_groups(nodes), indent=2) + "\n"
    if text != last:
        _replace(path, text, 0o644)
    return text


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner reads (the metrics token)."""
    _replace(path, text, 0o600)


@dataclass(frozen=True)
class NodeStats:
    """One node's metrics, or why they could not be read."""

    node: FleetNode
    metrics: NodeSnapshot | None
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "tag": self.node.tag,
            "address": self.node.address,
            "state": self.node.state.value,
            "metrics": self.metrics.to_json() if self.metrics is not None else None,
            "error": self.error,
        }


@dataclass(frozen=True)
class FleetStats:
    """Every node's metrics at one moment, and the fleet's totals."""

    nodes: list[NodeStats]

    def total(self, key: str) -> float:
        """A number of :meth:`NodeSnapshot.to_json` (``in_flight``, ``sessions``, ...) or
        ``execs``/``grades`` (every outcome), summed over the nodes that answered."""
        total = 0.0
        for stat in self.nodes:
            if stat.metrics is None:
                continue
            if key == "execs":
                total += stat.metrics.exec_total
            elif key == "grades":
                total += stat.metrics.grade_total
            else:
                total += float(stat.metrics.to_json()[key])
        return total

    def to_json(self) -> dict[str, Any]:
        keys = ("execs", "grades", "in_flight", "queued", "sessions", "infra_errors", "refusals")
        return {
            "nodes": [stat.to_json() for stat in self.nodes],
            "totals": {key: self.total(key) for key in keys},
        }


def collect_stats(
    nodes: Sequence[FleetNode], token_of: Callable[[str], str | None], timeout: float = 5.0
) -> FleetStats:
    """Scrape every node that serves, at once."""
    serving = [n for n in nodes if n.address and n.state.serves_sessions]

    def one(node: FleetNode) -> NodeStats:
        try:
            snap = fetch_metrics(node.address, token=token_of(node.tag), timeout=timeout)
        except Exception as exc:  # one node's failure is its row, not the call's
            return NodeStats(node, None, f"{type(exc).__name__}: {exc}"[:300])
        return NodeStats(node, snap)

    if not serving:
        return FleetStats([])
    with ThreadPoolExecutor(min(16, len(serving))) as pool:
        return FleetStats(list(pool.map(one, serving)))
