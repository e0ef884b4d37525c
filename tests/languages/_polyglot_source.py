"""Authoring source of the bundled ``collimate-polyglot`` task set.

Each problem is a folder of ``polyglot/``: ``problem.json`` (title, difficulty, tags,
statement, stdin/stdout cases) and a reference (``ref.*``) and a wrong (``wrong.*``)
solution in every built-in language. The shipped data is
``collimate_envs/tasks/data/collimate_polyglot.jsonl``; regenerate it after an edit with::

    .venv/bin/python tests/languages/_polyglot_source.py

A test checks that the shipped file matches what this module builds, and another grades
every solution on a real node.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "polyglot"
DATA_FILE = (
    Path(__file__).resolve().parents[2]
    / "collimate_envs"
    / "tasks"
    / "data"
    / "collimate_polyglot.jsonl"
)
#: Language name -> solution file suffix.
SUFFIXES = {
    "python": "py",
    "c": "c",
    "cpp": "cpp",
    "java": "java",
    "javascript": "js",
    "rust": "rs",
    "bash": "sh",
    "go": "go",
}
INSTRUCTION = "Write a complete program that reads standard input and writes standard output."


def _solutions(folder: Path, kind: str) -> dict[str, str]:
    return {
        lang: (folder / f"{kind}.{ext}").read_text(encoding="utf-8")
        for lang, ext in SUFFIXES.items()
    }


def row(folder: Path) -> dict[str, Any]:
    """The collimate-format row of one problem folder."""
    problem = json.loads((folder / "problem.json").read_text(encoding="utf-8"))
    refs, wrongs = _solutions(folder, "ref"), _solutions(folder, "wrong")
    prompt = f"{problem['title']}\n\n{problem['statement'].rstrip()}\n\n{INSTRUCTION}\n"
    return {
        "task_id": f"polyglot/{folder.name}",
        "prompt": prompt,
        "difficulty": problem["difficulty"],
        "tags": ["polyglot", *problem["tags"]],
        "tests": {
            "kind": "io",
            "cases": [{"stdin": c["input"], "stdout": c["output"]} for c in problem["cases"]],
        },
        "reference_solution": refs["python"],
        "wrong_solution": wrongs["python"],
        "solutions": refs,
        "wrong_solutions": wrongs,
    }


def render() -> str:
    """The JSONL text of the whole set, problems in name order."""
    folders = sorted(p for p in HERE.iterdir() if (p / "problem.json").is_file())
    return "".join(json.dumps(row(f), ensure_ascii=False) + "\n" for f in folders)


if __name__ == "__main__":
    DATA_FILE.write_text(render(), encoding="utf-8")
    print(f"wrote {DATA_FILE}", file=sys.stderr)
