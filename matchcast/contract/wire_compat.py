"""Whether one wire schema only widens another: the rule a minor version keeps.

:func:`additive_problems` compares two snapshots (as :func:`~matchcast.contract.wire_schema.
wire_schema` writes them) and lists every place where the newer one could refuse, or read
differently, a payload the older one accepts: a field removed or made required, an enum value
or event type removed, a constraint tightened, a type or default changed. An empty list means
the change is additive: a new optional field, event type, enum value or shared type, a looser
constraint.

The check is conservative: whatever it does not recognise as a widening it reports, so a
false alarm is possible (a model class renamed reads as a type removed), a missed narrowing is
not, within the keywords pydantic writes. What it cannot see is a field that keeps its name and
type but changes meaning; docs/wire-format.md says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["additive_problems"]

#: A new value may be lower than the old one, or the keyword may go.
_LOWER_BOUNDS = frozenset({"minimum", "exclusiveMinimum", "minLength", "minItems"})
#: A new value may be higher than the old one, or the keyword may go.
_UPPER_BOUNDS = frozenset({"maximum", "exclusiveMaximum", "maxLength", "maxItems"})
#: Keywords that may go: each only narrows what its schema accepts.
_DROPPABLE = frozenset({"pattern", "format", "required"}) | _LOWER_BOUNDS | _UPPER_BOUNDS
#: Keywords whose value is one schema.
_ONE_SCHEMA = frozenset({"items", "propertyNames"})


def additive_problems(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Where ``new`` is not an additive change of ``old`` (two snapshots); empty if it is.

    Each problem is a JSON path in the snapshot and what happened there, e.g.
    ``/event/$defs/Goal/required: scorer2 is now required``.
    """
    problems: list[str] = []
    for part in ("event", "state"):
        problems += _compare(_no_version_default(old[part]), _no_version_default(new[part]), part)
    return [f"/{p}" for p in problems]


def _no_version_default(schema: Any) -> Any:
    """``schema`` without the default of ``schema_version``: it is the writer's own version,
    so it changes with every version and says nothing about what a reader accepts."""
    if isinstance(schema, list):
        return [_no_version_default(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _no_version_default(v) for k, v in schema.items()}
    props = out.get("properties")
    if isinstance(props, dict) and isinstance(props.get("schema_version"), dict):
        props["schema_version"] = {
            k: v for k, v in props["schema_version"].items() if k != "default"
        }
    return out


def _compare(old: Any, new: Any, path: str) -> list[str]:
    """Where the schema ``new`` refuses or rereads what ``old`` accepts."""
    if old == new:
        return []
    if not isinstance(old, dict) or not isinstance(new, dict):
        return [f"{path} changed: {old!r} -> {new!r}"]
    if "anyOf" in new and "anyOf" not in old:  # a type widened to a union of it and others
        return _into_union(old, new, path)
    problems: list[str] = []
    for key in sorted(set(old) | set(new)):
        here = f"{path}/{key}"
        if key not in new:
            if key not in _DROPPABLE:
                problems.append(f"{here} removed: {old[key]!r}")
        elif key not in old:
            if key != "default":  # a required field given a default; "required" says the rest
                problems.append(f"{here} added: {new[key]!r}")
        elif old[key] != new[key]:
            problems += _keyword(key, old, new, here)
    return problems


def _into_union(old: dict[str, Any], new: dict[str, Any], path: str) -> list[str]:
    core = {k: v for k, v in old.items() if k != "default"}
    problems = []
    if not any(not _compare(core, branch, path) for branch in new["anyOf"]):
        problems.append(f"{path}: no branch of the new anyOf accepts the old {core!r}")
    if "default" in old and new.get("default") != old["default"]:
        problems.append(f"{path}/default changed: {old['default']!r} -> {new.get('default')!r}")
    return problems


def _keyword(key: str, old: dict[str, Any], new: dict[str, Any], here: str) -> list[str]:
    """One keyword present in both, with different values."""
    o, n = old[key], new[key]
    if key in _LOWER_BOUNDS:
        return [] if n <= o else [f"{here} raised: {o!r} -> {n!r}"]
    if key in _UPPER_BOUNDS:
        return [] if n >= o else [f"{here} lowered: {o!r} -> {n!r}"]
    if key == "enum":
        gone = [v for v in o if v not in n]
        return [f"{here}: {v!r} removed" for v in gone]
    if key == "required":
        return [f"{here}: {name} is now required" for name in n if name not in o]
    if key == "type":
        return [] if (o, n) == ("integer", "number") else [f"{here} changed: {o!r} -> {n!r}"]
    if key in {"properties", "$defs", "patternProperties"}:
        return _named_schemas(key, old, new, here)
    if key in {"anyOf", "oneOf"}:
        return [
            f"{here}: {branch!r} no longer accepted"
            for branch in o
            if not any(not _compare(branch, b, here) for b in n)
        ]
    if key == "discriminator":
        return _discriminator(o, n, here)
    if key == "additionalProperties":
        if o is False or n is True:
            return []
        if isinstance(o, dict) and isinstance(n, dict):
            return _compare(o, n, here)
        return [f"{here} changed: {o!r} -> {n!r}"]
    if key in _ONE_SCHEMA:
        return _compare(o, n, here)
    return [f"{here} changed: {o!r} -> {n!r}"]


def _named_schemas(key: str, old: dict[str, Any], new: dict[str, Any], here: str) -> list[str]:
    """``properties``, ``$defs`` or ``patternProperties``: each old one kept and widened; a new
    property only where the old object took no other (``additionalProperties: false``)."""
    o, n = old[key], new[key]
    problems = []
    for name, schema in o.items():
        if name not in n:
            problems.append(f"{here}/{name} removed")
        else:
            problems += _compare(schema, n[name], f"{here}/{name}")
    added = [name for name in n if name not in o]
    closed = old.get("additionalProperties", True) is False
    if key == "patternProperties" or (key == "properties" and not closed):
        problems += [f"{here}/{name} added where other keys were already taken" for name in added]
    return problems


def _discriminator(o: dict[str, Any], n: dict[str, Any], here: str) -> list[str]:
    old_name, new_name = o.get("propertyName"), n.get("propertyName")
    if old_name != new_name:
        return [f"{here}/propertyName changed: {old_name!r} -> {new_name!r}"]
    old_map, new_map = o.get("mapping", {}), n.get("mapping", {})
    return [
        f"{here}/mapping/{tag} {'removed' if tag not in new_map else 'changed'}"
        for tag, target in old_map.items()
        if new_map.get(tag) != target
    ]
