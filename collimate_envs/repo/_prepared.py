"""A task made ready once: its pristine sandbox (the parent every fork starts from) and what grading needs.

>>> PreparedTask.__doc__.splitlines()[0]
'One task in a pristine sandbox: the parent of its agents and of its grading forks.'
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from collimate_envs.repo._base import TemplateBase
from collimate_envs.repo._patch import Changeset, PatchError, apply_patch
from collimate_envs.repo._task import RepoTask
from collimate_envs.repo._workspace import (
    Listing,
    list_files,
    read_files,
    snapshot_listing,
    write_files,
)
from collimate_rl.errors import CollimateTaskError, CollimateUsageError
from collimate_rl.sandbox import Sandbox

__all__ = ["PreparedTask", "prepare_task"]


@dataclass
class PreparedTask:
    """One task in a pristine sandbox: the parent of its agents and of its grading forks.

    The parent never runs anything of an agent's: members and grading forks are
    copy-on-write forks of it, so the pristine state stays pristine for the episode.
    """

    task: RepoTask
    parent: Sandbox
    listing: Listing
    hidden: Changeset
    template: str
    _pristine: dict[str, bytes] = field(default_factory=dict, repr=False)
    # Members grade from threads; a node refuses to fork a session that is busy forking.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def pristine_bytes(self, paths: Iterable[str]) -> dict[str, bytes]:
        """The pristine bytes of files that exist in the pristine state (read once, then cached)."""
        wanted = [p for p in paths if p in self.listing and self.listing[p][0] == "f"]
        missing = [p for p in wanted if p not in self._pristine and p not in self.task.files]
        if missing:
            with self._lock:
                self._pristine.update(read_files(self.parent, self.task.workdir, missing))
        return {p: self._pristine.get(p, self.task.files.get(p, b"")) for p in wanted}

    def fork(self, n: int) -> list[Sandbox]:
        """``n`` fresh copies of the pristine state (all or none)."""
        with self._lock:
            return self.parent.fork(n)

    def close(self) -> None:
        """Delete the parent (forks are their owners' to close). Never raises."""
        self.parent.close()


def prepare_task(base: TemplateBase, task: RepoTask, *, timeout: int = 120) -> PreparedTask:
    """Make the task's pristine sandbox (a fork of ``base``): the snapshot written, the setup
    run, the files listed.

    Raises:
        CollimateUsageError: the test patch does not apply to the repository.
        CollimateError: the sandbox could not be made (an infrastructure failure).
    """
    parent = base.fork()
    try:
        if task.files:
            write_files(parent, task.workdir, task.files, timeout=timeout)
        if task.setup_cmd:
            done = parent.exec(
                command=f"cd {shlex.quote(task.workdir)} && {task.setup_cmd}",
                timeout_seconds=timeout,
            )
            if done.exit_code != 0:
                raise CollimateTaskError(
                    f"the setup of task {task.task_id!r} failed (exit {done.exit_code})",
                    exit_code=done.exit_code,
                    output=done.stdout[-2000:],
                )
        if task.setup_cmd or not task.files:
            listing = list_files(parent, task.workdir, timeout=timeout)
        else:  # exactly what was written: the listing without an exec
            listing = snapshot_listing(task.files)
        prepared = PreparedTask(task, parent, listing, {}, base.template)
        if task.test_patch:
            try:
                touched = [p for p in task.hidden_paths if p in listing]
                prepared.hidden = apply_patch(prepared.pristine_bytes(touched), task.test_patch)
            except PatchError as exc:
                raise CollimateUsageError(
                    f"the test patch of task {task.task_id!r} does not apply: {exc}"
                ) from exc
        return prepared
    except BaseException:
        parent.close()
        raise
