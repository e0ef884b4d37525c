"""The node's Prometheus metrics: one registry per node, served at ``GET /metrics``.

Every name has the ``collimate_`` prefix and Prometheus' suffixes (``_total`` for
counters, ``_seconds`` and ``_bytes`` for units). Counters and histograms are
updated where the work happens (:mod:`collimate_rl.node.core`, the egress opener,
the request-id middleware); gauges that mirror the node's state (execs running,
the queue, live sessions per template) are read from the node when scraped, so
the hot path pays nothing for them. No label ever holds a session id, a host
name or anything else a client picks: every label has a small fixed set of
values (a template id is the operator's).

A registry per node, not prometheus-client's global one: several nodes in one
process (tests, a notebook) count apart.

What the node counts as a *grade* (see docs/operations.md): an exec whose
request is the SDK's warm-harness stub (what every grade our SDK sends to our
node is, unless that node answered a stub with a miss). Its outcome is the harness's: ``verdict`` (it ran the
tests and printed its frame; whether they passed is in the frame, which the
trainer reads; the node computes no reward), ``miss`` (no warm harness here: the
SDK resends the full program, which the node counts as a plain exec),
``timeout``, ``crashed`` (any other exit), ``error`` (an infrastructure error),
``cancelled`` (its client left). Grades are execs too: ``collimate_execs_total``
counts them as well.

>>> metrics = NodeMetrics()
>>> metrics.image_pull("ok", 1024)
>>> metrics.set_store_bytes(4096)
>>> text = metrics.render().decode()
>>> "collimate_image_pulls_total{outcome=\\"ok\\"} 1.0" in text
True
>>> "collimate_image_store_bytes 4096.0" in text
True
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "CONTENT_TYPE",
    "EXEC_OUTCOMES",
    "GRADE_OUTCOMES",
    "INFRA_CODES",
    "ExecTally",
    "NodeMetrics",
    "exec_outcome",
]

#: The text format's content type (version 0.0.4, what every Prometheus scrapes).
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

#: Latency buckets, seconds: a warm create is ~1 ms, a grade tens of ms, a slow exec minutes.
LATENCY_BUCKETS: Final = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    float("inf"),
)

#: How an exec ended: exit 0, another exit, its timeout, its client left, refused
#: before it ran (``at_capacity``, ``draining``), or any other error.
EXEC_OUTCOMES: Final = ("ok", "nonzero_exit", "timeout", "cancelled", "refused", "error")
#: How a grade ended (see the module docstring).
GRADE_OUTCOMES: Final = ("verdict", "miss", "timeout", "crashed", "cancelled", "refused", "error")
#: Error codes that are the node's fault (or its sandbox's), never the request's.
INFRA_CODES: Final = frozenset(
    {"internal_error", "session_gone", "session_bringup_failed", "service_not_ready"}
)
#: Codes that refuse work before any of it is done.
REFUSAL_CODES: Final = frozenset({"at_capacity", "draining"})
#: The harness's exit code for "no warm harness here" (``grading/_shipping.py``).
HARNESS_MISS_EXIT: Final = 3


class NodeView(Protocol):
    """What the scrape-time gauges read from the node (:class:`~collimate_rl.node.core.Node`)."""

    def metric_state(self) -> dict[str, Any]: ...


def exec_outcome(exit_code: int, timed_out: bool) -> str:
    """The ``outcome`` label of an exec that ran.

    >>> exec_outcome(0, False), exec_outcome(1, False), exec_outcome(-1, True)
    ('ok', 'nonzero_exit', 'timeout')
    """
    if timed_out:
        return "timeout"
    return "ok" if exit_code == 0 else "nonzero_exit"


def _grade_outcome(exit_code: int, timed_out: bool) -> str:
    if timed_out:
        return "timeout"
    if exit_code == 0:
        return "verdict"
    return "miss" if exit_code == HARNESS_MISS_EXIT else "crashed"


class _StateCollector(Collector):
    """Gauges read from the node at scrape time (nothing on the hot path)."""

    def __init__(self, view: Callable[[], dict[str, Any] | None]) -> None:
        self._view = view

    def collect(self) -> Iterable[Metric]:
        state = self._view()
        if state is None:
            return
        simple = (
            ("collimate_execs_in_flight", "Execs holding a running slot.", "running"),
            ("collimate_exec_queue_length", "Admitted execs waiting for a slot.", "queued"),
            ("collimate_exec_slots", "Running slots (serve --max-inflight).", "max_inflight"),
            ("collimate_exec_queue_capacity", "Queue places (serve --queue).", "max_queue"),
            (
                "collimate_session_capacity",
                "Live sessions allowed (--max-sessions).",
                "max_sessions",
            ),
            ("collimate_node_draining", "1 while the node drains or is closed.", "draining"),
        )
        for name, doc, key in simple:
            yield GaugeMetricFamily(name, doc, value=float(state[key]))
        for name, doc, key in (
            ("collimate_sessions", "Live sessions, per template.", "sessions"),
            ("collimate_warm_pool_sessions", "Warm sessions ready, per template.", "pooled"),
        ):
            family = GaugeMetricFamily(name, doc, labels=["template"])
            for template, count in sorted(state[key].items()):
                family.add_metric([template], float(count))
            yield family
        info = GaugeMetricFamily(
            "collimate_node_info",
            "The node's version and isolation (always 1).",
            labels=["version", "isolation"],
        )
        info.add_metric([state["version"], state["isolation"]], 1.0)
        yield info


class NodeMetrics:
    """One node's metrics and the calls that update them.

    Args:
        view: called at scrape time for the state gauges (``Node.metric_state``);
            ``None``: no state gauges (a bare registry, as in the example).
        process: export this process's CPU, memory and descriptors (``process_*``).

    The node's image store (``image_templates.NodeImages``) calls :meth:`image_pull`
    once per pull it finished (or gave up on) and :meth:`set_store_bytes` after it.
    """

    def __init__(self, view: NodeView | None = None, *, process: bool = True) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        reg = self.registry
        self.execs = Counter(
            "collimate_execs", "Execs by route kind and outcome.", ["kind", "outcome"], registry=reg
        )
        self.grades = Counter(
            "collimate_grades",
            "Grades (execs of the SDK's warm-harness stub) by outcome.",
            ["outcome"],
            registry=reg,
        )
        self.exec_seconds = Histogram(
            "collimate_exec_duration_seconds",
            "Execs that ran, from request to answer (queueing included), by route kind.",
            ["kind"],
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.grade_seconds = Histogram(
            "collimate_grade_duration_seconds",
            "Grades that ran, from request to answer (queueing included).",
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.create_seconds = Histogram(
            "collimate_create_duration_seconds",
            "Session creates, by whether the warm pool had one ready.",
            ["pool"],
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.fork_seconds = Histogram(
            "collimate_fork_duration_seconds",
            "Fork calls (all of a call's children together).",
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.forked = Counter("collimate_forked_sessions", "Sessions made by fork.", registry=reg)
        self.refusals = Counter(
            "collimate_admission_refusals",
            "Work refused before any of it ran, by reason (at_capacity, draining).",
            ["reason"],
            registry=reg,
        )
        self.cancellations = Counter(
            "collimate_cancellations",
            "Requests whose client left first; their work was cancelled.",
            ["route"],
            registry=reg,
        )
        self.infra_errors = Counter(
            "collimate_infra_errors",
            "Infrastructure errors (the node's or a sandbox's fault), by operation and code.",
            ["op", "code"],
            registry=reg,
        )
        self.requests = Counter(
            "collimate_http_requests",
            "HTTP requests answered, by route and status.",
            ["route", "status"],
            registry=reg,
        )
        self.egress = Counter(
            "collimate_egress_connections",
            "Egress proxy decisions: allowed, denied (by reason) or failed upstream.",
            ["decision", "reason"],
            registry=reg,
        )
        self.image_pulls = Counter(
            "collimate_image_pulls", "Image pulls by outcome.", ["outcome"], registry=reg
        )
        self.image_pull_bytes = Counter(
            "collimate_image_pull_bytes", "Bytes fetched by image pulls.", registry=reg
        )
        self.store_bytes = Gauge(
            "collimate_image_store_bytes", "Bytes the image store holds.", registry=reg
        )
        # Label children resolved once: ``.labels()`` takes a lock and a dict lookup.
        self._execs = {
            (kind, outcome): self.execs.labels(kind, outcome)
            for kind in ("session", "oneshot")
            for outcome in EXEC_OUTCOMES
        }
        self._grades = {outcome: self.grades.labels(outcome) for outcome in GRADE_OUTCOMES}
        self._exec_seconds = {k: self.exec_seconds.labels(k) for k in ("session", "oneshot")}
        self._create_seconds = {k: self.create_seconds.labels(k) for k in ("hit", "miss")}
        self._refusals = {code: self.refusals.labels(code) for code in REFUSAL_CODES}
        if view is not None:
            reg.register(_StateCollector(view.metric_state))
        if process:
            ProcessCollector(registry=reg)

    # -- the hot path ------------------------------------------------------

    def exec_ran(
        self, kind: str, exit_code: int, timed_out: bool, seconds: float, grade: bool
    ) -> None:
        """An exec (``kind`` ``session`` or ``oneshot``) that ran to an exit."""
        self._execs[kind, exec_outcome(exit_code, timed_out)].inc()
        self._exec_seconds[kind].observe(seconds)
        if grade:
            self._grades[_grade_outcome(exit_code, timed_out)].inc()
            self.grade_seconds.observe(seconds)

    def exec_failed(self, kind: str, code: str, grade: bool) -> None:
        """An exec that got the error ``code`` instead of running."""
        outcome = "refused" if code in REFUSAL_CODES else "error"
        self._execs[kind, outcome].inc()
        if grade:
            self._grades[outcome].inc()
        self.error(f"exec_{kind}", code)

    def exec_cancelled(self, kind: str, grade: bool) -> None:
        """An exec cancelled because its client left (or the node stopped)."""
        self._execs[kind, "cancelled"].inc()
        if grade:
            self._grades["cancelled"].inc()

    def error(self, op: str, code: str) -> None:
        """Count a refusal or an infrastructure error of any operation (others are the
        request's fault: ``collimate_http_requests_total`` has them by status)."""
        refusal = self._refusals.get(code)
        if refusal is not None:
            refusal.inc()
        elif code in INFRA_CODES:
            self.infra_errors.labels(op, code).inc()

    def created(self, seconds: float, pool_hit: bool) -> None:
        self._create_seconds["hit" if pool_hit else "miss"].observe(seconds)

    def forked_sessions(self, count: int, seconds: float) -> None:
        self.forked.inc(count)
        self.fork_seconds.observe(seconds)

    def request(self, route: str, status: int) -> None:
        self.requests.labels(route, str(status)).inc()

    def egress_decision(self, decision: str, reason: str) -> None:
        """An egress proxy decision (``allowed``/``denied``/``failed``) and its reason kind."""
        self.egress.labels(decision, reason).inc()

    # -- the image hooks ---------------------------------------------------

    def image_pull(self, outcome: str, pulled_bytes: int = 0) -> None:
        """One image pull ended: ``outcome`` (``ok``, ``cached``, ``error``) and the bytes
        it fetched."""
        self.image_pulls.labels(outcome).inc()
        if pulled_bytes:
            self.image_pull_bytes.inc(pulled_bytes)

    def set_store_bytes(self, total: int) -> None:
        """The image store now holds ``total`` bytes."""
        self.store_bytes.set(total)

    # -- serving -----------------------------------------------------------

    def render(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)


class ExecTally:
    """Times one exec and files its outcome once, whichever way it ends.

    >>> metrics = NodeMetrics(process=False)
    >>> with ExecTally(metrics, "oneshot", grade=False) as tally:
    ...     tally.ran(0, False)
    >>> b'collimate_execs_total{kind="oneshot",outcome="ok"} 1.0' in metrics.render()
    True
    """

    __slots__ = ("_done", "_start", "grade", "kind", "metrics")

    def __init__(self, metrics: NodeMetrics, kind: str, *, grade: bool) -> None:
        self.metrics = metrics
        self.kind = kind
        self.grade = grade
        self._start = time.perf_counter()
        self._done = False

    def ran(self, exit_code: int, timed_out: bool) -> None:
        self._done = True
        self.metrics.exec_ran(
            self.kind, exit_code, timed_out, time.perf_counter() - self._start, self.grade
        )

    def __enter__(self) -> ExecTally:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if self._done or exc is None:
            return
        code = getattr(exc, "code", None)
        if isinstance(code, str):
            self.metrics.exec_failed(self.kind, code, self.grade)
        elif isinstance(exc, BaseException) and not isinstance(exc, Exception):
            self.metrics.exec_cancelled(self.kind, self.grade)  # CancelledError
        else:
            self.metrics.exec_failed(self.kind, "internal_error", self.grade)


def session_counts(templates: Iterable[str]) -> dict[str, int]:
    """Sessions per template from the templates of live sessions.

    >>> session_counts(["python3", "python3", "bash"])
    {'python3': 2, 'bash': 1}
    """
    return dict(Tally(templates))
