"""An agent's action, read into one tool call: OpenAI function-call JSON, or raw text with one bash block.

Two protocols are accepted:

* OpenAI-style function calls, ``{"name": ..., "arguments": {...}}`` (``arguments`` may be a
  JSON string, as the API sends it; a ``{"type": "function", "function": {...}}`` tool-call
  item works too), as a dict or as a JSON string;
* a model's raw text holding exactly one fenced ``bash`` (or ``sh``) block, mini-swe-agent's
  protocol; the block runs as a ``bash`` call, and a block whose first line is
  ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` submits.

Anything else is an :class:`ActionError`, which the env shows the agent as an observation.

>>> parse_action({"name": "bash", "arguments": '{"command": "ls"}'})
ToolCall(name='bash', arguments={'command': 'ls'})
>>> parse_action("I will look around.\\n```bash\\nls -la\\n```")
ToolCall(name='bash', arguments={'command': 'ls -la'})
>>> parse_action("```bash\\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\\n```").name
'submit'
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TOOLS", "TOOL_NAMES", "ActionError", "ToolCall", "parse_action"]

SUBMIT_PHRASES = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
_FENCE = re.compile(r"```(?:bash|sh)[ \t]*\n(.*?)\n?```", re.S)

EDITOR_COMMANDS = ("view", "create", "str_replace", "insert", "undo_edit")

#: The tools in OpenAI's function format (``env.unwrapped.tools``).
TOOLS: tuple[dict[str, Any], ...] = (
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": (
                "Run a bash command in the repository's folder and return its output (stdout "
                "and stderr merged) and exit code. Each call starts a fresh shell there: `cd` "
                "and variables do not carry over; files do."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "the command to run"},
                    "timeout": {
                        "type": "integer",
                        "description": "seconds before the command is killed (capped by the env)",
                    },
                },
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "str_replace_editor",
            "description": (
                "View, create and edit files. `view` shows a file with line numbers (or a "
                "folder's files two levels deep); `create` writes a new file; `str_replace` "
                "replaces `old_str`, which must occur exactly once, with `new_str`; `insert` "
                "puts `new_str` after line `insert_line` (0: at the top); `undo_edit` reverts "
                "the last edit of `path`. Paths are absolute or relative to the repository."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "enum": list(EDITOR_COMMANDS)},
                    "path": {"type": "string"},
                    "file_text": {"type": "string", "description": "`create`: the content"},
                    "old_str": {
                        "type": "string",
                        "description": "`str_replace`: the text to replace",
                    },
                    "new_str": {
                        "type": "string",
                        "description": "`str_replace`, `insert`: the new text",
                    },
                    "insert_line": {"type": "integer", "description": "`insert`: after this line"},
                    "view_range": {
                        "type": "array",
                        "items": {"type": "integer"},
                        "description": "`view`: [first, last] line (last -1: to the end)",
                    },
                },
                "required": ["command", "path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Submit the repository as it is now; the episode ends and is graded.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
)
TOOL_NAMES = tuple(tool["function"]["name"] for tool in TOOLS)


class ActionError(ValueError):
    """An action the env cannot run; its message is shown to the agent."""


@dataclass(frozen=True)
class ToolCall:
    """One parsed call: a tool name and its arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """``{"name", "arguments"}`` (what ``info["tool_call"]`` holds)."""
        return {"name": self.name, "arguments": dict(self.arguments)}


def _from_call(call: Mapping[str, Any]) -> ToolCall:
    if "function" in call and isinstance(call["function"], Mapping):
        call = call["function"]
    name = call.get("name")
    if not isinstance(name, str) or not name:
        raise ActionError('a tool call needs a "name" (one of ' + ", ".join(TOOL_NAMES) + ")")
    raw = call.get("arguments", {})
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise ActionError(f"the arguments of {name!r} are not valid JSON: {exc.msg}") from exc
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ActionError(f"the arguments of {name!r} must be a JSON object")
    if name not in TOOL_NAMES:
        raise ActionError(f"unknown tool {name!r}; the tools are " + ", ".join(TOOL_NAMES))
    return _checked(ToolCall(name, dict(raw)))


def _checked(call: ToolCall) -> ToolCall:
    args = call.arguments
    if call.name == "bash":
        if not isinstance(args.get("command"), str) or not args["command"].strip():
            raise ActionError('bash needs a non-empty "command" string')
        timeout = args.get("timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
        ):
            raise ActionError('bash\'s "timeout" must be a positive number of seconds')
        first = args["command"].strip().split("\n", 1)[0]
        if first.startswith("echo") and any(phrase in first for phrase in SUBMIT_PHRASES):
            return ToolCall("submit", {})
    elif call.name == "str_replace_editor":
        if args.get("command") not in EDITOR_COMMANDS:
            raise ActionError(
                'str_replace_editor needs "command", one of ' + ", ".join(EDITOR_COMMANDS)
            )
        if not isinstance(args.get("path"), str) or not args["path"]:
            raise ActionError('str_replace_editor needs a "path"')
    return call


def parse_action(action: Any) -> ToolCall:
    """The tool call an action makes (see the module docstring).

    Raises:
        ActionError: the action names no tool, an unknown one, bad arguments, or raw text
            with no bash block or more than one.
    """
    if isinstance(action, Mapping):
        return _from_call(action)
    if isinstance(action, bytes):
        action = action.decode("utf-8", "replace")
    if not isinstance(action, str):
        raise ActionError(
            f"an action is a tool call (a dict or JSON) or text, not {type(action).__name__}"
        )
    text = action.strip()
    if text.startswith("{"):
        try:
            decoded = json.loads(text)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, Mapping):
            return _from_call(decoded)
    blocks = _FENCE.findall(action)
    if len(blocks) != 1:
        found = "no" if not blocks else str(len(blocks))
        raise ActionError(
            f"found {found} bash blocks; reply with exactly one ```bash block (or a tool call "
            'as JSON: {"name": ..., "arguments": {...}})'
        )
    return _checked(ToolCall("bash", {"command": blocks[0]}))
