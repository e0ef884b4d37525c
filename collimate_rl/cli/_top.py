"""``collimate top``: a live view of one node or a fleet, from the nodes' ``GET /metrics``.

Per node and in total: execs and grades per second, exec latency quantiles over
the last interval, execs running (of the slots), queued, live sessions, failed
execs, infrastructure errors and refusals per second, the node's CPU and memory.
Nodes come from ``--url`` (repeat it) or from a fleet's Prometheus file-SD file
(``--sd-file``, written by ``RayFleet(metrics_sd_file=...)``; its ``.token`` file
is used). It redraws in place at a terminal (also over SSH: plain ANSI, no
alternate screen) and prints one table per interval otherwise; Ctrl-C ends it
with status 0. ``--once`` takes two samples one interval apart, prints, exits.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from collimate_rl.cli._output import OK, Output
from collimate_rl.cli._target import _token, split_url
from collimate_rl.errors import CollimateUsageError
from collimate_rl.wire.node_metrics import NodeRates, NodeSnapshot, fetch_metrics

__all__ = ["Target", "register", "targets_from_sd", "top"]


@dataclass(frozen=True)
class Target:
    """One node to watch."""

    name: str
    url: str
    unix_socket: str | None = None
    token: str | None = None


def targets_from_sd(path: Path) -> list[Target]:
    """The nodes a Prometheus file-SD file lists (with the token in ``<path>.token``).

    Raises:
        CollimateUsageError: the file is missing or is not a file-SD list.
    """
    try:
        groups = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CollimateUsageError(f"--sd-file {path}: {exc}") from None
    token_path = path.with_name(path.name + ".token")
    token = _token(str(token_path)) if token_path.exists() else None
    if not isinstance(groups, list):
        raise CollimateUsageError(f"--sd-file {path}: not a list of target groups")
    targets = []
    for group in groups:
        labels = group.get("labels", {}) if isinstance(group, dict) else {}
        for address in group.get("targets", []) if isinstance(group, dict) else []:
            name = str(labels.get("collimate_node") or address)
            targets.append(Target(name, f"http://{address}", token=token))
    return targets


def _targets(args: argparse.Namespace) -> Callable[[], list[Target]]:
    token = _token(args.token_file)
    fixed: list[Target] = []
    for url in args.url or []:
        socket_path, base = split_url(url)
        name = url.removeprefix("http://").removeprefix("https://")
        fixed.append(Target(name, base or "http://localhost", socket_path, token))
    if not fixed and args.sd_file is None:
        env_socket = os.environ.get("COLLIMATE_SERVE_SOCKET")
        env_url = os.environ.get("COLLIMATE_SERVE_URL")
        if env_socket:
            fixed.append(Target(f"unix:{env_socket}", "http://localhost", env_socket, token))
        elif env_url:
            fixed.append(Target(env_url, env_url, None, token))
        else:
            raise CollimateUsageError(
                "collimate top needs a node: --url URL (repeatable), --sd-file FILE (a "
                "RayFleet's), or $COLLIMATE_SERVE_URL / $COLLIMATE_SERVE_SOCKET"
            )
    sd_file = Path(args.sd_file) if args.sd_file is not None else None

    def current() -> list[Target]:
        return fixed + (targets_from_sd(sd_file) if sd_file is not None else [])

    return current


def _scrape(targets: list[Target]) -> dict[str, NodeSnapshot | str]:
    def one(target: Target) -> NodeSnapshot | str:
        try:
            return fetch_metrics(target.url, token=target.token, unix_socket=target.unix_socket)
        except Exception as exc:  # one node's failure is its row
            return f"{type(exc).__name__}: {exc}"[:120]

    if not targets:
        return {}
    with ThreadPoolExecutor(min(16, len(targets))) as pool:
        return dict(zip((t.name for t in targets), pool.map(one, targets), strict=True))


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.0f}"


def _row(name: str, snap: NodeSnapshot, rates: NodeRates | None) -> list[str]:
    def rate(key: str) -> str:
        return "-" if rates is None else f"{getattr(rates, key):.1f}"

    return [
        name,
        "draining" if snap.draining else "ok",
        rate("execs_per_s"),
        rate("grades_per_s"),
        _ms(rates.p50_s if rates else None),
        _ms(rates.p95_s if rates else None),
        _ms(rates.p99_s if rates else None),
        f"{snap.in_flight:.0f}/{snap.slots:.0f}",
        f"{snap.queued:.0f}",
        f"{snap.sessions:.0f}",
        rate("failed_per_s"),
        rate("errors_per_s"),
        rate("refusals_per_s"),
        "-" if rates is None else f"{rates.cpu_cores:.2f}",
        f"{snap.rss_bytes / 2**20:.0f}",
    ]


_COLUMNS = (
    "node",
    "state",
    "exec/s",
    "grade/s",
    "p50ms",
    "p95ms",
    "p99ms",
    "run",
    "queue",
    "sess",
    "fail/s",
    "infra/s",
    "refused/s",
    "cpu",
    "MiB",
)


def render(before: dict[str, NodeSnapshot | str], after: dict[str, NodeSnapshot | str]) -> Table:
    """The table for two scrapes of the same targets (a node missing from ``before``
    shows no rates yet)."""
    table = Table(title=f"collimate top  {time.strftime('%H:%M:%S')}", title_justify="left")
    for column in _COLUMNS:
        if column == "node":
            table.add_column(column, overflow="fold")  # a long socket path wraps
        else:
            table.add_column(column, justify="left" if column == "state" else "right")
    totals = [0.0] * 6
    for name, snap in after.items():
        if isinstance(snap, str):
            table.add_row(name, f"[red]{snap}[/red]", *[""] * (len(_COLUMNS) - 2))
            continue
        old = before.get(name)
        rates = NodeRates.between(old, snap) if isinstance(old, NodeSnapshot) else None
        table.add_row(*_row(name, snap, rates))
        if rates is not None:
            for i, value in enumerate(
                (rates.execs_per_s, rates.grades_per_s, rates.failed_per_s, rates.errors_per_s)
            ):
                totals[i] += value
        totals[4] += snap.in_flight
        totals[5] += snap.sessions
    if len(after) > 1:
        table.add_section()
        table.add_row(
            "total",
            f"{sum(isinstance(s, NodeSnapshot) for s in after.values())}/{len(after)} up",
            f"{totals[0]:.1f}",
            f"{totals[1]:.1f}",
            "",
            "",
            "",
            f"{totals[4]:.0f}",
            "",
            f"{totals[5]:.0f}",
            f"{totals[2]:.1f}",
            f"{totals[3]:.1f}",
        )
    return table


def top(args: argparse.Namespace, out: Output) -> int:
    """Watch the nodes until Ctrl-C (or, with ``--once``, for one interval)."""
    if args.interval <= 0:
        raise CollimateUsageError("--interval must be > 0 seconds")
    current = _targets(args)
    console = Console()
    if not console.is_terminal:  # a pipe or a log: no terminal width to fit
        console = Console(width=160)
    before = _scrape(current())
    try:
        if args.once or out.json_mode:
            time.sleep(args.interval)
            after = _scrape(current())
            if out.json_mode:
                out.emit_json(
                    {
                        name: snap if isinstance(snap, str) else snap.to_json()
                        for name, snap in after.items()
                    }
                )
            else:
                console.print(render(before, after))
            return OK
        if not console.is_terminal:  # a pipe or a log: one table per interval
            while True:
                time.sleep(args.interval)
                after = _scrape(current())
                console.print(render(before, after))
                before = after
        with Live(render(before, before), console=console, auto_refresh=False) as live:
            while True:
                time.sleep(args.interval)
                after = _scrape(current())
                live.update(render(before, after), refresh=True)
                before = after
    except KeyboardInterrupt:
        return OK


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``top`` to the ``collimate`` sub-parsers (its own target flags: many nodes)."""
    p = sub.add_parser(
        "top",
        help="a live view of one node or a fleet (throughput, latency, queue, errors)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    p.add_argument("--json", action="store_true", help="print one sample as JSON and exit")
    p.add_argument(
        "--url",
        action="append",
        metavar="URL",
        help="a node: http://host:port or unix:/path (repeat for several)",
    )
    p.add_argument(
        "--sd-file",
        metavar="FILE",
        help="a fleet's Prometheus file-SD file (RayFleet(metrics_sd_file=...)); its token "
        "is read from FILE.token",
    )
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="the --url nodes' bearer token (or their read-only metrics token)",
    )
    p.add_argument(
        "--interval", type=float, default=2.0, help="seconds between samples (default 2)"
    )
    p.add_argument("--once", action="store_true", help="sample for one interval, print, exit")
    p.set_defaults(run=top)
