"""The plugin registry's resource types in Heat's shapes, for the API and the CLI alike.

The type list, a type's property and attribute schema, and a HOT template exposing a type as a
template resource.

Callers: ``convergence.api.catalog`` (``GET /resource_types[/{type}[/template]]``) and the CLI's
embedded backend (``convergence resource type list|show``), so that both answer alike. Plain
functions of a :class:`PluginRegistry`; a type it does not know is a ``NotFound``.
"""

from __future__ import annotations

import re
from typing import Any

from convergence.errors import NotFound
from convergence.plugins.registry import PluginRegistry
from convergence.template.properties import LIST, MAP, PropertySchema, TypeSchema


def schema_or_404(reg: PluginRegistry, type_name: str) -> TypeSchema:
    schema = reg.lookup(type_name)
    if schema is None:
        raise NotFound(f"The Resource Type ({type_name}) could not be found.")
    return schema


def name_matches(pattern: str, name: str) -> bool:
    """Heat's ``name`` filter: the exact name, or a regular expression searched in it."""
    if pattern == name:
        return True
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False


def constraints(p: PropertySchema) -> list[dict[str, Any]]:
    """A property's constraints in Heat's schema shape."""
    out: list[dict[str, Any]] = []
    if p.allowed_values:
        out.append({"allowed_values": list(p.allowed_values)})
    if p.min is not None or p.max is not None:
        bounds = {k: v for k, v in (("min", p.min), ("max", p.max)) if v is not None}
        out.append({"range" if p.type in ("Integer", "Number") else "length": bounds})
    if p.pattern:
        out.append({"allowed_pattern": p.pattern})
    if p.custom_constraint:
        out.append({"custom_constraint": p.custom_constraint})
    return out


def property_schema(p: PropertySchema) -> dict[str, Any]:
    """One property in Heat's shape (nested ``schema`` for maps and lists)."""
    out: dict[str, Any] = {
        "type": p.type.lower(),
        "description": p.description,
        "required": p.required,
        "update_allowed": p.update_allowed,
        "immutable": p.immutable,
    }
    if p.default is not None:
        out["default"] = p.default
    found = constraints(p)
    if found:
        out["constraints"] = found
    if p.schema is not None:
        out["schema"] = {k: property_schema(v) for k, v in p.schema.items()}
    elif p.item is not None:
        out["schema"] = {"*": property_schema(p.item)}
    return out


def type_schema(schema: TypeSchema) -> dict[str, Any]:
    """``GET /resource_types/{type}``: Heat's answer shape."""
    attributes = sorted(schema.attributes or ())
    return {
        "resource_type": schema.name,
        "description": schema.description,
        "properties": {k: property_schema(v) for k, v in (schema.properties or {}).items()},
        "attributes": {
            **{a: {"description": "", "type": None} for a in attributes},
            "show": {"description": "Detailed information about resource.", "type": "map"},
        },
        "support_status": {"status": schema.support_status, "version": None,
                           "message": None, "previous_status": None},
    }


_PARAM_TYPES = {"String": "string", "Integer": "number", "Number": "number",
                "Boolean": "boolean", LIST: "comma_delimited_list", MAP: "json", "Any": "json"}


def _parameter(p: PropertySchema) -> dict[str, Any]:
    out: dict[str, Any] = {"type": _PARAM_TYPES.get(p.type, "string")}
    if p.description:
        out["description"] = p.description
    if p.default is not None:
        out["default"] = p.default
    found: list[dict[str, Any]] = []
    if p.allowed_values:
        found.append({"allowed_values": list(p.allowed_values)})
    if (p.min is not None or p.max is not None) and p.type in ("Integer", "Number", "String"):
        bounds = {k: v for k, v in (("min", p.min), ("max", p.max)) if v is not None}
        found.append({"range" if p.type != "String" else "length": bounds})
    if p.pattern and p.type == "String":
        found.append({"allowed_pattern": p.pattern})
    if found:
        out["constraints"] = found
    return out


def type_template(schema: TypeSchema, resource_name: str) -> dict[str, Any]:
    """A HOT template exposing the type as a template resource, as Heat generates it."""
    props = schema.properties or {}
    return {
        "heat_template_version": "2016-10-14",
        "description": f"Initial template of {resource_name}",
        "parameters": {k: _parameter(v) for k, v in props.items()},
        "resources": {resource_name: {
            "type": schema.name,
            "properties": {k: {"get_param": k} for k in props},
        }},
        "outputs": {
            **{a: {"description": a, "value": {"get_attr": [resource_name, a]}}
               for a in sorted(schema.attributes or ())},
            "show": {"description": "Detailed information about resource.",
                     "value": {"get_attr": [resource_name, "show"]}},
        },
    }


def list_types(reg: PluginRegistry, *, name: str | None = None,
               support_status: str | None = None) -> list[str]:
    """The type names, filtered as Heat's list is (``name``: the exact name or a regular
    expression searched in it; ``support_status``: SUPPORTED, DEPRECATED, ...)."""
    names = reg.names()
    if name:
        names = [n for n in names if name_matches(name, n)]
    if support_status:
        wanted = support_status.upper()
        names = [n for n in names if schema_or_404(reg, n).support_status == wanted]
    return names


def described_types(reg: PluginRegistry, names: list[str]) -> list[dict[str, Any]]:
    """The list ``with_description``: each type with its description."""
    return [{"resource_type": n, "description": schema_or_404(reg, n).description}
            for n in names]


def template_of(reg: PluginRegistry, type_name: str) -> dict[str, Any]:
    """``GET /resource_types/{type}/template`` (hot): the type as a template resource."""
    schema = schema_or_404(reg, type_name)
    plugin = reg.plugin(type_name)
    resource_name = getattr(plugin, "__name__", None) or type_name.rsplit("::", 1)[-1]
    return type_template(schema, resource_name)
