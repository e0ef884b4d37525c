"""One pristine session per template, with a test runner importable: every task forks from it.

A template whose Python imports pytest (an image with its own, or a node started with
``--share-site-packages``) is used as it is (``vendor_runner=None``, the default;
``True`` copies the host's pytest anyway, ``False`` never does). One whose Python does not (the local node's
``python3`` sees the standard library and numpy) gets the host's own pytest and its
dependencies, pure Python, written once into the base session's user site
(``/sandbox/.local/...``, already on the interpreter's ``sys.path``): outside the
repository, so an agent's changes never reach the copy a grade uses.

>>> sorted(runner_files())[:1]
['_pytest/__init__.py']
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from pathlib import Path
from typing import Any

from collimate_envs.repo._workspace import write_files
from collimate_rl.errors import CollimateNotFoundError, CollimateSessionGoneError
from collimate_rl.sandbox import Sandbox

__all__ = ["RUNNER_PACKAGES", "TemplateBase", "runner_files"]

#: What pytest needs (those the host has), copied when a template's Python lacks pytest.
RUNNER_PACKAGES = (
    "pytest",
    "_pytest",
    "pluggy",
    "iniconfig",
    "packaging",
    "py",
    "exceptiongroup",
    "tomli",
)


@functools.cache
def runner_files() -> dict[str, bytes]:
    """The host's pytest and its dependencies as files, path (relative to a site dir) -> bytes."""
    files: dict[str, bytes] = {}
    for name in RUNNER_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        if spec.submodule_search_locations:
            root = origin.parent
            for path in sorted(root.rglob("*")):
                if (
                    path.is_file()
                    and "__pycache__" not in path.parts
                    and path.suffix in (".py", ".typed")
                ):
                    files[f"{name}/{path.relative_to(root).as_posix()}"] = path.read_bytes()
        elif origin.suffix == ".py":
            files[origin.name] = origin.read_bytes()
    return files


class TemplateBase:
    """The base session of one template (created on first use, replaced if the node lost it)."""

    def __init__(
        self, client: Any, template: str, *, timeout: int = 120, vendor_runner: bool | None = None
    ) -> None:
        self.client = client
        self.template = template
        self.timeout = timeout
        self.vendor_runner = vendor_runner
        self.box: Sandbox | None = None
        self.vendored = False
        self._lock = threading.Lock()  # groups prepare their tasks from threads

    def _make(self) -> Sandbox:
        box = Sandbox(self.template, client=self.client, default_timeout=self.timeout).start()
        try:
            if self.vendor_runner is False:
                return box
            native = (
                ""
                if self.vendor_runner
                else "python3 -c 'import pytest' 2>/dev/null && echo native || "
            )
            probe = box.exec(
                command=native
                + "python3 -c 'import site; print(site.getusersitepackages())' 2>/dev/null",
                timeout_seconds=self.timeout,
            )
            where = probe.stdout.strip().splitlines()[-1:] if probe.stdout.strip() else []
            if where and where[0] != "native" and where[0].startswith("/") and runner_files():
                write_files(box, where[0], runner_files(), timeout=self.timeout)
                self.vendored = True
        except BaseException:
            box.close()
            raise
        return box

    def fork(self) -> Sandbox:
        """A fresh fork of the base session."""
        # One fork at a time: a node refuses to fork a session that is busy forking.
        with self._lock:
            if self.box is None:
                self.box = self._make()
            try:
                return self.box.fork(1)[0]
            except (CollimateNotFoundError, CollimateSessionGoneError):
                self.box.close()
                self.box = self._make()
                return self.box.fork(1)[0]

    def close(self) -> None:
        """Delete the base session. Never raises."""
        box, self.box = self.box, None
        if box is not None:
            box.close()
