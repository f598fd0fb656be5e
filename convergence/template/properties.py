"""Resource types as templates see them: property and attribute schemas, and their checks.

A plugin declares a :class:`TypeSchema`; validation looks types up through a
:class:`TypeCatalog` (the plugin registry implements it) and checks each resource's properties
with :func:`check_properties`. Property types and coercions follow Heat's (``String``,
``Integer``, ``Number``, ``Boolean``, ``List``, ``Map``, ``Any``), so templates stay portable.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from convergence.template.conversions import bool_from_string
from convergence.template.dependencies import ImplicitRule
from convergence.template.errors import PROPERTY, Path, Problems
from convergence.template.functions.base import has_calls

STRING, INTEGER, NUMBER, BOOLEAN, LIST, MAP, ANY = (
    "String", "Integer", "Number", "Boolean", "List", "Map", "Any")


@dataclass(frozen=True, slots=True)
class PropertySchema:
    """One property of a resource type (or an entry of a nested map/list schema)."""

    type: str = STRING
    description: str = ""
    required: bool = False
    default: Any = None
    update_allowed: bool = False
    immutable: bool = False
    allowed_values: tuple[Any, ...] = ()
    min: float | None = None  # range for numbers, length for strings, lists and maps
    max: float | None = None
    pattern: str | None = None
    custom_constraint: str | None = None
    schema: Mapping[str, PropertySchema] | None = None  # Map: the keys it may have
    item: PropertySchema | None = None  # List: the schema of each item
    # A reference to a resource of the same stack of one of these types (a wait condition's
    # handle): validation refuses a ``get_resource`` of another type; the plugin resolves any
    # other value within its stack when it runs.
    resource_types: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TypeSchema:
    """What a resource type accepts and offers."""

    name: str
    properties: Mapping[str, PropertySchema] | None = field(default_factory=dict)
    # None: accepts any properties (OS::Heat::None).
    attributes: frozenset[str] | None = frozenset()  # None: any attribute name
    description: str = ""
    support_status: str = "SUPPORTED"
    # Whether the type takes a snapshot of what it deletes (a volume's backup, a server's
    # image): only then is ``deletion_policy: Snapshot`` accepted, as Heat accepts it only
    # for types with ``handle_snapshot_delete``. Such a plugin implements ``snapshot_delete``.
    snapshot: bool = False
    # Heat's implicit dependencies of the type (see ``dependencies.ImplicitRule``).
    implicit: ImplicitRule | None = None
    # A type whose resource is a nested stack it writes itself (a group): the engine hands
    # it the parent's files and environment and the attributes the template reads of it.
    generates_stack: bool = False
    # Replaced by every stack update, changed or not (Heat's UpdateWaitConditionHandle).
    replaced_on_update: bool = False
    # Secrets, kept encrypted at rest as Heat keeps its redacted resource data: properties
    # (a server's admin_pass) and attributes (a key pair's private_key). Those that take a
    # hidden parameter's value are found from the template (``convergence.engine.secrets``).
    secret_properties: frozenset[str] = frozenset()
    secret_attributes: frozenset[str] = frozenset()
    # Its reference (``get_resource``) is a secret too (a random string's is its value).
    secret_reference: bool = False


class TypeCatalog(Protocol):
    """The resource types that exist (the plugin registry implements it)."""

    def lookup(self, type_name: str) -> TypeSchema | None: ...

    def names(self) -> list[str]: ...


class StaticCatalog:
    """A catalog from a list of schemas: for tests and for tools without plugins."""

    def __init__(self, *schemas: TypeSchema) -> None:
        self._types = {s.name: s for s in schemas}

    def lookup(self, type_name: str) -> TypeSchema | None:
        return self._types.get(type_name)

    def names(self) -> list[str]:
        return sorted(self._types)


class CustomChecker(Protocol):
    def check(self, name: str, value: Any) -> str | None: ...


def coerce(schema: PropertySchema, value: Any) -> Any:
    """Convert a literal value to the property's type as Heat does; ValueError if it cannot."""
    t = schema.type
    if t == STRING:
        if isinstance(value, str):
            return value
        if isinstance(value, bool | int | float):
            return str(value).lower() if isinstance(value, bool) else str(value)
        raise ValueError(f"must be a string, not {_kind(value)}")
    if t == INTEGER:
        if isinstance(value, bool):
            raise ValueError("must be an integer, not a boolean")
        if isinstance(value, int):
            return value
        if isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d+\s*", value):
            return int(value)
        raise ValueError(f"must be an integer, not {_show(value)}")
    if t == NUMBER:
        if isinstance(value, bool):
            raise ValueError("must be a number, not a boolean")
        if isinstance(value, int | float):
            return value
        if isinstance(value, str):
            try:
                return int(value) if re.fullmatch(r"\s*[-+]?\d+\s*", value) else float(value)
            except ValueError:
                pass
        raise ValueError(f"must be a number, not {_show(value)}")
    if t == BOOLEAN:
        try:
            return bool_from_string(value)
        except ValueError:
            raise ValueError(f"must be a boolean, not {_show(value)}") from None
    if t == LIST:
        if isinstance(value, list):
            return value
        raise ValueError(f"must be a list, not {_kind(value)}")
    if t == MAP:
        if isinstance(value, dict):
            return value
        raise ValueError(f"must be a map, not {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return {dict: "a map", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(value), "a value")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_properties(
    schemas: Mapping[str, PropertySchema],
    values: Mapping[str, Any],
    path: Path,
    problems: Problems,
    custom: CustomChecker | None = None,
    *,
    unknown: frozenset[str] = frozenset(),
) -> None:
    """Check a resource's property values against its schema; calls are checked later.

    ``unknown`` names properties whose values could not be resolved yet (skipped, but still
    counted as given for ``required``).
    """
    for name in values:
        if name not in schemas:
            problems.add((*path, name), f"unknown property '{name}'{_close(name, schemas)}",
                         PROPERTY)
    for name, schema in schemas.items():
        if name not in values or values[name] is None:
            if schema.required and name not in unknown and schema.default is None:
                problems.add((*path, name), f"property '{name}' is required", PROPERTY)
            continue
        if name in unknown:
            continue
        check_value(schema, values[name], (*path, name), problems, custom)


