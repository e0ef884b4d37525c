"""Which template runs a task: a snapshot row's own, or one the node makes from its image.

One function decides, :func:`template_for`, so image rows start working in one place
once the node can make a template from an image reference (``client.env(ref)``).

>>> from collimate_envs.repo._task import RepoTask
>>> template_for(RepoTask("t", "fix it", files={"a.py": b""}, template="python3"))
('python3', None)
"""

from __future__ import annotations

from typing import Any

from collimate_rl.errors import CollimateNotFoundError, CollimateUsageError

__all__ = ["ImageTemplatesUnavailable", "template_for"]


class ImageTemplatesUnavailable(CollimateUsageError):
    """An image row on a node that cannot make a template from that image."""


def template_for(task: Any, client: Any = None) -> tuple[str, Any]:
    """``(template id, handle to release or None)`` for a task's sandboxes.

    A snapshot row names its template (``python3`` by default). An image row asks the
    node for a template made from its image (``client.env(image)``, released with the
    returned handle when the env closes).

    Raises:
        ImageTemplatesUnavailable: the task names an image the node cannot make a
            template from (a node without image templates).
    """
    if task.image is None:
        return str(task.template or "python3"), None
    from_image = getattr(client, "env", None)
    detail = f"this client ({type(client).__name__}) has no env()"
    if callable(from_image):
        try:
            handle = from_image(task.image)
        except CollimateNotFoundError as exc:
            detail = str(exc)
        else:
            return str(getattr(handle, "id", "") or handle), handle
    raise ImageTemplatesUnavailable(
        f"task {task.task_id!r} runs in the image {task.image!r}, and the node made no "
        f"template from it ({detail}). A node that supports image templates makes one from "
        "any image reference (client.env(ref)); or give the row a snapshot instead (a "
        "template plus repo_files or repo_archive)"
    )
