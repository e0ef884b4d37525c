"""Fixtures for the language tests; ``polyglot/`` holds solution sources, not tests.

The node tests use the suite's shared local node (``local_client``): its language templates
start on first use. A language whose toolchain this machine lacks is skipped, saying which
binary is missing (CI installs every one, Go included; see ``.ci/run``).
"""

from __future__ import annotations

from typing import Any

import pytest

collect_ignore = ["polyglot"]


@pytest.fixture(scope="session")
def offered(local_client: Any) -> Any:
    """The node's templates (a ``TemplateList``: ``unavailable`` says why others are missing)."""
    return local_client.templates()


@pytest.fixture
def need(offered: Any) -> Any:
    """``need(template)``: skip unless the node offers it."""

    def check(template: str) -> None:
        if template not in offered:
            pytest.skip(f"no {template!r} template here: {offered.unavailable.get(template)}")

    return check