def check_value(schema: PropertySchema, value: Any, path: Path, problems: Problems,
                custom: CustomChecker | None = None) -> None:
    """Check one value (recursively for maps and lists with schemas)."""
    if has_calls(value):
        return
    try:
        value = coerce(schema, value)
    except ValueError as exc:
        problems.add(path, str(exc), PROPERTY)
        return
    if schema.allowed_values and value not in schema.allowed_values:
        allowed = ", ".join(repr(v) for v in schema.allowed_values)
        problems.add(path, f"{_show(value)} is not one of the allowed values: {allowed}",
                     PROPERTY)
    measure: float | None = None
    if schema.type in (INTEGER, NUMBER) and isinstance(value, int | float):
        measure, what = float(value), "the value"
    elif isinstance(value, str | list | dict):
        measure, what = float(len(value)), "the length"
    if measure is not None:
        if schema.min is not None and measure < schema.min:
            problems.add(path, f"{what} must be at least {_num(schema.min)}", PROPERTY)
        if schema.max is not None and measure > schema.max:
            problems.add(path, f"{what} must be at most {_num(schema.max)}", PROPERTY)
    if schema.pattern and isinstance(value, str) and not re.fullmatch(schema.pattern, value):
        problems.add(path, f"{_show(value)} does not match the pattern {schema.pattern!r}",
                     PROPERTY)
    if schema.custom_constraint and custom is not None:
        message = custom.check(schema.custom_constraint, value)
        if message:
            problems.add(path, message, PROPERTY)
    if schema.schema is not None and isinstance(value, dict):
        check_properties(schema.schema, value, path, problems, custom)
    if schema.item is not None and isinstance(value, list):
        for i, item in enumerate(value):
            check_value(schema.item, item, (*path, i), problems, custom)


def _num(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


def _close(name: str, candidates: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.75)
    return f"; did you mean '{close[0]}'?" if close else ""


def with_defaults(schemas: Mapping[str, PropertySchema] | None,
                  values: Mapping[str, Any]) -> dict[str, Any]:
    """Resolved properties as a plugin sees them: defaults filled in, literals coerced."""
    if schemas is None:
        return dict(values)
    out: dict[str, Any] = {}
    for name, schema in schemas.items():
        value = values.get(name)
        if value is None:
            if schema.default is not None:
                out[name] = schema.default
            continue
        try:
            out[name] = coerce(schema, value)
        except ValueError:
            out[name] = value  # reported by validation; the plugin decides
    for name, value in values.items():
        out.setdefault(name, value)
    return out
