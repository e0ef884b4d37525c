"""What multi-language rows share: language names, solutions by language, MultiPL-E tests.

Also the ``language``, ``solutions`` and ``wrong_solutions`` keys of the collimate row format
(the bundled ``collimate-polyglot`` set uses them).

>>> language_fields({"language": "c++", "solutions": {"rs": "fn main() {}"}})
{'language': 'cpp', 'solutions': {'rust': 'fn main() {}'}}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from collimate_envs.tasks._errors import TaskFormatError
from collimate_envs.tasks._model import Difficulty
from collimate_envs.tasks._tests import ProgramTests
from collimate_rl.errors import CollimateUsageError
from collimate_rl.grading.languages import language

__all__ = [
    "CC_DIFFICULTY",
    "CODECONTESTS_LANGUAGES",
    "by_language",
    "language_fields",
    "language_name",
    "program_tests",
]

#: CodeContests' language enum (1 is Python 2, which no template runs).
CODECONTESTS_LANGUAGES: Final[dict[int, str]] = {2: "cpp", 3: "python", 4: "java"}
#: CodeContests' difficulty enum: 1-3 easy/medium/hard; 7.. are Codeforces letters A, B, ...
CC_DIFFICULTY: Final[dict[int, Difficulty]] = {
    1: "easy",
    2: "medium",
    3: "hard",
    4: "hard",
    5: "hard",
    7: "easy",
    8: "easy",
    9: "medium",
    10: "medium",
}


def language_name(value: Any, where: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        if value not in CODECONTESTS_LANGUAGES:
            raise TaskFormatError(f"{where}: no template runs CodeContests language {value}")
        return CODECONTESTS_LANGUAGES[value]
    if not isinstance(value, str):
        raise TaskFormatError(f"{where} must be a language name, got {type(value).__name__}")
    try:
        return language(value).name
    except CollimateUsageError as exc:
        raise TaskFormatError(f"{where}: {exc}") from None


def by_language(raw: Any, where: str) -> dict[str, str]:
    """``{language: code}`` from a mapping or CodeContests' ``{"language": [...], "solution": [...]}``.

    The first solution per language is kept; CodeContests' Python 2 ones are skipped.
    """
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise TaskFormatError(f"key {where!r} must be an object")
    if set(raw) == {"language", "solution"} and isinstance(raw["language"], list):
        languages, codes = raw["language"], raw["solution"]
        if not isinstance(codes, list) or len(codes) != len(languages):
            raise TaskFormatError(f"{where}: 'language' and 'solution' must be lists of one length")
        pairs = [
            (lang, code)
            for lang, code in zip(languages, codes, strict=True)
            if not (isinstance(lang, int) and lang not in CODECONTESTS_LANGUAGES)
        ]
    else:
        pairs = list(raw.items())
    out: dict[str, str] = {}
    for lang, code in pairs:
        if not isinstance(code, str):
            raise TaskFormatError(f"{where}: solutions must be source text")
        out.setdefault(language_name(lang, where), code)
    return out


def language_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``language``, ``solutions``, ``wrong_solutions`` of a collimate-format row."""
    out: dict[str, Any] = {}
    if row.get("language") is not None:
        out["language"] = language_name(row["language"], "language")
    for key in ("solutions", "wrong_solutions"):
        value = by_language(row.get(key), key)
        if value:
            out[key] = value
    return out


def program_tests(raw: Mapping[str, Any]) -> ProgramTests:
    """The ``{"kind": "program", "tests", "stop_tokens"}`` tests of a collimate row."""
    tests, stops = raw.get("tests"), raw.get("stop_tokens", [])
    if not isinstance(tests, str):
        raise TaskFormatError("program tests need 'tests' (test code)")
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise TaskFormatError("'stop_tokens' must be a list of strings")
    return ProgramTests(tests=tests, stop_tokens=tuple(s for s in stops if s))
