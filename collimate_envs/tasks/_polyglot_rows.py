"""Rows of multi-language datasets: CodeContests-style problems and MultiPL-E prompts.

=================  =========================================================================
format             row keys -> task
=================  =========================================================================
``codecontests``   ``name, description, public_tests, private_tests, solutions,
                   incorrect_solutions`` (DeepMind's CodeContests, or any row shaped like it)
                   -> IOTests, reference and wrong solutions by language
``multipl_e``      ``name, language, prompt, tests, stop_tokens`` -> ProgramTests in that
                   language (prompt + solution + tests; exit code 0 passes)
=================  =========================================================================

Also here: the ``language``, ``solutions`` and ``wrong_solutions`` keys of the collimate row
format (the bundled ``collimate-polyglot`` set uses them).

>>> row = {"name": "add", "description": "Print a + b.",
...        "public_tests": {"input": ["1 2\\n"], "output": ["3\\n"]},
...        "solutions": {"language": [2, 3], "solution": ["int main(){}", "print(3)"]}}
>>> task = from_codecontests_row(row)
>>> task.task_id, task.tests.cases, sorted(task.solutions), task.reference_solution
('add', (('1 2\\n', '3\\n'),), ['cpp', 'python'], 'print(3)')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from collimate_envs.tasks._errors import TaskFormatError
from collimate_envs.tasks._model import Difficulty, IOTests, ProgramTests, Task

__all__ = [
    "CODECONTESTS_LANGUAGES",
    "from_codecontests_row",
    "from_multipl_e_row",
    "language_fields",
    "program_tests",
]

#: CodeContests' language enum (1 is Python 2, which no template runs).
CODECONTESTS_LANGUAGES: Final[dict[int, str]] = {2: "cpp", 3: "python", 4: "java"}
# CodeContests' difficulty enum: 1-3 easy/medium/hard; 7.. are Codeforces letters A, B, ...
_CC_DIFFICULTY: Final[dict[int, Difficulty]] = {
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


def _language_name(value: Any, where: str) -> str:
    from collimate_rl.errors import CollimateUsageError
    from collimate_rl.grading.languages import language

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


def _by_language(raw: Any, where: str) -> dict[str, str]:
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
        out.setdefault(_language_name(lang, where), code)
    return out


def language_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``language``, ``solutions``, ``wrong_solutions`` of a collimate-format row."""
    out: dict[str, Any] = {}
    if row.get("language") is not None:
        out["language"] = _language_name(row["language"], "language")
    for key in ("solutions", "wrong_solutions"):
        value = _by_language(row.get(key), key)
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


def _io_cases(row: Mapping[str, Any], key: str) -> list[tuple[str, str]]:
    raw = row.get(key)
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise TaskFormatError(f"key {key!r} must be an object with 'input' and 'output' lists")
    inputs, outputs = raw.get("input", []), raw.get("output", [])
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise TaskFormatError(f"key {key!r}: 'input' and 'output' must be lists of one length")
    if not all(isinstance(x, str) for x in inputs + outputs):
        raise TaskFormatError(f"key {key!r}: inputs and outputs must be text")
    return list(zip(inputs, outputs, strict=True))


def from_codecontests_row(
    row: Mapping[str, Any], *, source: str = "codecontests", index: int = 0
) -> Task:
    """Read a CodeContests-style row: stdin/stdout tests and solutions by language.

    The tests are ``public_tests`` then ``private_tests`` (``generated_tests`` are left out:
    there can be hundreds; add them to ``private_tests`` to use them). ``solutions`` and
    ``incorrect_solutions`` give the reference and wrong solutions by language, either as
    CodeContests' ``{"language": [2, 3, 4], "solution": [...]}`` (2 C++, 3 Python 3,
    4 Java; Python 2 is skipped) or as ``{"cpp": "...", "rust": "..."}``. The Python one,
    if any, is also ``reference_solution``. ``memory_limit_bytes`` is kept as the tests'
    memory limit; ``time_limit`` is not applied (it was set for the original judges).
    """
    del index
    name = row.get("name")
    if not isinstance(name, str) or not name:
        raise TaskFormatError("key 'name' must be a non-empty string")
    description = row.get("description")
    if not isinstance(description, str):
        raise TaskFormatError("key 'description' must be a string")
    cases = _io_cases(row, "public_tests") + _io_cases(row, "private_tests")
    if not cases:
        raise TaskFormatError("no tests (public_tests and private_tests are empty)")
    memory = row.get("memory_limit_bytes")
    memory = (
        memory if isinstance(memory, int) and not isinstance(memory, bool) and memory > 0 else None
    )
    solutions = _by_language(row.get("solutions"), "solutions")
    wrong = _by_language(row.get("incorrect_solutions"), "incorrect_solutions")
    difficulty = row.get("difficulty")
    tags = row.get("cf_tags") or []
    prompt = (
        description.rstrip()
        + "\n\nRead the input from standard input and write the answer to standard output.\n"
    )
    return Task(
        task_id=name,
        prompt=prompt,
        tests=IOTests(cases=tuple(cases), memory_limit_bytes=memory),
        difficulty=_CC_DIFFICULTY.get(difficulty) if isinstance(difficulty, int) else None,
        reference_solution=solutions.get("python"),
        wrong_solution=wrong.get("python"),
        source=source,
        tags=tuple(t for t in tags if isinstance(t, str)),
        solutions=solutions,
        wrong_solutions=wrong,
    )


def from_multipl_e_row(
    row: Mapping[str, Any], *, source: str = "multipl-e", index: int = 0
) -> Task:
    """Read a MultiPL-E row: the prompt is code to continue, the tests follow it.

    >>> t = from_multipl_e_row({"name": "HumanEval_53_add", "language": "rs",
    ...     "prompt": "fn add(x: isize, y: isize) -> isize {\\n", "tests": "}\\nfn main() {}\\n",
    ...     "stop_tokens": ["\\n}"]})
    >>> t.language, t.kind, t.tests.stop_tokens
    ('rust', 'program', ('\\n}',))
    """
    del index
    name, prompt = row.get("name"), row.get("prompt")
    if not isinstance(name, str) or not name:
        raise TaskFormatError("key 'name' must be a non-empty string")
    if not isinstance(prompt, str):
        raise TaskFormatError("key 'prompt' must be a string")
    language = _language_name(row.get("language"), "language")
    return Task(
        task_id=name,
        prompt=prompt,
        tests=program_tests(row),
        source=source,
        starter_code=prompt,
        language=language,
    )
