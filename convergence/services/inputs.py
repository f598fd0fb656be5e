"""What a stack was made from, as Heat shows it: its template's description, and the value of
every parameter (defaults included, hidden ones masked, Heat's pseudo-parameters added).

Callers: ``convergence.api.stacks`` (stack show, a stack's template), ``convergence.api.
stack_extras`` (the stack list, environment, files, metadata), ``convergence.api.actions`` (the
create preview's parameters) and the CLI's embedded client (``convergence.cli.local``), so that
both modes and the API answer alike.

A stack list reads the descriptions kept beside the templates (one short column, one query for
the whole page), not the template bodies, and a stack show the parameters kept beside them
(:func:`definition_parameters` of the definition, when the template was stored); only
templates stored before those were kept are parsed (their definitions, which the engine's
cache holds already when the stack has run in this process).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from convergence.ports.views import StackView, TemplateContent
from convergence.template import StackDefinition, TemplateError, load_document
from convergence.template.parameters import BOOLEAN, COMMA_DELIMITED_LIST, JSON

if TYPE_CHECKING:
    from convergence.services.context import Runtime

HIDDEN = "******"  # what Heat shows of a hidden parameter's value


def stack_content(rt: Runtime, stack: StackView) -> TemplateContent | None:
    """The stack's stored template, files, environments and parameter values (None: none)."""
    if not stack.template_id:
        return None
    with rt.store.read() as tx:
        return tx.template(stack.template_id)


def _document(text: str) -> Mapping[str, Any]:
    try:
        doc = load_document(text, "template")
    except TemplateError:
        return {}
    return doc if isinstance(doc, Mapping) else {}


def description_of(text: str) -> str:
    """A template's ``description`` ("" when it has none or does not parse)."""
    value = _document(text).get("description")
    return str(value) if value else ""


def descriptions(rt: Runtime, stacks: Iterable[StackView]) -> dict[str, str]:
    """The template description of each stack, by stack id."""
    stacks = list(stacks)
    with rt.store.read() as tx:
        found = tx.template_descriptions(s.template_id for s in stacks if s.template_id)
        for tid, value in found.items():
            if value is None:  # stored before descriptions were kept
                found[tid] = description_of(tx.template(tid).text)
    return {s.id: (found.get(s.template_id) or "") if s.template_id else "" for s in stacks}


def heat_string(param_type: str, value: Any) -> str:
    """A parameter's value as Heat's stack show gives it (``str`` of Heat's parameter)."""
    if param_type == JSON:
        return json.dumps(value)
    if param_type == COMMA_DELIMITED_LIST and isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if param_type == BOOLEAN and isinstance(value, bool):
        return str(value)
    return value if isinstance(value, str) else str(value)


def definition_parameters(definition: StackDefinition) -> dict[str, str]:
    """Every parameter that has a value (given, from ``parameter_defaults``, or its default),
    in the template's order; hidden ones masked."""
    shown: dict[str, str] = {}
    for name, schema in definition.template.parameters.items():
        if name in definition.parameters:
            shown[name] = HIDDEN if schema.hidden else \
                heat_string(schema.type, definition.parameters[name])
    return shown


def _given_parameters(content: TemplateContent) -> dict[str, str]:
    """The values given, when the stored template no longer builds: masked where the
    template's text calls the parameter hidden."""
    schemas = _document(content.text).get("parameters")
    schemas = schemas if isinstance(schemas, Mapping) else {}
    shown: dict[str, str] = {}
    for name, value in content.parameters.items():
        schema = schemas.get(name)
        hidden = isinstance(schema, Mapping) and bool(schema.get("hidden"))
        shown[str(name)] = HIDDEN if hidden else heat_string("", value)
    return shown


def pseudo_parameters(stack: StackView) -> dict[str, str]:
    return {"OS::stack_id": stack.id, "OS::stack_name": stack.name,
            "OS::project_id": stack.tenant}


def stack_parameters(rt: Runtime, stack: StackView) -> dict[str, str]:
    """The ``parameters`` of Heat's stack show: every parameter's effective value, then the
    pseudo-parameters."""
    shown: dict[str, str] | None = None
    if stack.template_id:
        with rt.store.read() as tx:
            shown = tx.shown_parameters(stack.template_id)
        if shown is None:  # a template stored before they were kept with it
            try:
                shown = definition_parameters(rt.engine.definitions.get(stack.template_id))
            except TemplateError:
                content = stack_content(rt, stack)
                shown = _given_parameters(content) if content is not None else {}
    return {**(shown or {}), **pseudo_parameters(stack)}
