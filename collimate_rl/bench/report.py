"""Benchmark results: sections of rows, rendered as rich tables, markdown or JSON.

>>> section = Section("demo", "Demo", ["runner", "ms"], notes=["one note"])
>>> section.add(["floor", fmt(1.234)], {"runner": "floor", "ms": 1.234})
>>> print(section.markdown())
### Demo
<BLANKLINE>
| runner | ms |
|---|---|
| floor | 1.23 |
<BLANKLINE>
one note
>>> Report(machine={"cpus": 2}, command="collimate bench", sections=[section]).to_json()["sections"]["demo"]["data"]
[{'runner': 'floor', 'ms': 1.234}]
"""

from __future__ import annotations

import math
import os
import platform
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

__all__ = [
    "Report",
    "Section",
    "fmt",
    "load_average",
    "machine_info",
    "pct_text",
    "times_text",
]


def fmt(value: float, digits: int = 2) -> str:
    """A number for a table cell; ``-`` for NaN.

    >>> fmt(3.14159), fmt(1234.5, 0), fmt(float("nan"))
    ('3.14', '1234', '-')
    """
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def pct_text(value: float, digits: int = 0) -> str:
    """A ratio as a percentage: ``pct_text(0.5) == '50%'``.

    >>> pct_text(0.754), pct_text(0.498, 1)
    ('75%', '49.8%')
    """
    return "-" if math.isnan(value) else f"{value:.{digits}%}"


def times_text(value: float, digits: int = 1) -> str:
    """A ratio as a multiplier.

    >>> times_text(2.04), times_text(1.996, 2)
    ('2.0x', '2.00x')
    """
    return "-" if math.isnan(value) else f"{value:.{digits}f}x"


@dataclass
class Section:
    """One table: display rows (strings), the raw numbers behind them, and notes."""

    key: str
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    data: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, row: list[str], raw: dict[str, Any]) -> None:
        """Append a display row and its raw numbers."""
        if len(row) != len(self.columns):
            raise ValueError(
                f"{self.key}: a row of {len(row)} cells for {len(self.columns)} columns"
            )
        self.rows.append(row)
        self.data.append(raw)

    def markdown(self) -> str:
        """The section as a GitHub-markdown heading, table and notes."""
        lines = [f"### {self.title}", ""]
        lines.append("| " + " | ".join(self.columns) + " |")
        lines.append("|" + "---|" * len(self.columns))
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        if self.notes:
            lines += ["", *self.notes]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The section as plain JSON data (NaN becomes ``None``)."""
        return {
            "title": self.title,
            "columns": self.columns,
            "rows": self.rows,
            "data": [{k: _json_safe(v) for k, v in row.items()} for row in self.data],
            "notes": self.notes,
        }


def _json_safe(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def load_average() -> float | None:
    """The 1-minute load average, or ``None`` where the OS has none.

    >>> load_average() is None or load_average() >= 0
    True
    """
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def machine_info() -> dict[str, Any]:
    """Where the run happened: host, CPUs, memory, kernel, Python, time (UTC), load."""
    mem_kib = 0
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem_kib = int(line.split()[1])
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "executable": sys.executable,
        "load_1min_at_start": load_average(),
        "utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"),
    }


@dataclass
class Report:
    """A whole run: the machine, the command, the sections and the targets summary."""

    machine: dict[str, Any]
    command: str
    sections: list[Section] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "command": self.command,
            "sections": {s.key: s.to_json() for s in self.sections},
        }

    def markdown(self) -> str:
        """Every section as markdown, after a line naming the machine and the command."""
        m = self.machine
        head = (
            f"Machine: {m.get('cpus')} CPUs ({m.get('cpu')}), {m.get('memory_gib')} GiB, "
            f"kernel {m.get('kernel')}, Python {m.get('python')}, {m.get('utc')} UTC, "
            f"1-min load at start {m.get('load_1min_at_start')}, at end {m.get('load_1min_at_end')}.\n\n```\n{self.command}\n```"
        )
        return "\n\n".join([head, *(s.markdown() for s in self.sections)]) + "\n"

    def print_rich(self, file: Any = None) -> None:
        """Print the sections as rich tables."""
        from rich.console import Console
        from rich.table import Table

        console = Console(file=file)
        if not console.is_terminal:
            console.width = 150  # piped: do not wrap the runner names at 80 columns
        m = self.machine
        console.print(
            f"[bold]collimate bench[/bold]: {m.get('cpus')} CPUs, Python {m.get('python')}, "
            f"{m.get('utc')} UTC, 1-min load {m.get('load_1min_at_start')} -> "
            f"{m.get('load_1min_at_end')}"
        )
        for section in self.sections:
            table = Table(title=section.title, title_justify="left")
            for i, column in enumerate(section.columns):
                table.add_column(column, justify="left" if i == 0 else "right")
            for row in section.rows:
                table.add_row(*row)
            console.print(table)
            for note in section.notes:
                console.print(f"  [dim]{note}[/dim]")
