"""Grading in every built-in language on a real node (bwrap sandboxes).

For each language: a fork group of 8 grades 8 chat answers (correct ones under every kind of
fence, wrong ones, one that does not compile), a compile error scores 0 with a
``compile_error`` outcome and is no infrastructure error, and a program that never ends
scores 0 within its timeout. Correct and wrong solutions of every polyglot problem are
graded in ``test_polyglot_set.py``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from collimate_rl import Sandbox
from collimate_rl.grading import IOReward, grade

from ._programs import (
    ALIAS_TAG,
    DOES_NOT_COMPILE,
    FENCE,
    LANGUAGES,
    NEVER_ENDS,
    chat,
    correct,
    fenced,
    spec,
    wrong,
)

pytestmark = pytest.mark.bwrap


def _answers(lang: str) -> list[tuple[str, float | None]]:
    """Eight chat answers and the reward each must get (``None``: below 1.0)."""
    good, bad = correct(lang), wrong(lang)
    return [
        (chat(good, FENCE[lang]), 1.0),
        (chat(good, ALIAS_TAG[lang]), 1.0),
        (chat(good, ""), 1.0),
        (chat("print(3)", "python") + "\n" + chat(good, FENCE[lang]), 1.0),
        (good, 1.0),  # bare code, no fence at all
        (chat(bad, FENCE[lang]), None),
        (fenced(bad, ALIAS_TAG[lang]), None),
        (chat(DOES_NOT_COMPILE[lang], FENCE[lang]), 0.0),
    ]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_fork_group_of_8_grades_8_answers(lang: str, local_client: Any, need: Any) -> None:
    need(lang)
    answers = _answers(lang)
    with Sandbox(lang, client=local_client) as parent:
        group = parent.fork_group(8)
        try:
            results = group.map(
                lambda i, child: grade(
                    local_client,
                    lang,
                    answers[i][0],
                    spec(),
                    session_id=child.session_id,
                    timeout_seconds=60,
                ),
                concurrency=2,
            )
        finally:
            group.close()
    for (answer, want), result in zip(answers, results, strict=True):
        assert result is not None and not result.infra_error
        if want is None:
            assert 0.0 <= result.reward < 1.0, (answer, result)
            assert not result.compile_error
        else:
            assert result.reward == want, (answer, result.tests, result.output_tail[-500:])
    assert results[-1] is not None and results[-1].compile_error


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_compile_error_scores_zero_and_is_no_infra_error(
    lang: str, local_client: Any, need: Any
) -> None:
    need(lang)
    result = grade(local_client, lang, fenced(DOES_NOT_COMPILE[lang], FENCE[lang]), spec())
    assert result.reward == 0.0 and not result.infra_error
    assert result.compile_error and result.passed == 0 and result.total == 5
    (outcome,) = result.tests
    assert outcome.status == "compile_error" and outcome.detail
    assert result.error is not None and result.error.startswith("compile error")
    assert result.output_tail.strip(), "the compiler's output tail"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_program_that_never_ends_scores_zero_within_its_timeout(
    lang: str, local_client: Any, need: Any
) -> None:
    need(lang)
    cases = [{"input": "1 2\n", "output": "3\n"}, {"input": "4 5\n", "output": "9\n"}]
    start = time.monotonic()
    result = grade(
        local_client,
        lang,
        fenced(NEVER_ENDS[lang], FENCE[lang]),
        IOReward(cases, per_test_timeout=1.0),
        timeout_seconds=60,
    )
    assert result.reward == 0.0 and not result.infra_error
    assert [t.status for t in result.tests] == ["timeout", "timeout"], result.tests
    assert result.exit_code == 0, "the harness gave its verdict; the exec did not time out"
    assert time.monotonic() - start < 60


def test_the_language_can_be_named_on_the_spec(local_client: Any, need: Any) -> None:
    """A template that names no language (here Python's) grades the spec's."""
    need("c")
    result = grade(local_client, "python3", fenced(correct("c"), "c"), spec(language="c"))
    assert result.reward == 1.0, result.tests


def test_runtime_errors_and_crashes_are_task_failures(local_client: Any, need: Any) -> None:
    need("c")
    cases = [{"input": "", "output": "x\n"}]
    programs = {
        '#include <stdio.h>\nint main(void) { puts("x"); return 3; }\n': ("error", "exit code 3"),
        "#include <stdlib.h>\nint main(void) { abort(); }\n": ("crash", "killed by SIGABRT"),
        # the memory limit: a 1 GiB allocation fails under 64 MiB
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\nint main(void) {\n"
        " char *p = malloc(1 << 30); if (!p) return 7;\n"
        ' memset(p, 1, 1 << 30); printf("%d\\n", p[4097]); return 0; }\n': ("error", "exit code 7"),
    }
    for source, (status, detail) in programs.items():
        result = grade(
            local_client, "c", fenced(source, "c"), IOReward(cases, memory_limit_bytes=64 << 20)
        )
        assert result.reward == 0.0 and not result.infra_error
        assert result.tests[0].status == status and detail in result.tests[0].detail, result.tests


def test_compile_and_run_limits_are_separate(local_client: Any, need: Any) -> None:
    """Output per case, compiler output and compile time each have their own limit."""
    need("c")
    need("cpp")
    case = [{"input": "", "output": "x\n"}]
    flood = (
        "#include <stdio.h>\nint main(void) { for (int i = 0; i < 1 << 21; i++) putchar('x'); }\n"
    )
    result = grade(
        local_client, "c", fenced(flood, "c"), IOReward(case, output_limit_bytes=1 << 20)
    )
    assert result.tests[0].status == "error" and "output limit" in result.tests[0].detail
    noisy = "int main(void) {\n" + "  undeclared_name;\n" * 2000 + "}\n"
    result = grade(local_client, "c", fenced(noisy, "c"), IOReward(case, compile_output_bytes=4096))
    assert result.compile_error and not result.infra_error
    slow = (  # constant evaluation that keeps the compiler busy for minutes
        "constexpr long spin() {\n  long s = 0;\n"
        "  for (long i = 0; i < 200000; i++) for (long j = 0; j < 200000; j++) s += i ^ j;\n"
        "  return s;\n}\nconstexpr long value = spin();\nint main() { return value == 0; }\n"
    )
    start = time.monotonic()
    result = grade(
        local_client,
        "cpp",
        fenced(slow, "cpp"),
        IOReward(case, compile_timeout=1.0),
        timeout_seconds=60,
    )
    assert result.compile_error and "did not finish within 1s" in (result.tests[0].detail or ""), (
        result
    )
    assert time.monotonic() - start < 30
