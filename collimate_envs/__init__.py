"""Gymnasium environments backed by Collimate sandboxes (filled in by the env-suite work)."""

__all__: list[str] = []
