"""Baking and watching a template, written once as operations (generators of client calls).

The sync classes in :mod:`._handles` drive them with blocking calls, the async
twins await them (see :mod:`collimate_rl.wire._operations`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from collimate_rl.errors import CollimateNotFoundError, GatewayError
from collimate_rl.templates._clients import _is_gateway, _looks_like_image, _no_node_bake
from collimate_rl.templates._ready import Ready
from collimate_rl.templates._status import TemplateBakeFailed, TemplateStatus
from collimate_rl.wire._operations import ClientCall, Op, Sleep, field_of


@dataclass(frozen=True)
class _HandleInfo:
    id: str
    name: str = ""
    image: str = ""
    declared: int = 0
    bake_mode: str = ""
    on_node: bool = False  # a local-node template: baked synchronously, live once it exists


def _node_bake_op(
    client: Any, *, name: str, image: str, ready: Ready | None, width: int
) -> Op[_HandleInfo]:
    """The local node's bake (``POST /v1/templates``): synchronous, so live on return.

    The node reads the gateway's ReadySpec: with ``ports``, ``cmd`` is a server
    each session runs (the node bridges the ports: ``endpoints``); without,
    ``cmd`` is a setup command run once, like the gateway's ``WARM_CMD``.
    ``network`` makes the template networked (its sessions take ``egress=``
    policies, docs/egress.md) and gives the setup network.

    An ``image`` the node does not serve as a template but that reads as an OCI image
    reference (``_looks_like_image``): the node pulls it and makes its root filesystem the
    template's, read as over a base: ``ready.cmd`` without ports is a setup command, run
    once in the image's root (the image's ``/bin/sh -c``, as its user), with ``ports`` a
    server each session runs, ``network`` the setup's network and the template's. A
    template of that name already there is kept (the gateway's bake tolerates
    AlreadyExists too).
    """
    if hasattr(client, "bake_template") and _looks_like_image(image):
        served = [str(t) for t in (yield ClientCall("templates", ()))]
        if image not in served:
            if name not in served:
                wire = (ready.to_wire() if ready is not None else None) or {}
                kw: dict[str, Any] = {"image": image}
                if wire.pop("network", False):
                    kw["network"] = True
                if wire:
                    kw["ready"] = wire  # (the node reads cmd without ports as a setup command)
                yield ClientCall("bake_template", (name, []), kw)
            return _HandleInfo(
                id=name, name=name, image=image, declared=width, bake_mode="built", on_node=True
            )
    if not hasattr(client, "bake_template") or ready is None or not (ready.cmd or ready.network):
        raise _no_node_bake(client)
    spec = ready.to_wire() or {}
    network = bool(spec.pop("network", False))
    if ready.ports:
        yield ClientCall(
            "bake_template", (name, []), {"base": image, "network": network, "ready": spec}
        )
    else:
        if ready.http:
            raise _no_node_bake(client)
        extra = {"ready": {"env": spec["env"]}} if "env" in spec else {}
        setup = [ready.cmd] if ready.cmd else []  # Ready(network=True) alone: a networked twin
        yield ClientCall(
            "bake_template", (name, setup), {"base": image, "network": network, **extra}
        )
    return _HandleInfo(
        id=name, name=name, image=image, declared=width, bake_mode="built", on_node=True
    )


def _backfill(status: TemplateStatus, info: _HandleInfo) -> TemplateStatus:
    return replace(
        status,
        id=status.id or info.id,
        name=status.name or info.name,
        image=status.image or info.image,
        declared=status.declared or info.declared,
        bake_mode=status.bake_mode or info.bake_mode,
    )


def _status_op(info: _HandleInfo) -> Op[TemplateStatus]:
    if info.on_node:
        known = yield ClientCall("templates", ())
        live = info.id in list(known)
        return TemplateStatus(
            id=info.id,
            name=info.name or info.id,
            image=info.image,
            phase="Live" if live else "Failed",
            declared=info.declared,
            converge_state="converged" if live else "converging",
            bake_mode=info.bake_mode,
            error="" if live else f"template {info.id!r} is not on this node",
        )
    resp = yield ClientCall("get_template", (info.id,))
    return _backfill(TemplateStatus.from_response(resp), info)


def _wait_op(
    info: _HandleInfo,
    timeout: float,
    poll_interval: float,
    on_update: Callable[[TemplateStatus], None] | None,
    fail_fast: bool,
) -> Op[TemplateStatus]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            status = yield from _status_op(info)
        except GatewayError as exc:
            if exc.error_code != "not_found":
                raise
            gone = TemplateStatus(
                id=info.id, phase="Failed", error="template not found during bake"
            )
            raise TemplateBakeFailed(
                f"template {info.id} bake FAILED: template not found during bake", gone
            ) from exc
        if on_update is not None:
            on_update(status)
        if status.converged:
            return status
        if fail_fast and status.failed:
            detail = status.error or "no error detail from fleet"
            raise TemplateBakeFailed(
                f"template {info.id} bake FAILED after {max(status.build_fails, 1)} "
                f"attempt(s): {detail}",
                status,
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(
                f"template {info.id} did not converge to width {status.declared} within "
                f"{timeout}s (phase={status.phase}, warm={status.warm}, frozen={status.frozen})"
            )
        yield Sleep(min(poll_interval, remaining))


def _bake_op(
    client: Any, *, name: str, image: str, ready: Ready | None, width: int, cold_fraction: int
) -> Op[_HandleInfo]:
    if not _is_gateway(client):
        return (yield from _node_bake_op(client, name=name, image=image, ready=ready, width=width))
    resp = yield ClientCall(
        "create_template",
        (),
        {
            "name": name,
            "image": image,
            "ready": ready,
            "width": width,
            "cold_fraction": cold_fraction,
        },
    )
    tid = str(field_of(resp, "id", "") or "")
    if not tid:
        raise GatewayError(f"create_template for {name!r} returned no id: {resp!r}")
    return _HandleInfo(
        id=tid,
        name=str(field_of(resp, "name", "") or name),
        image=str(field_of(resp, "image", "") or image),
        declared=width,
        bake_mode=str(field_of(resp, "bake_mode", "") or ""),
    )


def _attach_op(info: _HandleInfo) -> Op[_HandleInfo]:
    """What a handle on an existing template needs; raises if there is no such template."""
    status = yield from _status_op(info)
    if info.on_node and not status.converged:  # the gateway's GET answers 404 by itself
        raise CollimateNotFoundError(
            f"this node has no template {info.id!r}", status=404, error_code="no_template"
        )
    return replace(
        info,
        name=status.name,
        image=status.image,
        declared=status.declared,
        bake_mode=status.bake_mode,
    )
