"""Use cases shared by the CLI and the API: each takes plain input and returns plain data.

Callers: ``convergence.cli`` and (with the API) ``convergence.api``. Errors in user input leave
as ``TemplateError`` with every problem and its path; the callers decide how to show them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from convergence.plugins.registry import PluginRegistry
from convergence.template import (
    Environment,
    ParameterSchema,
    Problems,
    TemplateError,
    TypeCatalog,
    parse_environment,
    validate_stack,
)
from convergence.template.constraints import (
    AllowedPattern,
    AllowedValues,
    CustomConstraint,
    Length,
    Modulo,
    Range,
)
from convergence.template.parameters import NO_DEFAULT

_HEAT_TYPES = {
    "string": "String", "number": "Number", "comma_delimited_list": "CommaDelimitedList",
    "json": "Json", "boolean": "Boolean",
}


def default_catalog() -> PluginRegistry:
    return PluginRegistry.from_entry_points()


def load_environments(documents: Sequence[Any], names: Sequence[str] | None = None,
                      problems: Problems | None = None) -> list[Environment]:
    """Parse environment documents (already loaded data), collecting their problems."""
    problems = problems if problems is not None else Problems()
    envs = []
    for i, doc in enumerate(documents):
        what = names[i] if names else f"environment[{i}]"
        envs.append(parse_environment(doc, what, problems))
    return envs


def validate_template(
    template: str | bytes | Mapping[str, Any],
    *,
    files: Mapping[str, str] | None = None,
    location: str | None = None,
    environments: Sequence[Any] = (),
    parameters: Mapping[str, Any] | None = None,
    catalog: TypeCatalog | None = None,
) -> dict[str, Any]:
    """Validate a template as Heat's ``template validate`` does; return Heat's answer shape.

    Raises TemplateError with the problems of the environments and the template together.
    """
    problems = Problems()
    envs = load_environments(environments, problems=problems)
    try:
        stack = validate_stack(template, catalog=catalog or default_catalog(), files=files,
                               location=location, environments=envs, parameters=parameters)
    except TemplateError as exc:
        problems.extend(exc.problems)
    problems.raise_if_any()
    t = stack.template
    return {
        "Description": t.description or "",
        "Parameters": {name: describe_parameter(p, stack.environment.parameter_defaults)
                       for name, p in t.parameters.items()},
        "ParameterGroups": [
            {"label": g.label, "description": g.description, "parameters": list(g.parameters)}
            for g in t.parameter_groups
        ],
        "ResourceCount": len(stack.resource_types),
    }


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
        out["Default"] = "******" if p.hidden else default
    if p.immutable:
        out["Immutable"] = True
    if p.tags:
        out["Tags"] = list(p.tags)
    out.update(_heat_constraints(p))
    return out


def _heat_constraints(p: ParameterSchema) -> dict[str, Any]:
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
