"""``collimate bake NAME --image REF [--setup CMD ...]`` and ``collimate images [prune]``: a
node's images.

A bake with ``--image`` asks the node to pull the image into its store and make it a
template (after running the ``--setup`` commands once in the image's root, as its user,
with network only with ``--network``); while the node pulls, this command polls the node's
pulls under way (``GET /v1/images/pulls``) and draws their bytes as a progress bar on a
terminal.
"""

from __future__ import annotations

import argparse
import threading
from typing import Any

from collimate_rl.cli._output import OK, Output
from collimate_rl.cli._target import open_client
from collimate_rl.errors import CollimateUsageError

__all__ = ["bake_image", "images", "register"]

#: How often the progress bar asks the node how far its pull is.
_POLL_S = 0.25


def _size(n: Any) -> str:
    """Bytes for a human.

    >>> _size(1536), _size(5 << 30)
    ('1.5 KiB', '5.0 GiB')
    """
    value = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover - unreachable


def _with_progress(client: Any, out: Output, call: Any) -> Any:
    """Run ``call()`` (a bake that pulls) while drawing the node's pull progress."""
    if not out.shows_progress or not callable(getattr(client, "image_pulls", None)):
        return call()
    result: dict[str, Any] = {}

    def work() -> None:
        try:
            result["value"] = call()
        except BaseException as exc:
            result["error"] = exc

    worker = threading.Thread(target=work, name="collimate-bake", daemon=True)
    worker.start()
    with out.progress("pulling", 1) as update:
        while worker.is_alive():
            worker.join(_POLL_S)
            try:
                pulls = client.image_pulls()
            except Exception:  # the progress is a courtesy: the bake's own answer decides
                continue
            done = sum(int(p.get("done") or 0) for p in pulls.values())
            total = sum(int(p.get("total") or 0) for p in pulls.values())
            if total > 0:
                update(done, total)
    if "error" in result:
        raise result["error"]
    return result.get("value")


def bake_image(args: argparse.Namespace, client: Any, out: Output) -> int:
    """``collimate bake NAME --image REF [--setup CMD ...]``: the node pulls REF, runs the
    setup commands once in its root filesystem (the image's ``/bin/sh -c``, as its user, with
    network only with ``--network``) and serves the result as NAME."""
    if args.egress is not None or args.base != "python3":
        raise CollimateUsageError(
            "--image makes the image's root filesystem the template's: it takes no --base "
            "or --egress on this node"
        )
    setup = list(args.setup or [])
    result = _with_progress(
        client,
        out,
        lambda: client.bake_template(
            args.template_id, setup, image=args.image, network=args.network, timeout=args.timeout
        ),
    )
    if out.json_mode:
        out.emit_json(result)
    else:
        out.table(("field", "value"), list(result.items()), title=f"baked {args.template_id}")
    return OK


def images(args: argparse.Namespace, out: Output) -> int:
    """List the node's image store (``prune``: remove the images no template uses)."""
    with open_client(args, out.note) as client:
        if not callable(getattr(client, "store_images", None)):
            raise CollimateUsageError("`collimate images` lists a node's image store")
        if args.action == "prune":
            report = client.prune_images()
            if out.json_mode:
                out.emit_json(report)
            else:
                rows = [(ref, "removed") for ref in report.get("images") or []]
                rows.append(("freed", _size(report.get("freed_bytes"))))
                out.table(("image", "result"), rows, title="prune")
            return OK
        rows = client.store_images()
    if out.json_mode:
        out.emit_json({"images": rows})
        return OK
    table = [
        (
            r.get("id"),
            r.get("layers"),
            _size(r.get("size_bytes")),
            ", ".join(r.get("used_by") or []),
        )
        for r in rows
    ]
    out.table(("image", "layers", "size", "used by"), table, title=f"{len(rows)} image(s)")
    return OK


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``images`` to the ``collimate`` sub-parsers (``bake --image`` is in ``_node``)."""
    p = sub.add_parser(
        "images",
        parents=[common],
        help="the node's image store (images prune: remove the unused ones)",
    )
    p.add_argument("action", nargs="?", choices=("list", "prune"), default="list")
    p.set_defaults(run=images)
