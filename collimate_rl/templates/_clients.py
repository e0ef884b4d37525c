"""Which way a client handles templates: the gateway bakes, our node bakes, or neither."""

from __future__ import annotations

from typing import Any

from collimate_rl.errors import CollimateError, CollimateUsageError


def _is_gateway(client: Any) -> bool:
    return callable(getattr(client, "expect_width", None)) and callable(
        getattr(client, "create_template", None)
    )


def _on_node(client: Any) -> bool:
    """A client of our local node (it bakes synchronously through ``bake_template``)."""
    return hasattr(client, "bake_template") and not _is_gateway(client)


def _looks_like_image(ref: str) -> bool:
    """Whether ``ref`` names an OCI image rather than a template id: a registry reference
    with a repository path, tag or digest (``python:3.12-slim``, ``ghcr.io/o/r``,
    ``repo@sha256:...``) or a local one (``oci:DIR``, ``oci-archive:``, ``docker-archive:``).

    >>> [_looks_like_image(r) for r in ("python3", "python:3.12", "oci:/srv/img", "a/b")]
    [False, True, True, True]
    """
    return any(ch in ref for ch in ":/@")


def image_template_id(ref: str) -> str:
    """The id our node gives the template it makes of the image ``ref`` (``client.env``):
    readable, valid as an id, and distinct per reference.

    >>> image_template_id("python:3.12-slim")
    'img-python-3.12-slim-1d044754'
    """
    import hashlib
    import re

    tail = re.sub(r"[^A-Za-z0-9._-]+", "-", ref.rsplit("/", 1)[-1]).strip("-.") or "image"
    return f"img-{tail[:44]}-{hashlib.sha256(ref.encode()).hexdigest()[:8]}"


def _no_node_bake(client: Any) -> CollimateUsageError:
    return CollimateUsageError(
        f"{type(client).__name__} cannot bake this: bakes need the gateway (GatewayClient) "
        "or a node's bake_template; on a node `image` is an OCI image reference (the "
        "template's root filesystem), or a base template the bake runs over, which needs "
        "Ready(cmd=...): a setup command, or with ports=[...] the server every session "
        "starts (http= waits for it; env= is baked in); or Ready(network=True) for a "
        "networked template"
    )


def _not_gateway(template_id: str) -> CollimateError:
    return CollimateError(
        f"template status needs the gateway; {template_id!r} is a built-in node template"
    )
