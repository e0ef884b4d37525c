"""The bench's language sections run and report every offered language (no timing asserted)."""

from __future__ import annotations

from typing import Any

import pytest

from collimate_rl.bench.languages import languages_section, warm_up_section
from collimate_rl.bench.suite import DEFAULT_SECTIONS, SECTIONS, parse_args

pytestmark = pytest.mark.bwrap


def test_languages_is_an_opt_in_section() -> None:
    assert "languages" in SECTIONS and "languages" not in DEFAULT_SECTIONS
    assert parse_args(["--only", "languages"]).only == ["languages"]


def test_language_rows_beside_python(local_client: Any, need: Any) -> None:
    need("c")
    section = languages_section(local_client, 2, 2, lambda _: None, templates=("python3", "c"))
    assert [row["template"] for row in section.data] == ["python3", "c"]
    assert all(row["p50_ms"] > 0 and row["grades_per_s"] > 0 for row in section.data)
    assert section.rows[0][-1] == "1.0x"


def test_warm_ups_with_and_without(local_client: Any, need: Any) -> None:
    need("cpp")
    need("java")
    need("go")
    section = warm_up_section(local_client, 1, lambda _: None)
    assert [row["language"] for row in section.data] == ["cpp", "java", "go"]
    assert all(row["p50_ms_with"] > 0 and row["p50_ms_without"] > 0 for row in section.data)
