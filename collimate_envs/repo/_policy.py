"""What an agent's changes may not touch: the files that decide how its tests are run.

The grader applies an agent's changeset to a fresh fork of the task's pristine state,
then adds the hidden tests and runs them. Some files, changed, would change the
verdict rather than the code under test; a changeset touching one is refused whole
(reward 0, ``info["rejected"]`` says which file and why):

* the hidden tests' files, and the repository's existing test files (edited, deleted
  or renamed; :func:`is_test_path`; new test files of the agent's own are allowed, and
  never run);
* ``conftest.py`` anywhere, added, edited or deleted;
* pytest's settings: ``pytest.ini`` / ``.pytest.ini`` anywhere, and the pytest
  sections of ``tox.ini``, ``setup.cfg`` and ``pyproject.toml`` (other sections are
  fine);
* interpreter start-up hooks: ``sitecustomize.py``, ``usercustomize.py``, ``*.pth``;
* anything that would shadow the runner: top-level modules or packages named
  ``pytest``, ``_pytest``, ``pluggy``, ``py``, ``iniconfig``, the grader's report
  plugin ``collimate_repo_report``, or ``pytest_*`` (plugins by pytest's naming convention);
* paths outside the repository (absolute, ``..``), and symbolic links.

>>> refusal({"src/calc.py": b"x = 1\\n"}, {}, hidden={"tests/test_calc.py"})
>>> refusal({"tests/conftest.py": b""}, {}, hidden=set())
'tests/conftest.py: conftest.py files decide how tests run'
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Mapping

__all__ = ["is_test_path", "pytest_sections", "refusal"]

_RUNNER_MODULES = ("pytest", "_pytest", "pluggy", "py", "iniconfig", "collimate_repo_report")
_TEST_DIRS = ("tests", "test")
_SECTION = re.compile(r"^\s*\[([^\]\n]+)\]\s*$", re.M)
_PYTEST_SECTION = re.compile(r"^(pytest|tool:pytest|tool\.pytest(\..*)?)$")


def is_test_path(path: str) -> bool:
    """A test file by the usual conventions: ``test_*.py``, ``*_test.py``, ``tests.py``, or any
    file under a ``tests`` or ``test`` folder (helpers the tests import included: editing one
    could make an assertion pass). A source package named ``testing`` is not one.

    >>> is_test_path("pkg/tests/helpers.py"), is_test_path("pkg/calc.py")
    (True, False)
    """
    name = posixpath.basename(path)
    if name.startswith("test_") or name.endswith("_test.py") or name in ("tests.py", "test.py"):
        return True
    return any(part in _TEST_DIRS for part in path.split("/")[:-1])


def pytest_sections(text: str) -> str:
    """The pytest sections of an INI or TOML file, as text (what a change must leave equal).

    >>> pytest_sections("[metadata]\\nname = x\\n[tool:pytest]\\naddopts = -x\\n")
    '[tool:pytest]\\naddopts = -x\\n'
    """
    heads = list(_SECTION.finditer(text))
    kept: list[str] = []
    for index, head in enumerate(heads):
        end = heads[index + 1].start() if index + 1 < len(heads) else len(text)
        name = head.group(1).strip().strip('"')
        if _PYTEST_SECTION.match(name):
            kept.append(text[head.start() : end].strip("\n") + "\n")
    return "".join(kept)


def _path_problem(path: str) -> str | None:
    if not path or path.startswith("/") or "\x00" in path:
        return "not a path inside the repository"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "not a path inside the repository"
    if parts[0] == ".git":
        return "the repository's git metadata is not part of a change"
    name = parts[-1]
    if name == "conftest.py":
        return "conftest.py files decide how tests run"
    if name in ("pytest.ini", ".pytest.ini"):
        return "pytest's settings decide how tests run"
    if name in ("sitecustomize.py", "usercustomize.py") or name.endswith(".pth"):
        return "interpreter start-up hooks run before the tests"
    top = parts[0].removesuffix(".py")
    if top in _RUNNER_MODULES or top.startswith("pytest_"):
        return f"{top!r} would shadow the test runner or load as a pytest plugin"
    return None


def refusal(
    changes: Mapping[str, bytes | None],
    pristine: Mapping[str, bytes | None],
    *,
    hidden: Collection[str],
    links: Collection[str] = (),
) -> str | None:
    """Why this changeset may not be graded (``None``: it may).

    Args:
        changes: path -> new bytes (``None``: deleted).
        pristine: the pristine bytes of the changed paths (``None``: the path is new).
        hidden: the paths of the hidden tests (the test patch's files).
        links: changed paths that are symbolic links in the agent's sandbox.
    """
    for path in sorted(changes):
        if path in links:
            return f"{path}: symbolic links are not part of a change"
        problem = _path_problem(path)
        if problem is not None:
            return f"{path}: {problem}"
        if path in hidden:
            return f"{path}: the hidden tests' files are not the agent's to change"
        before = pristine.get(path)
        if before is not None and is_test_path(path):
            return f"{path}: the repository's test files are not the agent's to change"
        name = posixpath.basename(path)
        if name in ("tox.ini", "setup.cfg", "pyproject.toml"):
            old = pytest_sections((before or b"").decode("utf-8", "replace"))
            new = pytest_sections((changes[path] or b"").decode("utf-8", "replace"))
            if old != new:
                return f"{path}: its pytest settings decide how tests run"
    return None
