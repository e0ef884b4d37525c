"""What an env shows the model for a task on a template of some language.

A stdin/stdout task with solutions in several languages (``collimate-polyglot``, a
CodeContests row) has a language-neutral statement: the prompt gets one line naming the
template's language and the fence to answer in, so a policy knows what the grader will
compile. Every other task's prompt is shown as it is.

>>> from collimate_envs.tasks import load_task_set
>>> task = load_task_set("collimate-polyglot")["polyglot/sum-pair"]
>>> prompt_for(task, "rust").splitlines()[-1]
'Use Rust: answer with the whole program in one ```rust block.'
"""

from __future__ import annotations

from typing import Any

from collimate_rl.grading.languages import LANGUAGES, language_of_template

__all__ = ["prompt_for"]


def prompt_for(task: Any, template: str) -> str:
    """``task.prompt``, naming the template's language when the task has none of its own."""
    prompt: str = task.prompt
    # tasks of other shapes (an adapter's rows) have none of these: shown as they are
    neutral = getattr(task, "kind", None) == "io" and getattr(task, "solutions", None)
    if not neutral or getattr(task, "language", None) is not None:
        return prompt
    lang = LANGUAGES[language_of_template(template) or "python"]
    fence = lang.fences[0]
    return f"{prompt.rstrip()}\nUse {lang.title}: answer with the whole program in one ```{fence} block.\n"
