"""Tiny repository tasks in the SWE-bench row format (until the bundled set lands)."""

from __future__ import annotations

from typing import Any

CALC_FILES = {
    "calc/__init__.py": "from calc.ops import add, mean\n",
    "calc/ops.py": (
        "def add(a, b):\n"
        "    return a + b\n"
        "\n"
        "\n"
        "def mean(values):\n"
        "    return sum(values) / (len(values) + 1)\n"
    ),
    "tests/test_ops.py": ("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"),
    "setup.cfg": "[metadata]\nname = calc\n",
}

CALC_TEST_PATCH = """\
diff --git a/tests/test_mean.py b/tests/test_mean.py
new file mode 100644
--- /dev/null
+++ b/tests/test_mean.py
@@ -0,0 +1,9 @@
+from calc import mean
+
+
+def test_mean_of_two():
+    assert mean([2, 4]) == 3
+
+
+def test_mean_of_one():
+    assert mean([7]) == 7
"""

CALC_GOLD = """\
diff --git a/calc/ops.py b/calc/ops.py
--- a/calc/ops.py
+++ b/calc/ops.py
@@ -3,4 +3,4 @@


 def mean(values):
-    return sum(values) / (len(values) + 1)
+    return sum(values) / len(values)
"""

CALC_ROW: dict[str, Any] = {
    "instance_id": "calc__mean-1",
    "repo": "collimate/calc",
    "base_commit": "0" * 40,
    "problem_statement": "`calc.mean([2, 4])` returns 2, not 3: the mean divides by one too many.",
    "FAIL_TO_PASS": '["tests/test_mean.py::test_mean_of_two", "tests/test_mean.py::test_mean_of_one"]',
    "PASS_TO_PASS": ["tests/test_ops.py::test_add"],
    "test_patch": CALC_TEST_PATCH,
    "patch": CALC_GOLD,
    "repo_files": CALC_FILES,
}

WORDS_FILES = {
    "words.py": (
        "def title_case(text):\n    return ' '.join(w.capitalize() for w in text.split(' '))\n"
    ),
    "test_words.py": (
        "import unittest\n\nfrom words import title_case\n\n\n"
        "class TestTitle(unittest.TestCase):\n"
        "    def test_simple(self):\n"
        "        self.assertEqual(title_case('a b'), 'A B')\n"
    ),
}

WORDS_TEST_PATCH = """\
diff --git a/test_words.py b/test_words.py
--- a/test_words.py
+++ b/test_words.py
@@ -6,3 +6,6 @@
 class TestTitle(unittest.TestCase):
     def test_simple(self):
         self.assertEqual(title_case('a b'), 'A B')
+
+    def test_spaces(self):
+        self.assertEqual(title_case('  a  b '), 'A B')
"""

WORDS_GOLD = """\
diff --git a/words.py b/words.py
--- a/words.py
+++ b/words.py
@@ -1,2 +1,2 @@
 def title_case(text):
-    return ' '.join(w.capitalize() for w in text.split(' '))
+    return ' '.join(w.capitalize() for w in text.split())
"""

# unittest-style ids (Django's and SWE-bench's form), run by pytest all the same.
WORDS_ROW: dict[str, Any] = {
    "instance_id": "words__spaces-1",
    "problem_statement": "title_case keeps runs of spaces; it should collapse them.",
    "FAIL_TO_PASS": ["test_spaces (test_words.TestTitle)"],
    "PASS_TO_PASS": ["test_words.TestTitle.test_simple"],
    "test_patch": WORDS_TEST_PATCH,
    "patch": WORDS_GOLD,
    "repo_files": WORDS_FILES,
}

ROWS = [CALC_ROW, WORDS_ROW]
