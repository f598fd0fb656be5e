"""Heat's answer shapes that the use cases build: a parameter as ``template validate`` shows
it, a stack's environments merged as Heat's ``environment`` answers them, a resource's
template metadata, the abandon/export blob, and the one version of each resource a stack uses.

Callers: ``convergence.services.templates`` (validate), ``convergence.services.queries`` and
``convergence.services.stacks`` (export, abandon, mark-unhealthy), ``convergence.services.
preview``, the API (``convergence.api.stack_extras``: environment, metadata) and the CLI's
embedded client (``convergence.cli.local``). Plain functions of the store's views and the
template package; no transaction here. The shapes every edge shares without loading the use
cases (Heat's time format, a stack's outputs) are in ``convergence.heat_fields``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from convergence.ports.views import RecordView, StackView, TemplateContent
from convergence.template import ParameterSchema, TemplateError, load_document
from convergence.template.constraints import (
    AllowedPattern,
    AllowedValues,
    CustomConstraint,
    Length,
    Modulo,
    Range,
)
from convergence.template.parameters import NO_DEFAULT

HIDDEN = "******"  # what Heat shows of a hidden parameter's value

_HEAT_TYPES = {
    "string": "String", "number": "Number", "comma_delimited_list": "CommaDelimitedList",
    "json": "Json", "boolean": "Boolean",
}


# Validate ------------------------------------------------------------------------------------

def describe_parameter(p: ParameterSchema, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """One parameter in Heat's validate format (hidden defaults are never shown)."""
    out: dict[str, Any] = {
        "Type": _HEAT_TYPES.get(p.type, p.type),
        "Description": p.description or "",
        "Label": p.label or p.name,
        "NoEcho": "true" if p.hidden else "false",
    }
    default = defaults.get(p.name, p.default)
    if default is not NO_DEFAULT:
        out["Default"] = HIDDEN if p.hidden else default
    if p.immutable:
        out["Immutable"] = True
    if p.tags:
        out["Tags"] = list(p.tags)
    out.update(heat_constraints(p))
    return out


def heat_constraints(p: ParameterSchema) -> dict[str, Any]:
    """Constraints the way Heat's validate shows them (MinLength, AllowedValues, ...)."""
    out: dict[str, Any] = {}
    descriptions = []
    for c in p.constraints:
        if isinstance(c, Length | Range):
            prefix = "Length" if isinstance(c, Length) else "Value"
            if c.min is not None:
                out[f"Min{prefix}"] = c.min
            if c.max is not None:
                out[f"Max{prefix}"] = c.max
        elif isinstance(c, Modulo):
            out["Modulo"] = {"step": c.step, "offset": c.offset}
        elif isinstance(c, AllowedValues):
            out["AllowedValues"] = list(c.values)
        elif isinstance(c, AllowedPattern):
            out["AllowedPattern"] = c.pattern
        elif isinstance(c, CustomConstraint):
            out["CustomConstraint"] = c.name
        if c.description:
            descriptions.append(c.description)
    if descriptions:
        out["ConstraintDescription"] = " ".join(descriptions)
    return out


# A stack's environment and template ----------------------------------------------------------

_ENV_SECTIONS = ("parameters", "parameter_defaults", "resource_registry", "event_sinks",
                 "encrypted_param_names")


def hidden_parameters(content: TemplateContent) -> frozenset[str]:
    """The names of the parameters declared ``hidden`` by the stack's template or by a
    template among its files (a nested stack's), as Heat's ``all_param_schemata``."""
    hidden: set[str] = set()
    for text in (content.text, *content.files.values()):
        doc = _parsed(text)
        params = doc.get("parameters") if doc else None
        if isinstance(params, Mapping):
            hidden.update(str(name) for name, schema in params.items()
                          if isinstance(schema, Mapping) and schema.get("hidden") is True)
    return frozenset(hidden)


