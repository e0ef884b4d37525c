"""The language table, extraction, specs, loaders and toolchain detection (no sandbox)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from collimate_envs._language import prompt_for
from collimate_envs.tasks import IOTests, ProgramTests, Task, TaskFormatError, load_task_set
from collimate_envs.tasks.loaders import (
    detect_format,
    from_codecontests_row,
    from_collimate_row,
    from_multipl_e_row,
    to_collimate_row,
)
from collimate_rl.errors import CollimateUsageError
from collimate_rl.grading import (
    TEST_STATUSES,
    GradeResult,
    IOReward,
    MultiPLEReward,
    TestOutcome,
    UnitTestReward,
    extract_code,
    language,
    reward_spec_from_ground_truth,
    spec_from_dict,
)
from collimate_rl.grading._binding import bind_language, extract_source
from collimate_rl.grading.languages import LANGUAGES, language_of_template
from collimate_rl.node.runtime.base import Limits
from collimate_rl.node.runtime.languages import (
    LanguageTemplate,
    LanguageTemplates,
    detect_languages,
)

from . import _polyglot_source as polyglot
from ._programs import ALIAS_TAG, FENCE, chat, correct
from ._programs import LANGUAGES as TEMPLATES

# -- the table -----------------------------------------------------------------------------


def test_every_template_names_its_language() -> None:
    for template in TEMPLATES:
        assert language_of_template(template) == template
    assert language_of_template("python3") == language_of_template("py") == "python"
    assert language_of_template("js") == "javascript" and language_of_template("rs") == "rust"
    assert language_of_template("my-baked-template") is None
    # a built-in's networked twin grades the same language (not C++ as Python)
    assert (
        language_of_template("cpp-net") == "cpp" and language_of_template("js-net") == "javascript"
    )
    assert (
        language_of_template("python3-net") == "python" and language_of_template("my-net") is None
    )


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("C++", "cpp"),
        ("cxx", "cpp"),
        ("JS", "javascript"),
        ("node", "javascript"),
        ("rs", "rust"),
        ("sh", "bash"),
        ("golang", "go"),
        ("go_test.go", "go"),
        ("py3", "python"),
    ],
)
def test_aliases(name: str, canonical: str) -> None:
    assert language(name).name == canonical


def test_unknown_language_is_a_usage_error() -> None:
    with pytest.raises(CollimateUsageError, match="unknown language 'cobol'; known: "):
        language("cobol")
    with pytest.raises(CollimateUsageError):
        IOReward([], language="cobol")


@pytest.mark.parametrize(
    ("source", "main"),
    [
        ("public class Solution { public static void main(String[] a) {} }", "Solution"),
        ("class Helper {}\npublic final class Runner { }", "Runner"),
        ("class A {}\nclass Problem {\n  public static void main(String[] args) {}\n}", "Problem"),
        ("// public class Fake\nclass Only {}", "Only"),
        ("interface X {}", "Main"),
    ],
)
def test_java_file_follows_its_class(source: str, main: str) -> None:
    assert LANGUAGES["java"].main_name(source) == main
    assert LANGUAGES["java"].source_file(source) == f"{main}.java"


# -- extraction ----------------------------------------------------------------------------


@pytest.mark.parametrize("lang", TEMPLATES)
def test_extraction_takes_the_languages_fenced_block(lang: str) -> None:
    code = correct(lang).strip()
    for tag in (FENCE[lang], ALIAS_TAG[lang], ""):
        assert extract_code(chat(code, tag), language=lang) == code
    # a Python block elsewhere in the answer is not this language's
    mixed = chat("print('not this')", "python") + "\n" + chat(code, FENCE[lang])
    assert extract_code(mixed, language=lang) == code
    spec = bind_language(IOReward([]), lang)
    assert extract_source(spec, mixed) == code


# -- specs ---------------------------------------------------------------------------------


def test_io_reward_language_and_limits() -> None:
    spec = IOReward([], language="C++", memory_limit_bytes=256 << 20, compile_timeout=5)
    assert spec.language == "cpp"
    payload = json.loads(spec.build("int main() {}").files[0]["content"])
    program = payload["program"]
    assert program["files"] == {"main.cpp": "int main() {}"}
    assert program["compile"][0] == "g++" and program["run"] == ["./main"]
    assert program["compile_limits"]["timeout"] == 5.0
    assert program["run_limits"]["memory"] == 256 << 20
    assert spec_from_dict(spec.to_dict()) == spec
    for bad in ({"memory_limit_bytes": 0}, {"compile_timeout": -1.0}, {"output_limit_bytes": 1.5}):
        with pytest.raises(CollimateUsageError):
            IOReward([], **bad)  # type: ignore[arg-type]


def test_python_io_payload_is_unchanged() -> None:
    """Python keeps its warm path: no program, no limits unless asked for."""
    payload = json.loads(
        IOReward([{"input": "", "output": ""}]).build("print(1)").files[0]["content"]
    )
    assert set(payload) == {
        "cases",
        "strip_whitespace",
        "float_tolerance",
        "prelude",
        "module",
        "v",
        "kind",
        "nonce",
        "source",
        "per_test_timeout",
        "budget_seconds",
    }


def test_java_runs_with_its_memory_as_heap() -> None:
    payload = json.loads(IOReward([], language="java").build("class Main {}").files[0]["content"])
    run = payload["program"]["run"]
    assert "-Xmx1024m" in run and "-ea" not in run and run[-1] == "Main"
    assert payload["program"]["run_limits"]["memory"] == (1 << 30) + (2 << 30)


def test_binding_the_template_language() -> None:
    assert bind_language(IOReward([]), "go").language == "go"
    assert bind_language(IOReward([], language="rust"), "python3").language == "rust"
    assert bind_language(IOReward([]), "my-template").language is None
    python_only = UnitTestReward("assert f() == 1", entry="f")
    assert bind_language(python_only, "python3") is python_only
    with pytest.raises(CollimateUsageError, match="template 'cpp' is C\\+\\+"):
        bind_language(python_only, "cpp")


def test_grade_result_flags() -> None:
    assert "compile_error" in TEST_STATUSES
    failed = GradeResult(reward=0.0, tests=(TestOutcome("compile", "compile_error"),))
    assert failed.compile_error and not failed.forgeable
    assert (
        TestOutcome.from_frame({"name": "compile", "status": "compile_error"}).status
        == "compile_error"
    )


# -- MultiPL-E -----------------------------------------------------------------------------

CPP_ROW = {
    "name": "HumanEval_53_add",
    "language": "cpp",
    "prompt": "#include<assert.h>\n// add x and y\nlong add(long x, long y) {\n",
    "tests": "}\nint main() {\n    assert(add(2, 3) == 5);\n}\n",
    "stop_tokens": ["\n}"],
    "doctests": "keep",
}


def test_multipl_e_rows_become_forgeable_specs() -> None:
    spec = reward_spec_from_ground_truth(CPP_ROW)
    assert isinstance(spec, MultiPLEReward) and spec.forgeable
    assert spec.stop_tokens == ("\n}",) and spec.language == "cpp"
    assert spec_from_dict(spec.to_dict()) == spec
    with pytest.raises(CollimateUsageError, match="MultiPL-E row needs"):
        MultiPLEReward.from_row({"name": "x", "language": "cpp"})


def test_multipl_e_extraction() -> None:
    spec = MultiPLEReward.from_row(CPP_ROW)
    # a raw continuation keeps its indentation and stops at the first stop token
    assert (
        spec.extract_source("    return x + y;\n}\nint main() { hack(); }") == "    return x + y;"
    )
    # a chat answer that repeats the signature: what follows it, cut the same way
    answer = "Sure:\n```cpp\nlong add(long x, long y) {\n    return x + y;\n}\n```"
    assert spec.extract_source(answer) == "    return x + y;"
    program = spec.program("    return x + y;")
    assert program == CPP_ROW["prompt"] + "    return x + y;\n" + CPP_ROW["tests"]
    python = MultiPLEReward(
        "def f(x):\n    '''doc\n    >>> f(1)\n    2'''\n", "assert f(1) == 2\n", "py"
    )
    assert (
        python.extract_source("```python\ndef f(x):\n    return x + 1\n```") == "    return x + 1"
    )


# -- loaders -------------------------------------------------------------------------------


def test_codecontests_rows() -> None:
    row = {
        "name": "1A. Theatre Square",
        "description": "Count flagstones.",
        "public_tests": {"input": ["6 6 4\n"], "output": ["4\n"]},
        "private_tests": {"input": ["1 1 1\n"], "output": ["1\n"]},
        "generated_tests": {"input": ["2 2 2\n"], "output": ["1\n"]},
        "solutions": {"language": [1, 2, 3, 4], "solution": ["py2", "c++", "py3", "java"]},
        "incorrect_solutions": {"language": [2], "solution": ["bad c++"]},
        "difficulty": 7,
        "memory_limit_bytes": 256 << 20,
        "cf_tags": ["math"],
    }
    assert detect_format(row) == "codecontests"
    task = from_codecontests_row(row)
    assert task.tests.cases == (("6 6 4\n", "4\n"), ("1 1 1\n", "1\n"))
    assert dict(task.solutions) == {"cpp": "c++", "python": "py3", "java": "java"}
    assert task.reference_solution == "py3" and task.wrong_solution_in("cpp") == "bad c++"
    assert task.difficulty == "easy" and task.tags == ("math",)
    spec = task.to_reward_spec()
    assert isinstance(spec, IOReward) and spec.memory_limit_bytes == 256 << 20
    named = from_codecontests_row({**row, "solutions": {"rs": "fn main() {}"}})
    assert dict(named.solutions) == {"rust": "fn main() {}"}
    with pytest.raises(TaskFormatError, match="no tests"):
        from_codecontests_row({**row, "public_tests": None, "private_tests": None})


def test_multipl_e_row_loader_and_round_trip() -> None:
    assert detect_format(CPP_ROW) == "multipl_e"
    task = from_multipl_e_row(CPP_ROW)
    assert isinstance(task.tests, ProgramTests) and task.language == "cpp"
    spec = task.to_reward_spec()
    assert isinstance(spec, MultiPLEReward) and spec.prompt == CPP_ROW["prompt"]
    assert from_collimate_row(to_collimate_row(task), source=task.source) == task
    with pytest.raises(TaskFormatError, match="unknown language 'lua'"):
        from_multipl_e_row({**CPP_ROW, "language": "lua"})


def test_collimate_rows_keep_solutions_by_language() -> None:
    task = Task(
        "t",
        "p",
        IOTests(cases=(("", "hi\n"),), memory_limit_bytes=1 << 20),
        solutions={"cpp": "a", "rust": "b"},
        wrong_solutions={"go": "c"},
    )
    assert from_collimate_row(to_collimate_row(task)) == task
    assert (
        from_collimate_row({**to_collimate_row(task), "solutions": {"c++": "x"}}).solution("cpp")
        == "x"
    )
    assert hash(task) == hash(from_collimate_row(to_collimate_row(task)))


# -- the polyglot set ----------------------------------------------------------------------


def test_polyglot_file_matches_its_sources() -> None:
    shipped = polyglot.DATA_FILE.read_text(encoding="utf-8")
    assert shipped == polyglot.render(), (
        "collimate_polyglot.jsonl is stale: run .venv/bin/python tests/languages/_polyglot_source.py"
    )


def test_polyglot_set_has_every_language() -> None:
    tasks = load_task_set("collimate-polyglot")
    assert len(tasks) >= 30
    for task in tasks:
        assert task.kind == "io" and "polyglot" in task.tags and len(task.tests.cases) >= 4
        assert set(task.solutions) == set(task.wrong_solutions) == set(polyglot.SUFFIXES)
        for lang in polyglot.SUFFIXES:
            assert task.solution(lang) != task.wrong_solution_in(lang)
    task = tasks["polyglot/roman"]
    assert prompt_for(task, "cpp").endswith("one ```cpp block.\n")
    assert prompt_for(task, "python3").endswith("one ```python block.\n")
    basic = load_task_set("collimate-basic")[0]
    assert prompt_for(basic, "cpp") == basic.prompt


# -- toolchain detection (host side) -------------------------------------------------------


def test_absent_toolchains_are_named(tmp_path: Path) -> None:
    found = detect_languages(search_path=str(tmp_path))
    assert found.available == {}
    assert found.unavailable["cpp"] == f"`g++` not found on the PATH ({tmp_path})"
    assert found.unavailable["java"].startswith("`javac` not found")
    gcc = Path("/usr/bin/gcc")
    if not gcc.exists():
        pytest.skip("no gcc here")
    os.symlink(gcc, tmp_path / "gcc")
    found = detect_languages(search_path=str(tmp_path))
    assert set(found.available) == {"c"} and "cpp" in found.unavailable
    assert (
        detect_languages(search_path=str(tmp_path), only=["cpp"])
        .unavailable["c"]
        .startswith("switched off")
    )


def test_language_choice() -> None:
    assert LanguageTemplates("c, cpp")._only == {"c", "cpp"}
    assert LanguageTemplates("none")._only == set()
    assert LanguageTemplates(["js", "rs"])._only == {"javascript", "rust"}
    with pytest.raises(ValueError, match="unknown language template 'cobol'"):
        LanguageTemplates("cobol")


def test_a_toolchain_outside_usr_is_bound_at_its_path(tmp_path: Path) -> None:
    tool = tmp_path / "opt" / "node" / "bin" / "node"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    offer = LanguageTemplate("javascript", "javascript", {"node": str(tool)}, ("js",))
    spec = offer.spec(Limits())
    assert spec.binds == (tool.parent.parent.resolve(),)
    assert spec.path == (str(tool.parent.resolve()),)
    assert spec.interpreter == "python3"  # graders need the Python harness
