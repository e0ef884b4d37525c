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


def _no_node_bake(client: Any) -> CollimateUsageError:
    return CollimateUsageError(
        f"{type(client).__name__} cannot bake this: bakes need the gateway (GatewayClient) "
        "or a node's bake_template; on a node a bake runs over the base template given as "
        "`image` and needs Ready(cmd=...): a setup command, or with ports=[...] the server "
        "every session starts (http= waits for it; env= is baked in); or "
        "Ready(network=True) for a networked template"
    )


def _not_gateway(template_id: str) -> CollimateError:
    return CollimateError(
        f"template status needs the gateway; {template_id!r} is a built-in node template"
    )
