"""The snapshot's JSON schema and its typed records say the same: the same fields, the same JSON
types, and every field a record cannot do without required by the schema."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any

import pytest

from specwatch.bench.snapshot import schema
from specwatch.core.identity import ServerIdentity
from specwatch.core.snapshot_records import BenchConfig, Snapshot

LEGACY = {"sm_clock_max_mhz"}
"""Properties only older schema versions write (read into a field of another name)."""
IN_MEMORY_ONLY = {"snapshot.server.dialect": "null"}
"""JSON types a record holds only in memory (a recorded range whose server never answered)."""
OWN_FORMAT: set[type[Any]] = {ServerIdentity}
"""Records written in their own format (``specwatch.core.identity.to_json``)."""


def _node(node: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    out: Mapping[str, Any] = schema()["$defs"][ref.rsplit("/", 1)[1]]
    return out


def _schema_types(node: Mapping[str, Any]) -> set[str]:
    node = _node(node)
    if "oneOf" in node:
        return set().union(*(_schema_types(n) for n in node["oneOf"]))
    if "enum" in node or "const" in node:
        values = node.get("enum", [node.get("const")])
        names = {bool: "boolean", int: "integer", str: "string", type(None): "null"}
        return {names[type(v)] for v in values}
    kind = node.get("type")
    return {kind} if isinstance(kind, str) else set(kind or ())


def _json_types(tp: Any) -> set[str]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return set().union(*(_json_types(a) for a in typing.get_args(tp)))
    origin = typing.get_origin(tp) or tp
    if dataclasses.is_dataclass(origin) or origin in (dict, Mapping):
        return {"object"}
    names = {
        type(None): "null",
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        tuple: "array",
        list: "array",
    }
    return {names[origin]}


def _pairs(cls: type[Any], node: Mapping[str, Any], where: str) -> list[tuple[str, Any, Any]]:
    """Every (where, dataclass, schema node) pair below ``cls``."""
    out = [(where, cls, node)]
    hints = typing.get_type_hints(cls)
    props = _node(node).get("properties", {})
    for f in dataclasses.fields(cls):
        tp, sub = hints[f.name], props.get(f.name, {})
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        if typing.get_origin(tp) is tuple:
            tp, sub = typing.get_args(tp)[0], _node(sub).get("items", {})
        if dataclasses.is_dataclass(tp) and tp not in OWN_FORMAT and sub:
            sub_node = next((n for n in _node(sub).get("oneOf", [sub]) if "$ref" in n), sub)
            out += _pairs(tp, sub_node, f"{where}.{f.name}")  # type: ignore[arg-type]
    return out


PAIRS = _pairs(Snapshot, schema(), "snapshot")


@pytest.mark.parametrize(("where", "cls", "node"), PAIRS, ids=[p[0] for p in PAIRS])
def test_records_and_schema_agree(where: str, cls: type[Any], node: Mapping[str, Any]) -> None:
    node = _node(node)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    props = node.get("properties", {})
    assert set(props) - LEGACY == set(fields), where
    required = set(node.get("required", ()))
    assert required <= set(fields), where
    no_default = {
        name
        for name, f in fields.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    assert no_default <= required, f"{where}: fields a snapshot must hold"
    hints = typing.get_type_hints(cls)
    for name, f in fields.items():
        if name == "config":
            continue
        want = _schema_types(props[name])
        # A field that defaults to None may instead be absent.
        absent = f.default is None and "null" not in want
        have = _json_types(hints[name]) - ({"null"} if absent else set())
        have.discard(IN_MEMORY_ONLY.get(f"{where}.{name}", ""))
        assert have == want, f"{where}.{name}"


def test_config_is_a_bench_config_and_where_the_prompts_came_from() -> None:
    props = schema()["properties"]["config"]["properties"]
    hints = typing.get_type_hints(BenchConfig)
    assert set(props) == {f.name for f in dataclasses.fields(BenchConfig)} | {"prompts_source"}
    for name, tp in hints.items():
        assert _json_types(tp) == _schema_types(props[name]), name
