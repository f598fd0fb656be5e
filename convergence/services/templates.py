"""Templates as the use cases take them: validating one (Heat's ``template validate``), and
accepting a request's template content before anything is stored.

Callers: ``convergence.services.stacks`` (create and update accept and store their content
here; nested stacks and scaling store theirs with :func:`store_template`),
``convergence.services.preview`` (what an update asks for), the API's ``POST /validate``
(``convergence.api.stacks``) and the CLI's embedded client (``template validate``,
``convergence.cli.local``; the resource type commands read :func:`default_catalog`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from convergence.engine.definitions import build_definition
from convergence.plugins.base import DEFAULT_SCOPE, CloudScope, Delegation
from convergence.plugins.registry import PluginRegistry
from convergence.ports.store import Tx
from convergence.ports.views import TemplateContent, template_id
from convergence.services.admission import SizeLimits, check_content, check_sizes
from convergence.services.credentials import refuse_cloudless
from convergence.services.heat_shapes import describe_parameter
from convergence.services.inputs import definition_parameters
from convergence.template import (
    DEFAULT_LIMITS,
    Environment,
    Problems,
    StackDefinition,
    TemplateError,
    TypeCatalog,
    parse_environment,
    validate_stack,
)
from convergence.template.common_constraints import COMMON_CONSTRAINTS

if TYPE_CHECKING:
    from convergence.services.context import Runtime


def default_catalog() -> PluginRegistry:
    """The resource types of the installed plugins (no runtime, no database)."""
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
    sizes: SizeLimits | None = None,
    scope: CloudScope = DEFAULT_SCOPE,
    caller: Delegation | None = None,
) -> dict[str, Any]:
    """Validate a template as Heat's ``template validate`` does; return Heat's answer shape.

    Raises TemplateError with the problems of the environments and the template together;
    input over ``sizes`` (default: the default settings' limits) is refused unparsed. With a
    registry bound to a runtime for ``catalog``, custom constraints (``nova.flavor``...) are
    checked against the cloud of ``scope``, as ``caller`` (a caller Keystone authenticated)
    sees it when given.
    """
    sizes = sizes or SizeLimits()
    check_sizes(template, files, environments, parameters, sizes)
    problems = Problems()
    envs = load_environments(environments, problems=problems)
    catalog = catalog or default_catalog()
    custom = catalog.custom_constraints(scope, caller) if isinstance(catalog, PluginRegistry) \
        else COMMON_CONSTRAINTS
    try:
        stack = validate_stack(template, catalog=catalog, files=files,
                               location=location, environments=envs, parameters=parameters,
                               custom_constraints=custom,
                               limits=dataclasses.replace(DEFAULT_LIMITS,
                                                          max_bytes=sizes.document))
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


# A request's content -------------------------------------------------------------------------

def template_content(template: str, files: Mapping[str, str] | None,
                     environments: Sequence[Any],
                     parameters: Mapping[str, Any] | None) -> TemplateContent:
    """What a request gives a stack, as the store keeps it."""
    return TemplateContent(text=template, files=dict(files or {}),
                           environments=tuple(environments), parameters=dict(parameters or {}))


def requested_content(current: TemplateContent | None, template: str | None,
                      files: Mapping[str, str] | None, environments: Sequence[Any] | None,
                      parameters: Mapping[str, Any] | None, *, existing: bool,
                      clear_parameters: Sequence[str] = ()) -> TemplateContent:
    """What an update asks for. ``existing`` (PATCH): the current template, environment and
    parameters with what is given on top; ``clear_parameters`` drops kept values."""
    if template is None:
        if not existing or current is None:
            raise ValueError("a template is required (or use the existing one)")
        template = current.text
    if existing and current is not None:
        files = {**current.files, **(files or {})}
        environments = list(current.environments) + list(environments or [])
        parameters = {**current.parameters, **(parameters or {})}
    if clear_parameters:
        given = dict(parameters or {})
        for name in clear_parameters:
            given.pop(name, None)
        parameters = given
    content = template_content(template, files, environments or (), parameters)
    if existing and current is not None and current.scaling:
        # What the autoscaler decided stays with a PATCH (a new template starts over).
        content = dataclasses.replace(content, scaling=dict(current.scaling))
    return content


def check_scope(rt: Runtime, scope: CloudScope) -> None:
    """Refuse (TemplateError naming ``cloud``) a stack cloud this engine is not configured
    with."""
    problem = rt.registry.scope_problem(scope)
    if problem:
        problems = Problems()
        problems.add(("cloud",), problem, "cloud")
        problems.raise_if_any()


def accept(rt: Runtime, content: TemplateContent, scope: CloudScope = DEFAULT_SCOPE, *,
           tenant: str | None = None, why: str | None = None) -> None:
    """Refuse invalid input before anything is stored (raises TemplateError), input over the
    size limits unparsed, values the stack's cloud (``scope``) does not have where a custom
    constraint names what they must be (a flavor, an image, a network...), and resources that
    need a cloud the stack cannot reach (``convergence.services.credentials``: ``tenant``'s
    and ``why`` say what to do about it). The engine of this process (embedded: the one that
    plans it) keeps what was built."""
    check_content(content, rt.settings)
    definition = build_definition(content, rt.registry,
                                  custom_constraints=rt.registry.custom_constraints(scope),
                                  max_nesting=rt.settings.max_nested_depth)
    refuse_cloudless(rt, definition, scope, tenant, why)
    rt.engine.definitions.put(template_id(content), definition)


def put_template(rt: Runtime, tx: Tx, content: TemplateContent) -> str:
    """Store accepted content with what reads show of it (from the definition :func:`accept`
    built: no second parse)."""
    definition = rt.engine.definitions.get(template_id(content), lambda _: content)
    return store_template(tx, content, definition)


def store_template(tx: Tx, content: TemplateContent, definition: StackDefinition) -> str:
    """Store content with what a stack list and a stack show read of it, taken from its
    definition: the template's description, and every parameter's value as a show gives it
    (so that no read parses the template: a big one takes a minute to build). The values of
    its hidden parameters are kept encrypted."""
    return tx.put_template(content, description=definition.template.description or "",
                           shown_parameters=definition_parameters(definition),
                           hidden=hidden_names(definition))


def hidden_names(definition: StackDefinition) -> frozenset[str]:
    """The parameters declared hidden by a stack's template or its nested templates (as
    Heat's ``all_param_schemata``: a value given for either is a secret)."""
    names: set[str] = set()
    pending = [definition]
    while pending:
        current = pending.pop()
        names.update(n for n, p in current.template.parameters.items() if p.hidden)
        pending.extend(current.nested.values())
    return frozenset(names)
