"""Grading in every language: grade p50 and throughput, compile included, beside Python.

The workload is the bundled ``collimate-polyglot`` set's reference solutions, graded on each
language template of the node (``python3`` for Python): one exec per grade, which compiles
the candidate once and runs each of the problem's cases as a fresh process. ``p50`` is one
grade at a time; ``grades/s`` has one grade in flight per core.

The warm-ups (:mod:`collimate_rl.node.runtime.toolcache`) are measured apart, as a compile
and a run of one program in a fresh sandbox with the warm-up and without it.

>>> LANGUAGE_TEMPLATES[0]
'python3'
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from collimate_rl.bench.report import Section, fmt, times_text
from collimate_rl.bench.stats import Summary, batch_rate, ratio
from collimate_rl.grading import grade
from collimate_rl.grading.languages import LANGUAGES, language_of_template

__all__ = ["LANGUAGE_TEMPLATES", "languages_section", "warm_up_section"]

#: Python first: the other rows compare with it.
LANGUAGE_TEMPLATES = ("python3", "c", "cpp", "java", "javascript", "rust", "bash", "go")

_CPP = "#include <bits/stdc++.h>\nint main() { long long a, b; std::cin >> a >> b; std::cout << a + b << '\\n'; }\n"
_JAVA = (
    "import java.util.*;\npublic class Main { public static void main(String[] args) {\n"
    "  Scanner in = new Scanner(System.in); System.out.println(in.nextLong() + in.nextLong()); } }\n"
)
_GO = (
    'package main\n\nimport "fmt"\n\nfunc main() {\n'
    "\tvar a, b int64\n\tfmt.Scan(&a, &b)\n\tfmt.Println(a + b)\n}\n"
)
#: Without Go's warm-up: a build cache of the session's own, empty, as before it existed.
_GO_COLD_CACHE = "/tmp/.cache/go-build"
# a warm-up is in place once its file exists (the node builds it in the background; Go's
# before the template starts)
_READY = {
    "go": 'test -d "$GOCACHE"',
    "cpp": 'test -r "$CPLUS_INCLUDE_PATH/bits/stdc++.h.gch"',
    "java": 'j=$(command -v javac) && test -r "${j%/*}/../javac.jsa"',  # (toolcache's wrapper)
}


def _workload(samples: int, language: str) -> list[tuple[str, Any]]:
    """``samples`` (completion, spec) pairs: polyglot reference solutions, cycled."""
    from collimate_envs.tasks import load_task_set

    tasks = list(load_task_set("collimate-polyglot"))
    fence = LANGUAGES[language].fences[0]
    out = []
    for i in range(samples):
        task = tasks[i % len(tasks)]
        code = task.solution(language)
        out.append((f"```{fence}\n{code}```", task.to_reward_spec()))
    return out


def languages_section(
    client: Any,
    samples: int,
    workers: int,
    progress: Callable[[str], None],
    templates: Sequence[str] = LANGUAGE_TEMPLATES,
) -> Section:
    """Grade p50/p99 (sequential) and grades per second (``workers`` in flight) per language."""
    offered = set(client.templates())
    section = Section(
        key="languages",
        title=f"Grading per language, compile included ({samples} polyglot grades each)",
        columns=["language", "template", "p50 ms", "p99 ms", "grades/s", "p50 vs Python"],
        notes=[
            "One exec per grade: the candidate is compiled once (a syntax check for JavaScript "
            "and Bash), then each of the problem's 4-7 cases runs as a new process. Python runs "
            "in the node's warm interpreter. grades/s: "
            f"{workers} grades in flight (one per core).",
        ],
    )
    python_p50 = float("nan")
    for template in templates:
        if template not in offered:
            progress(f"languages: no {template} template on this node, skipped")
            continue
        name = language_of_template(template) or "python"
        work = _workload(samples, name)
        progress(f"languages: {template}: {samples} grades one by one, then {workers} at a time")

        def one(item: tuple[str, Any], template: str = template) -> float:
            completion, spec = item
            start = time.perf_counter()
            result = grade(client, template, completion, spec, timeout_seconds=120)
            if result.reward != 1.0:
                raise RuntimeError(f"{template}: a reference solution scored {result.reward}")
            return (time.perf_counter() - start) * 1e3

        one(work[0])  # starts the template (first use) and warms it
        summary = Summary.of([one(item) for item in work])
        rate, _ = batch_rate(one, work, workers)
        if name == "python":
            python_p50 = summary.p50
        section.add(
            [
                LANGUAGES[name].title,
                template,
                fmt(summary.p50, 0),
                fmt(summary.p99, 0),
                fmt(rate, 1),
                times_text(ratio(summary.p50, python_p50)),
            ],
            {
                "language": name,
                "template": template,
                "p50_ms": summary.p50,
                "p99_ms": summary.p99,
                "grades_per_s": rate,
                "n": summary.n,
            },
        )
    return section


def _commands(language: str) -> tuple[str, str, dict[str, str]]:
    """A compile-and-run command with the warm-up, one without it, and their files."""
    source = {"cpp": _CPP, "java": _JAVA, "go": _GO}[language]
    lang = LANGUAGES[language]
    compile_argv, run_argv = lang.commands(source)
    warm = " ".join(compile_argv) + " && " + " ".join(run_argv) + " < in.txt"
    if language == "cpp":
        cold = "env -u CPLUS_INCLUDE_PATH " + warm
    elif language == "go":
        cold = f"env GOCACHE={_GO_COLD_CACHE} " + warm
    else:  # the JDK's own javac, not the template's wrapper that adds the archive
        cold = " ".join(
            ['"$(readlink -f "$(command -v java)" | sed s/java$/javac/)"', *compile_argv[1:]]
        )
        cold += " && " + " ".join(run_argv) + " < in.txt"
    files = {lang.source_file(source): source, "in.txt": "1 2\n"}
    return warm, cold, files


def warm_up_section(
    client: Any, samples: int, progress: Callable[[str], None], wait_seconds: float = 600.0
) -> Section:
    """Compile+run p50 of one program with each language warm-up and without it."""
    offered = set(client.templates())
    section = Section(
        key="warm_ups",
        title=f"Language warm-ups: compile + run in a fresh sandbox ({samples} samples each)",
        columns=["language", "program", "warm-up", "p50 ms (with)", "p50 ms (without)", "speed-up"],
        notes=[
            "C++: a precompiled bits/stdc++.h on CPLUS_INCLUDE_PATH; Java: a class-data-sharing "
            "archive of javac's classes; Go: the standard library compiled, in a read-only "
            "GOCACHE. Built once per machine by the first node that needs them; without: the "
            "same command with the warm-up bypassed (Go: a fresh session's own empty cache).",
        ],
    )
    rows = {
        "cpp": ("A+B with bits/stdc++.h", "precompiled header"),
        "java": ("A+B with Scanner", "javac CDS archive"),
        "go": ("A+B with fmt", "compiled standard library"),
    }
    for language, (program, warm_up) in rows.items():
        if language not in offered:
            progress(f"warm-ups: no {language} template on this node, skipped")
            continue
        warm, cold, files = _commands(language)
        upload = [{"path": f"/tmp/w/{name}", "content": text} for name, text in files.items()]
        deadline = time.monotonic() + wait_seconds
        progress(f"warm-ups: waiting for the {language} warm-up")
        while client.exec_once(language, command=_READY[language], timeout_seconds=30).exit_code:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {language} warm-up was not ready in {wait_seconds:.0f}s")
            time.sleep(2.0)

        def timed(command: str, language: str = language, upload: Any = upload) -> float:
            start = time.perf_counter()
            response = client.exec_once(
                language, command=f"cd /tmp/w && {command}", files=upload, timeout_seconds=120
            )
            if response.exit_code != 0 or response.stdout.strip().splitlines()[-1:] != ["3"]:
                raise RuntimeError(f"{language}: {command!r} failed: {response.stdout[-500:]}")
            return (time.perf_counter() - start) * 1e3

        progress(f"warm-ups: {language}, {samples} runs with and {samples} without")
        timed(warm)
        timed(cold)
        with_p50 = Summary.of([timed(warm) for _ in range(samples)]).p50
        without_p50 = Summary.of([timed(cold) for _ in range(samples)]).p50
        section.add(
            [
                LANGUAGES[language].title,
                program,
                warm_up,
                fmt(with_p50, 0),
                fmt(without_p50, 0),
                times_text(ratio(without_p50, with_p50)),
            ],
            {
                "language": language,
                "p50_ms_with": with_p50,
                "p50_ms_without": without_p50,
                "n": samples,
            },
        )
    return section
