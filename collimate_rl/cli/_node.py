"""``health``, ``templates``, ``sessions`` and ``bake``: looking at and shaping a node."""

from __future__ import annotations

import argparse
from typing import Any

from collimate_rl.cli._egress import EGRESS_HELP, parse_egress
from collimate_rl.cli._images import bake_image
from collimate_rl.cli._output import FAILED, OK, Output
from collimate_rl.cli._target import EmbeddedNodeClient, open_client
from collimate_rl.errors import CollimateUsageError

__all__ = ["bake", "health", "register", "sessions", "templates"]

_HEALTH_FIELDS = ("status", "version", "isolation", "sessions", "running", "max_inflight", "queued")


def health(args: argparse.Namespace, out: Output) -> int:
    """Print the node's health; exit 1 unless its status is ``ok``."""
    with open_client(args, out.note) as client:
        info = client.health()
    raw = dict(info.raw) if hasattr(info, "raw") else dict(info)
    status = str(raw.get("status", ""))
    if out.json_mode:
        out.emit_json(raw)
    else:
        rows = [(k, raw[k]) for k in _HEALTH_FIELDS if k in raw]
        rows += [(k, v) for k, v in raw.items() if k not in _HEALTH_FIELDS and k != "templates"]
        rows.append(("templates", ", ".join(map(str, raw.get("templates") or ())) or None))
        out.table(("field", "value"), rows, title="node health")
    return OK if status == "ok" else FAILED


def _template_rows(client: Any) -> list[dict[str, Any]]:
    if callable(getattr(client, "templates", None)):
        ids = client.templates()
        missing = getattr(ids, "unavailable", {})  # built-in templates the node lacks, and why
        rows: list[dict[str, Any]] = [{"id": t} for t in ids]
        return rows + [{"id": t, "unavailable": why} for t, why in sorted(missing.items())]
    return [dict(t.raw) for t in client.list_templates()]  # the gateway's catalog


def templates(args: argparse.Namespace, out: Output) -> int:
    """List the templates sessions can start from, and the built-in ones this node lacks."""
    with open_client(args, out.note) as client:
        rows = _template_rows(client)
    if out.json_mode:
        out.emit_json({"templates": rows})
        return OK
    known = ("id", "name", "image", "phase", "unavailable")
    columns = [c for c in known if any(c in r for r in rows)] or ["id"]
    out.table(columns, [[r.get(c) for c in columns] for r in rows], title="templates")
    return OK


def sessions(args: argparse.Namespace, out: Output) -> int:
    """List live sessions (filtered by idle time, template); ``--reap`` deletes the listed ones.

    Exits 1 if a session to reap could not be deleted.
    """
    if args.idle_over is not None and args.idle_over < 0:
        raise CollimateUsageError("--idle-over must be >= 0 seconds")
    with open_client(args, out.note) as client:
        listed = [
            s
            for s in client.list_sessions()
            if (args.idle_over is None or s.idle_secs >= args.idle_over)
            and (args.template is None or s.template_id == args.template)
        ]
        deleted = (
            {s.session_id: client.delete_session(s.session_id).deleted for s in listed}
            if args.reap
            else {}
        )
    # The typed fields win over raw keys: gateway rows name them ``id``/``template``.
    rows = [{**s.raw, "session_id": s.session_id, "template_id": s.template_id} for s in listed]
    for row in rows:
        if args.reap:
            row["deleted"] = deleted.get(row["session_id"], False)
    if out.json_mode:
        out.emit_json({"sessions": rows})
    else:
        columns = ["session_id", "template_id", "age_secs", "idle_secs", "exec_count"]
        columns += ["deleted"] if args.reap else []
        table_rows = [[_fmt(r.get(c)) for c in columns] for r in rows]
        out.table(columns, table_rows, title=f"{len(rows)} session(s)")
    return OK if all(deleted.values()) else FAILED


def _fmt(value: Any) -> Any:
    return f"{value:.1f}" if isinstance(value, float) else value


def bake(args: argparse.Namespace, out: Output) -> int:
    """Bake setup commands over a base template into a new template (a node feature)."""
    with open_client(args, out.note) as client:
        if not callable(getattr(client, "bake_template", None)):
            raise CollimateUsageError(
                "`collimate bake` bakes on a node; on the gateway bake an image with "
                "collimate_rl.Template.bake(client, name=..., image=..., ready=Ready(...), width=...)"
            )
        if isinstance(client, EmbeddedNodeClient):  # not a node from --url or the environment
            out.note("note: the template lives only as long as this command's local node")
        if args.image is not None:
            return bake_image(args, client, out)
        if not args.setup and not args.network:
            raise CollimateUsageError("give at least one --setup command (or --network)")
        egress = parse_egress(args.egress) if args.egress is not None else None
        result = client.bake_template(
            args.template_id,
            args.setup or [],
            base=args.base,
            network=args.network,
            timeout=args.timeout,
            egress=egress,
        )
    if out.json_mode:
        out.emit_json(result)
    else:
        out.table(("field", "value"), list(result.items()), title=f"baked {args.template_id}")
    return OK


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the commands to the ``collimate`` sub-parsers."""
    p = sub.add_parser("health", parents=[common], help="the node's health (exit 1 unless ok)")
    p.set_defaults(run=health)
    p = sub.add_parser("templates", parents=[common], help="list the templates")
    p.set_defaults(run=templates)
    p = sub.add_parser(
        "sessions", parents=[common], help="list live sessions (--reap deletes the listed ones)"
    )
    p.add_argument(
        "--idle-over", type=float, metavar="SECONDS", help="only sessions idle this long"
    )
    p.add_argument("--template", metavar="ID", help="only sessions of this template")
    p.add_argument("--reap", action="store_true", help="delete the listed sessions")
    p.set_defaults(run=sessions)
    p = sub.add_parser(
        "bake",
        parents=[common],
        help="bake a custom template from setup commands or an OCI image (--image)",
        description="Run setup commands once over a base template (or in an OCI image's root "
        "filesystem, --image) and serve the result as a new template (the local node's "
        "extension).",
    )
    p.add_argument("template_id", help="the new template's id")
    p.add_argument(
        "--setup",
        action="append",
        metavar="CMD",
        help="a shell command to run (repeat for several, run in order); with --image, run by "
        "the image's /bin/sh as the image's user",
    )
    p.add_argument("--base", default="python3", help="the template to start from (default python3)")
    p.add_argument(
        "--image",
        metavar="REF",
        help="an OCI image instead of a base: the node pulls it (host/repo:tag, oci:DIR[:tag], "
        "oci-archive:FILE, docker-archive:FILE) and its root filesystem is every session's /",
    )
    p.add_argument(
        "--network",
        action="store_true",
        help="a networked template (its sessions take --egress policies); the setup runs "
        "with network too",
    )
    p.add_argument(
        "--egress", metavar="POLICY", help="the template's default policy; " + EGRESS_HELP
    )
    p.add_argument("--timeout", type=float, default=900.0, help="seconds the bake may take")
    p.set_defaults(run=bake)
