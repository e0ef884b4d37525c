"""Reading a node's ``GET /metrics``: a snapshot of its counters and the rates between two.

Our node serves Prometheus' text format (``collimate_rl/node/metrics.py``). This
reads the few families a person watching a node or a fleet wants (``collimate
top``, ``RayFleet.stats()``) without the node extra's prometheus-client: the
text format's sample lines are simple, and this parser reads exactly them.

>>> text = '''# TYPE collimate_execs_total counter
... collimate_execs_total{kind="oneshot",outcome="ok"} 10.0
... collimate_execs_total{kind="session",outcome="ok"} 5.0
... collimate_execs_in_flight 2.0
... '''
>>> snap = NodeSnapshot.from_text(text, at=100.0)
>>> snap.execs, snap.in_flight
({'ok': 15.0}, 2.0)
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["NodeRates", "NodeSnapshot", "fetch_metrics", "histogram_quantile", "parse_samples"]

Sample = tuple[str, dict[str, str], float]

_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def _labels(text: str) -> dict[str, str]:
    """``k="v",k2="v2"`` (the inside of the braces) as a dict."""
    labels: dict[str, str] = {}
    i = 0
    while i < len(text):
        eq = text.index("=", i)
        name = text[i:eq].strip().lstrip(",").strip()
        if text[eq + 1] != '"':
            raise ValueError(f"bad label value in {text!r}")
        j = eq + 2
        value: list[str] = []
        while text[j] != '"':
            if text[j] == "\\":
                value.append(_ESCAPES.get(text[j + 1], text[j + 1]))
                j += 2
            else:
                value.append(text[j])
                j += 1
        labels[name] = "".join(value)
        i = j + 1
        while i < len(text) and text[i] in ", ":
            i += 1
    return labels


def parse_samples(text: str) -> Iterator[Sample]:
    """Every sample line of a text-format page: ``(name, labels, value)``.

    >>> list(parse_samples('a_total{x="1",y="q\\\\"uote"} 3\\n# HELP a_total ...\\nb 1.5e3\\n'))
    [('a_total', {'x': '1', 'y': 'q"uote'}, 3.0), ('b', {}, 1500.0)]
    """
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, _, rest = line.partition("{")
            inside, _, tail = rest.rpartition("}")
            labels = _labels(inside)
        else:
            name, _, tail = line.partition(" ")
            labels = {}
        parts = tail.split()
        if not parts:
            raise ValueError(f"a sample without a value: {line[:80]!r}")
        yield name.strip(), labels, float(parts[0])


def histogram_quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    """The ``q`` quantile of a histogram's cumulative ``(le, count)`` buckets, interpolated
    linearly inside a bucket as Prometheus' ``histogram_quantile`` does; ``None`` if empty.

    >>> histogram_quantile([(0.1, 50.0), (1.0, 100.0), (math.inf, 100.0)], 0.5)
    0.1
    >>> round(histogram_quantile([(0.1, 50.0), (1.0, 100.0), (math.inf, 100.0)], 0.75), 3)
    0.55
    """
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return lower  # past the last finite bucket: its bound is all we know
            if count == below:
                return le
            return lower + (le - lower) * (rank - below) / (count - below)
        lower, below = le, count
    return lower


@dataclass(frozen=True)
class NodeSnapshot:
    """One scrape of a node, summed over the labels a person watching does not split by.

    Attributes:
        at: when it was taken (``time.monotonic()``).
        execs: execs by outcome (``ok``, ``nonzero_exit``, ``timeout``, ...).
        grades: grades by outcome (``verdict``, ``miss``, ``timeout``, ...).
        exec_buckets: the exec latency histogram's cumulative ``(le, count)``.
        in_flight, queued, slots: execs running, waiting, and running slots.
        sessions: live sessions (every template).
        infra_errors, refusals, cancellations: totals since the node started.
        cpu_seconds, rss_bytes: the node process's CPU time and resident memory.
        draining: the node is draining.
    """

    at: float
    execs: dict[str, float] = field(default_factory=dict)
    grades: dict[str, float] = field(default_factory=dict)
    exec_buckets: list[tuple[float, float]] = field(default_factory=list)
    in_flight: float = 0.0
    queued: float = 0.0
    slots: float = 0.0
    sessions: float = 0.0
    infra_errors: float = 0.0
    refusals: float = 0.0
    cancellations: float = 0.0
    cpu_seconds: float = 0.0
    rss_bytes: float = 0.0
    draining: bool = False

    @classmethod
    def from_text(cls, text: str, at: float | None = None) -> NodeSnapshot:
        """Read a ``/metrics`` page."""
        execs: dict[str, float] = {}
        grades: dict[str, float] = {}
        buckets: dict[float, float] = {}
        scalars: dict[str, float] = {}
        summed = {
            "collimate_infra_errors_total": "infra_errors",
            "collimate_admission_refusals_total": "refusals",
            "collimate_cancellations_total": "cancellations",
            "collimate_sessions": "sessions",
        }
        single = {
            "collimate_execs_in_flight": "in_flight",
            "collimate_exec_queue_length": "queued",
            "collimate_exec_slots": "slots",
            "process_cpu_seconds_total": "cpu_seconds",
            "process_resident_memory_bytes": "rss_bytes",
            "collimate_node_draining": "draining",
        }
        for name, labels, value in parse_samples(text):
            if name == "collimate_execs_total":
                execs[labels["outcome"]] = execs.get(labels["outcome"], 0.0) + value
            elif name == "collimate_grades_total":
                grades[labels["outcome"]] = value
            elif name == "collimate_exec_duration_seconds_bucket":
                le = float(labels["le"])
                buckets[le] = buckets.get(le, 0.0) + value
            elif name in summed:
                key = summed[name]
                scalars[key] = scalars.get(key, 0.0) + value
            elif name in single:
                scalars[single[name]] = value
        return cls(
            at=time.monotonic() if at is None else at,
            execs=execs,
            grades=grades,
            exec_buckets=sorted(buckets.items()),
            in_flight=scalars.get("in_flight", 0.0),
            queued=scalars.get("queued", 0.0),
            slots=scalars.get("slots", 0.0),
            sessions=scalars.get("sessions", 0.0),
            infra_errors=scalars.get("infra_errors", 0.0),
            refusals=scalars.get("refusals", 0.0),
            cancellations=scalars.get("cancellations", 0.0),
            cpu_seconds=scalars.get("cpu_seconds", 0.0),
            rss_bytes=scalars.get("rss_bytes", 0.0),
            draining=scalars.get("draining", 0.0) > 0,
        )

    @property
    def exec_total(self) -> float:
        return sum(self.execs.values())

    @property
    def grade_total(self) -> float:
        return sum(self.grades.values())

    def to_json(self) -> dict[str, Any]:
        """Plain data (``collimate top --json``, ``RayFleet.stats()``)."""
        return {
            "execs": dict(self.execs),
            "grades": dict(self.grades),
            "in_flight": self.in_flight,
            "queued": self.queued,
            "slots": self.slots,
            "sessions": self.sessions,
            "infra_errors": self.infra_errors,
            "refusals": self.refusals,
            "cancellations": self.cancellations,
            "cpu_seconds": self.cpu_seconds,
            "rss_bytes": self.rss_bytes,
            "draining": self.draining,
            "exec_latency_p50_s": histogram_quantile(self.exec_buckets, 0.5),
            "exec_latency_p99_s": histogram_quantile(self.exec_buckets, 0.99),
        }


@dataclass(frozen=True)
class NodeRates:
    """What changed between two snapshots of one node, per second.

    >>> a = NodeSnapshot(at=0.0, execs={"ok": 10.0}, cpu_seconds=1.0)
    >>> b = NodeSnapshot(at=2.0, execs={"ok": 30.0, "timeout": 2.0}, cpu_seconds=2.0)
    >>> r = NodeRates.between(a, b)
    >>> r.execs_per_s, r.failed_per_s, r.cpu_cores
    (11.0, 1.0, 0.5)
    """

    seconds: float
    execs_per_s: float
    grades_per_s: float
    failed_per_s: float
    errors_per_s: float
    refusals_per_s: float
    cpu_cores: float
    p50_s: float | None
    p95_s: float | None
    p99_s: float | None

    @classmethod
    def between(cls, before: NodeSnapshot, after: NodeSnapshot) -> NodeRates:
        dt = max(after.at - before.at, 1e-9)

        def per_s(a: float, b: float) -> float:
            return max(0.0, b - a) / dt  # a restarted node's counters start again

        failed = sum(after.execs.get(k, 0.0) for k in ("timeout", "error", "nonzero_exit"))
        failed_before = sum(before.execs.get(k, 0.0) for k in ("timeout", "error", "nonzero_exit"))
        old = dict(before.exec_buckets)
        window = [(le, max(0.0, n - old.get(le, 0.0))) for le, n in after.exec_buckets]
        return cls(
            seconds=dt,
            execs_per_s=per_s(before.exec_total, after.exec_total),
            grades_per_s=per_s(before.grade_total, after.grade_total),
            failed_per_s=per_s(failed_before, failed),
            errors_per_s=per_s(before.infra_errors, after.infra_errors),
            refusals_per_s=per_s(before.refusals, after.refusals),
            cpu_cores=per_s(before.cpu_seconds, after.cpu_seconds),
            p50_s=histogram_quantile(window, 0.5),
            p95_s=histogram_quantile(window, 0.95),
            p99_s=histogram_quantile(window, 0.99),
        )


def fetch_metrics(
    url: str,
    *,
    token: str | None = None,
    unix_socket: str | None = None,
    timeout: float = 5.0,
    client: httpx.Client | None = None,
    headers: Mapping[str, str] | None = None,
) -> NodeSnapshot:
    """Scrape ``<url>/metrics`` (over ``unix_socket`` when given) into a snapshot.

    Raises:
        httpx.HTTPError: no answer, or an error status (a 401 without the token).
    """
    sent = dict(headers or {})
    if token:
        sent["Authorization"] = f"Bearer {token}"
    base = "http://localhost" if unix_socket else url.rstrip("/")
    if client is not None:
        resp = client.get(f"{base}/metrics", headers=sent, timeout=timeout)
    else:
        transport = httpx.HTTPTransport(uds=unix_socket) if unix_socket else None
        with httpx.Client(transport=transport, trust_env=False) as own:
            resp = own.get(f"{base}/metrics", headers=sent, timeout=timeout)
    resp.raise_for_status()
    return NodeSnapshot.from_text(resp.text)
