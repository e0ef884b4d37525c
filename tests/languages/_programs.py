"""Programs in every built-in language for the language tests: the sum of two integers
(the polyglot ``sum-pair`` problem's solutions), and ones that do not compile or never end."""

from __future__ import annotations

from typing import Any

from collimate_envs.tasks import Task, load_task_set

#: Template ids of the built-in language templates.
LANGUAGES = ("c", "cpp", "java", "javascript", "rust", "bash", "go")
#: Another fence tag each language answers to (extraction aliases).
ALIAS_TAG = {
    "c": "C",
    "cpp": "c++",
    "java": "Java",
    "javascript": "js",
    "rust": "rs",
    "bash": "sh",
    "go": "golang",
}
FENCE = {"c": "c", "cpp": "cpp", "java": "java", "javascript": "javascript", "rust": "rust"}
FENCE |= {"bash": "bash", "go": "go", "python": "python"}

DOES_NOT_COMPILE = {
    "c": "int main(void) { return 0 }\n",
    "cpp": "int main() { undefined_function(); }\n",
    "java": 'public class Main { public static void main(String[] a) { int x = "s"; } }\n',
    "javascript": "function f( {\n",
    "rust": 'fn main() { let x: i32 = "s"; }\n',
    "bash": "if then fi\n",
    "go": "package main\n\nfunc main() { x := 1 }\n",
}
NEVER_ENDS = {
    "c": "int main(void) { volatile long x = 0; for (;;) x++; }\n",
    "cpp": "int main() { volatile long x = 0; for (;;) x++; }\n",
    "java": "public class Main { public static void main(String[] a) { while (true) {} } }\n",
    "javascript": "for (;;) {}\n",
    "rust": "fn main() { let mut x: u64 = 0; loop { x = std::hint::black_box(x + 1); } }\n",
    "bash": "while :; do :; done\n",
    "go": "package main\n\nfunc main() {\n\tfor {\n\t}\n}\n",
}


def sum_pair() -> Task:
    """The polyglot problem whose solutions the per-language tests grade."""
    return load_task_set("collimate-polyglot")["polyglot/sum-pair"]


def correct(language: str) -> str:
    code = sum_pair().solution(language)
    assert code is not None
    return code


def wrong(language: str) -> str:
    code = sum_pair().wrong_solution_in(language)
    assert code is not None
    return code


def fenced(code: str, tag: str = "") -> str:
    return f"```{tag}\n{code.rstrip()}\n```"


def chat(code: str, tag: str) -> str:
    """A chat answer: prose around one fenced block."""
    return f"Read both numbers, then print their sum.\n\n{fenced(code, tag)}\n\nThis runs in O(1)."


def spec(**options: Any) -> Any:
    return sum_pair().to_reward_spec(**options)
