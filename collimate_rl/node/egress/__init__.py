"""Per-session egress for networked templates: the policy, its presets and the node's proxy.

See docs/egress.md for the model and the threat model.
"""

from collimate_rl.node.egress.entries import Entry, parse_entry
from collimate_rl.node.egress.policy import NONE, OPEN, EgressMode, EgressPolicy
from collimate_rl.node.egress.presets import PRESETS, preset_entries

__all__ = [
    "NONE",
    "OPEN",
    "PRESETS",
    "EgressMode",
    "EgressPolicy",
    "Entry",
    "parse_entry",
    "preset_entries",
]
