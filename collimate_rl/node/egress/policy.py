"""The egress policy: a typed value, validated once at the node's boundary.

The contract's shapes (``egress=`` on ``create_session``, ``exec_once``, a bake):

==========================================  =====================================
``{"mode": "open"}``                        anything public (the default on a
                                            networked template)
``{"mode": "none"}``                        nothing
``{"allow": [...]}``                        only these (``mode: "allowlist"``)
``{"deny": [...]}``                         anything public but these
``{"preset": "rl-leakage"}``                a named denylist (``presets/``); may be
                                            combined with ``deny``
==========================================  =====================================

``mode`` may be given with the keys it implies; anything contradictory (both
``allow`` and ``deny``, ``mode: "open"`` with an ``allow`` list, empty or not),
an unknown key, mode or preset, or a malformed entry is a validation error
whose location names the field (``egress.allow.2``). Entries are described in
:mod:`collimate_rl.node.egress.entries`.

>>> EgressPolicy.model_validate({"allow": ["PyPI.org", "10.20.0.0/16"]}).to_wire()
{'mode': 'allowlist', 'allow': ['pypi.org', '10.20.0.0/16']}
>>> EgressPolicy.model_validate({"preset": "rl-leakage"}).describe()
'denylist (preset rl-leakage)'
>>> EgressPolicy.model_validate({"mode": "open", "allow": []})
Traceback (most recent call last):
...
pydantic_core._pydantic_core.ValidationError: 1 validation error for EgressPolicy
  mode 'open' takes no allow, deny or preset ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, model_validator
from pydantic_core import PydanticCustomError

from collimate_rl.node.egress.entries import Entry, parse_entry
from collimate_rl.node.egress.presets import PRESETS, preset_entries

__all__ = ["MAX_ENTRIES", "NONE", "OPEN", "EgressMode", "EgressPolicy"]

EgressMode = Literal["open", "none", "allowlist", "denylist"]
_MODES: Final = ("open", "none", "allowlist", "denylist")
_KEYS: Final = frozenset({"mode", "allow", "deny", "preset"})
#: The longest allow or deny list accepted.
MAX_ENTRIES: Final = 4096


def _entry_text(value: str) -> str:
    try:
        return parse_entry(value).text
    except ValueError as exc:
        raise PydanticCustomError("egress_entry", str(exc)) from None


def _preset(value: str) -> str:
    if value not in PRESETS:
        raise PydanticCustomError(
            "egress_preset", f"unknown preset {value!r}; known: {', '.join(PRESETS)}"
        )
    return value


EntryText = Annotated[str, AfterValidator(_entry_text)]


def _refuse(message: str) -> PydanticCustomError:
    return PydanticCustomError("egress_policy", message)


class EgressPolicy(BaseModel):
    """One egress policy (immutable). Build it with ``EgressPolicy.model_validate(dict)``.

    Attributes:
        mode: ``open``, ``none``, ``allowlist`` or ``denylist`` (derived from
            the keys when not given).
        allow: the allowlist's entries, canonical (``allowlist`` only).
        deny: the denylist's own entries, canonical (``denylist`` only).
        preset: a named denylist merged into ``deny`` (``denylist`` only).

    >>> OPEN.mode, NONE.to_wire()
    ('open', {'mode': 'none'})
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: EgressMode
    allow: list[EntryText] = Field(default_factory=list, max_length=MAX_ENTRIES)
    deny: list[EntryText] = Field(default_factory=list, max_length=MAX_ENTRIES)
    preset: Annotated[str, AfterValidator(_preset)] | None = None

    _allow_rules: tuple[Entry, ...] = PrivateAttr(default=())
    _deny_rules: tuple[Entry, ...] = PrivateAttr(default=())

    @model_validator(mode="before")
    @classmethod
    def _derive_mode(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data  # pydantic reports the wrong type
        unknown = sorted(str(key) for key in data if key not in _KEYS)
        if unknown:
            raise _refuse(
                f"unknown key {', '.join(map(repr, unknown))} "
                "(a policy has mode, allow, deny and preset)"
            )
        given = {key for key in ("allow", "deny", "preset") if data.get(key) is not None}
        if "allow" in data and data["allow"] is not None:
            given.add("allow")  # an empty allowlist still counts as one
        mode = data.get("mode")
        if mode is not None and mode not in _MODES:
            return data  # the field's own error names the valid modes
        if "allow" in given and given & {"deny", "preset"}:
            raise _refuse("allow cannot be combined with deny or preset: pick one list")
        if mode in ("open", "none") and given:
            raise _refuse(
                f"mode {mode!r} takes no allow, deny or preset ({', '.join(sorted(given))} given)"
            )
        if mode == "allowlist" and "allow" not in given:
            raise _refuse("mode 'allowlist' needs an allow list")
        if mode == "denylist" and not given & {"deny", "preset"}:
            raise _refuse("mode 'denylist' needs a deny list or a preset")
        if mode is None:
            if not given:
                raise _refuse("give a mode ('open' or 'none'), an allow or deny list, or a preset")
            mode = "allowlist" if "allow" in given else "denylist"
        return {**data, "mode": mode}

    def model_post_init(self, context: Any, /) -> None:
        self._allow_rules = tuple(parse_entry(text) for text in dict.fromkeys(self.allow))
        deny = {text: parse_entry(text) for text in self.deny}
        if self.preset is not None:
            for entry in preset_entries(self.preset):
                deny.setdefault(entry.text, entry)
        self._deny_rules = tuple(deny.values())

    @property
    def allow_rules(self) -> tuple[Entry, ...]:
        """The parsed allowlist (empty unless ``allowlist``)."""
        return self._allow_rules

    @property
    def deny_rules(self) -> tuple[Entry, ...]:
        """The parsed denylist, the preset's entries included (empty unless ``denylist``)."""
        return self._deny_rules

    def to_wire(self) -> dict[str, Any]:
        """The canonical JSON form (what the node reports and a manifest records).

        >>> EgressPolicy.model_validate({"deny": ["X.com"], "preset": "rl-leakage"}).to_wire()
        {'mode': 'denylist', 'deny': ['x.com'], 'preset': 'rl-leakage'}
        """
        body: dict[str, Any] = {"mode": self.mode}
        if self.mode == "allowlist":
            body["allow"] = list(self.allow)
        if self.deny:
            body["deny"] = list(self.deny)
        if self.preset is not None:
            body["preset"] = self.preset
        return body

    def describe(self) -> str:
        """A short human description, used in refusals.

        >>> EgressPolicy.model_validate({"allow": ["a.org", "b.org"]}).describe()
        'allowlist (2 entries)'
        """
        if self.mode == "allowlist":
            return f"allowlist ({_count(len(self.allow))})"
        if self.mode == "denylist":
            parts = [f"preset {self.preset}"] if self.preset is not None else []
            if self.deny:
                parts.append(_count(len(self.deny)))
            return f"denylist ({' + '.join(parts)})"
        return self.mode


def _count(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


#: Anything public: the default on a networked template.
OPEN: Final = EgressPolicy(mode="open")
#: Nothing at all.
NONE: Final = EgressPolicy(mode="none")
