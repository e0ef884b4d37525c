"""Named denylists kept as data: ``presets/<name>.txt``, one entry per line.

``{"preset": "rl-leakage"}`` denies the answer sources listed in
``presets/rl-leakage.txt`` (code hosts, Q&A sites, judge sites, model hubs and
model APIs); docs/egress.md explains what such a list can and cannot promise.

>>> "rl-leakage" in PRESETS
True
>>> any(e.text == "*.github.com" for e in preset_entries("rl-leakage"))
True
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Final

from collimate_rl.node.egress.entries import Entry, parse_entry

__all__ = ["PRESETS", "preset_entries", "preset_text"]

#: The presets a policy may name.
PRESETS: Final = ("rl-leakage",)


def preset_text(name: str) -> str:
    """The raw text of preset ``name`` (comments included)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    return (resources.files("collimate_rl.node.egress") / "presets" / f"{name}.txt").read_text(
        "utf-8"
    )


@functools.cache
def preset_entries(name: str) -> tuple[Entry, ...]:
    """The parsed entries of preset ``name``, in file order, without duplicates."""
    entries: dict[str, Entry] = {}
    for number, line in enumerate(preset_text(name).splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            entry = parse_entry(text)
        except ValueError as exc:  # a broken data file is the node's bug, not the caller's
            raise RuntimeError(f"preset {name!r}, line {number}: {exc}") from exc
        entries.setdefault(entry.text, entry)
    return tuple(entries.values())
