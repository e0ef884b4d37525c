"""The node's log lines: text (the default) or one JSON object per line (``--log-format json``).

Either way a line written while a request was served names its request id
(:data:`~collimate_rl.node.request_ids.REQUEST_ID`), so the line of a failing
rollout can be found from ``err.request_id`` on the trainer's side::

    2026-12-07 21:04:11,532 WARNING collimate_rl.node.access [req_1f0c...]: POST /v1/exec 500 3.1ms
    {"time": "2026-12-07T21:04:11.532Z", "level": "WARNING", "logger": "collimate_rl.node.access",
     "message": "POST /v1/exec 500 3.1ms", "request_id": "req_1f0c...", "status": 500, ...}

>>> record = logging.LogRecord("collimate_rl.node", logging.INFO, __file__, 1, "hi %s", ("x",), None)
>>> RequestIdFilter().filter(record), record.request_id
(True, None)
>>> json.loads(JsonFormatter().format(record))["message"]
'hi x'
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any, Final

from collimate_rl.node.request_ids import REQUEST_ID

__all__ = ["JsonFormatter", "RequestIdFilter", "TextFormatter", "configure_logging"]

#: The access line's fields a JSON line carries as its own keys.
_FIELDS: Final = ("method", "path", "status", "duration_ms")
LOG_FORMATS: Final = ("text", "json")
_HANDLER_NAME: Final = "collimate-node"


class RequestIdFilter(logging.Filter):
    """Set ``record.request_id`` from the request being served (unless the line has one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = REQUEST_ID.get()
        return True


class TextFormatter(logging.Formatter):
    """``time LEVEL logger [request id]: message`` (no brackets outside a request)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(rid)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        rid = getattr(record, "request_id", None)
        record.rid = f" [{rid}]" if rid else ""
        return super().format(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC), level, logger, message, request_id, and the
    access line's method, path, status and duration_ms; a traceback under ``exc``."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.datetime.fromtimestamp(record.created, tz=datetime.timezone.utc)
        line: dict[str, Any] = {
            "time": when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None),
        }
        for key in _FIELDS:
            if hasattr(record, key):
                line[key] = getattr(record, key)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure_logging(level: str = "info", log_format: str = "text") -> None:
    """Send every log line (the node's and uvicorn's) to stderr in ``log_format``."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
    handler = logging.StreamHandler()
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in list(root.handlers):
        if old.get_name() == _HANDLER_NAME:  # ours from an earlier call; others stay
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
