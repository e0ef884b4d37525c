"""Pure functions turning one JSON row of a known dataset format into a :class:`Task`.

Every function raises :class:`TaskFormatError` (without a location; the file reader adds the
path and line) when the row does not have the expected shape. One module per format
(``_collimate``, ``_humaneval``, ``_mbpp``, ``_livecodebench``, ``_apps``, ``_codecontests``,
``_multipl_e``; what the last two share is in ``_languages``); ``_formats`` maps the names to
them and detects a row's format.

=================  =========================================================================
format             row keys -> task
=================  =========================================================================
``collimate``      ``task_id, prompt, tests{kind,...}`` -> any test kind (our own format)
``humaneval``      ``task_id, prompt, canonical_solution, test, entry_point`` -> AssertTests
``mbpp``           ``task_id, text, code, test_list`` -> AssertTests
``livecodebench``  ``question_content, public/private_test_cases`` or SkyRL ``reward_spec``
                   -> IOTests (stdin) or FunctionCallTests (functional)
``apps``           ``problem_id, question, input_output, solutions`` -> IOTests or
                   FunctionCallTests (``fn_name``)
``codecontests``   ``name, description, public/private_tests, solutions`` -> IOTests with
                   reference and wrong solutions by language
``multipl_e``      ``name, language, prompt, tests, stop_tokens`` -> ProgramTests
=================  =========================================================================

>>> row = {"task_id": "T/0", "prompt": "def inc(x):\\n", "canonical_solution": "    return x + 1\\n",
...        "test": "def check(candidate):\\n    assert candidate(1) == 2\\n", "entry_point": "inc"}
>>> detect_format(row)
'humaneval'
>>> task = from_humaneval_row(row)
>>> task.kind, task.entry_point, task.tests.check_fn
('assert', 'inc', 'check')
"""

from collimate_envs.tasks.loaders._apps import from_apps_row
from collimate_envs.tasks.loaders._codecontests import from_codecontests_row
from collimate_envs.tasks.loaders._collimate import from_collimate_row, to_collimate_row
from collimate_envs.tasks.loaders._formats import FORMATS, LOADERS, detect_format
from collimate_envs.tasks.loaders._humaneval import from_humaneval_row
from collimate_envs.tasks.loaders._livecodebench import from_livecodebench_row
from collimate_envs.tasks.loaders._mbpp import from_mbpp_row
from collimate_envs.tasks.loaders._multipl_e import from_multipl_e_row
from collimate_envs.tasks.loaders._rows import RowLoader

__all__ = [
    "FORMATS",
    "LOADERS",
    "RowLoader",
    "detect_format",
    "from_apps_row",
    "from_codecontests_row",
    "from_collimate_row",
    "from_humaneval_row",
    "from_livecodebench_row",
    "from_mbpp_row",
    "from_multipl_e_row",
    "to_collimate_row",
]
