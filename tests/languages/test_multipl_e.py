"""MultiPL-E rows in two languages, graded on a real node: pass means exit code 0.

The rows are shaped like MultiPL-E's HumanEval_53 (``add``) in C++ and JavaScript. A raw
continuation and a chat answer pass, a wrong body fails, and a body that exits with 0 before
the tests run "passes": the spec is forgeable by design and every result says so.
"""

from __future__ import annotations

from typing import Any

import pytest

from collimate_rl.grading import MultiPLEReward, grade, reward_spec_from_ground_truth

pytestmark = pytest.mark.bwrap

ROWS = {
    "cpp": {
        "name": "HumanEval_53_add",
        "language": "cpp",
        "prompt": "#include<assert.h>\n#include<bits/stdc++.h>\n// Add two numbers x and y\n"
        "long add(long x, long y) {\n",
        "tests": "}\nint main() {\n    auto candidate = add;\n    assert(candidate((0), (1)) == (1));\n"
        "    assert(candidate((5), (7)) == (12));\n}\n",
        "stop_tokens": ["\n}"],
    },
    "javascript": {
        "name": "HumanEval_53_add",
        "language": "js",
        "prompt": "//Add two numbers x and y\nfunction add(x, y){\n",
        "tests": "const assert = require('node:assert');\n\nfunction test() {\n  let candidate = add;\n"
        "  assert.deepEqual(candidate(0, 1),1);\n  assert.deepEqual(candidate(5, 7),12);\n}\n\ntest();\n",
        "stop_tokens": ["\nfunction ", "\n/*", "\n//", "\nconsole.log"],
    },
}
BODIES = {
    "cpp": ("    return x + y;\n}\n", "    return x * y;\n}\n", "    exit(0);\n}\n"),
    "javascript": ("  return x + y;\n}\n", "  return x * y;\n}\n", "  process.exit(0);\n}\n"),
}


@pytest.mark.parametrize("lang", sorted(ROWS))
def test_multipl_e_rows(lang: str, local_client: Any, need: Any) -> None:
    need(lang)
    row = ROWS[lang]
    spec = reward_spec_from_ground_truth(row)
    assert isinstance(spec, MultiPLEReward)
    good, bad, forged = BODIES[lang]
    chat = f"Here you go:\n```{row['language']}\n{row['prompt']}{good}```\n"

    def score(completion: str) -> Any:
        result = grade(local_client, lang, completion, spec, timeout_seconds=60)
        assert result.forgeable and not result.infra_error
        return result

    # a raw continuation in one language, a chat answer in the other (a C++ compile of
    # MultiPL-E's prompt is slow: its <assert.h> comes before <bits/stdc++.h>, so no PCH)
    assert score(chat if lang == "cpp" else good).reward == 1.0
    wrong = score(bad)
    assert wrong.reward == 0.0 and wrong.tests[0].status in ("fail", "crash"), wrong.tests
    assert score(forged).reward == 1.0, "forgeable by design: exit 0 before the tests passes"
    broken = score("    return x +;\n}\n")
    assert broken.reward == 0.0
    assert broken.compile_error == (lang == "cpp") or broken.tests[0].status == "compile_error"
