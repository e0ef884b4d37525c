"""Fixtures for the language tests; ``polyglot/`` holds solution sources, not tests."""

from __future__ import annotations

collect_ignore = ["polyglot"]