def _parsed(text: str) -> Mapping[str, Any] | None:
    """A file's text as a template document; None when it is not one."""
    if "heat_template_version" not in text and "HeatTemplateFormatVersion" not in text:
        return None  # a script or a config file, not worth a parse
    try:
        doc = load_document(text, "template")
    except TemplateError:
        return None
    return doc if isinstance(doc, Mapping) else None


def merged_environment(content: TemplateContent | None, *, masked: bool = True
                       ) -> dict[str, Any]:
    """The stack's environments merged in order (later ones win), the stack's parameters on
    top, in Heat's shape: every section present. The value of a hidden parameter is masked
    in ``parameters`` and ``parameter_defaults``, as Heat's answer masks it: this is what a
    reader of the stack is shown, never what the engine runs with. The export blob, which
    adopt takes back, carries the values (``masked`` False), as Heat's abandon does."""
    env: dict[str, Any] = {"parameters": {}, "parameter_defaults": {},
                           "resource_registry": {"resources": {}}, "event_sinks": [],
                           "encrypted_param_names": []}
    if content is None:
        return env
    for doc in content.environments:
        if not isinstance(doc, Mapping):
            continue
        for section in _ENV_SECTIONS:
            value = doc.get(section)
            if isinstance(value, Mapping):
                if section == "resource_registry":
                    registry = env["resource_registry"]
                    for key, item in value.items():
                        if key == "resources" and isinstance(item, Mapping):
                            registry["resources"].update(item)
                        else:
                            registry[key] = item
                else:
                    env[section].update(value)
            elif isinstance(value, list):
                env[section].extend(v for v in value if v not in env[section])
    env["parameters"].update(content.parameters)
    for name in hidden_parameters(content) if masked else ():
        for section in ("parameters", "parameter_defaults"):
            if name in env[section]:
                env[section][name] = HIDDEN
    return env


def template_document(content: TemplateContent | None) -> dict[str, Any]:
    """The stored template as a document (``{}``: none, or it does not parse)."""
    if content is None:
        return {}
    try:
        doc = load_document(content.text, "template")
    except TemplateError:
        return {}
    return dict(doc) if isinstance(doc, Mapping) else {}


def resource_metadata(content: TemplateContent | None, name: str) -> dict[str, Any]:
    """A resource's ``metadata`` as its template gives it (``{}`` when it has none)."""
    resources = template_document(content).get("resources")
    definition = resources.get(name) if isinstance(resources, Mapping) else None
    value = definition.get("metadata") if isinstance(definition, Mapping) else None
    return dict(value) if isinstance(value, Mapping) else {}


# Resources -----------------------------------------------------------------------------------

def current_records(records: Sequence[RecordView]) -> list[RecordView]:
    """One version per resource name, in name order: the one the stack uses (not one being
    replaced). The resource list asks the database for these a page at a time instead
    (``Tx.resource_page``)."""
    best: dict[str, RecordView] = {}
    for r in records:
        held = best.get(r.name)
        if held is None or (r.replaced_by is None, r.id) > (held.replaced_by is None, held.id):
            best[r.name] = r
    return [best[n] for n in sorted(best)]


def export_blob(stack: StackView, content: TemplateContent | None,
                records: Sequence[RecordView]) -> dict[str, Any]:
    """Heat's abandon/export blob of a stack (what adopt takes back): the stack, its template,
    environment and files, and each resource the stack uses."""
    return {
        "id": stack.id, "name": stack.name, "action": stack.action, "status": stack.status,
        "project_id": stack.tenant, "stack_user_project_id": None, "tags": None,
        "template": template_document(content),
        "environment": merged_environment(content, masked=False),
        "files": dict(content.files) if content is not None else {},
        "resources": {r.name: {"name": r.name, "type": r.type, "action": r.action,
                               "status": r.status, "resource_id": r.physical_id,
                               "resource_data": {},
                               "metadata": resource_metadata(content, r.name)}
                      for r in current_records(records)},
    }
