"""Validating a stack: a template with its environment, parameter values and resource types.

The entry point for everything that accepts a template from a user (the CLI's ``template
validate``, the API's validate/create/update/preview, the engine before planning). Beyond what
``parse`` checks in the document alone, this checks parameter values, evaluates conditions,
resolves each resource's type through the environment's registry and the type catalog, checks
properties and attribute names against the type's schema and the deletion policy against what
the type can do (``Snapshot`` needs a type that takes snapshots), validates nested templates
(template resources) recursively, and refuses dependency cycles under the chosen conditions,
naming them.

All problems are reported together; the result is a :class:`StackDefinition` or a TemplateError.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from convergence.template.collector import collector_paused
from convergence.template.common_constraints import COMMON_CONSTRAINTS
from convergence.template.constraints import CustomConstraints
from convergence.template.dependencies import (
    Peer,
    Peers,
    condition_allows,
    find_cycles,
    resource_dependencies,
    with_implicit,
)
from convergence.template.environment import Environment, merge_environments
from convergence.template.errors import (
    CYCLE,
    FILE,
    PROPERTY,
    REFERENCE,
    STRUCTURE,
    TYPE,
    Path,
    Problems,
    TemplateError,
)
from convergence.template.files import file_key, is_template_reference
from convergence.template.functions.base import has_calls
from convergence.template.model import ResourceDefinition, Template, guards_hold
from convergence.template.parameters import ParameterSchema, resolve_values
from convergence.template.parse import _suggest, parse_collecting
from convergence.template.properties import TypeCatalog, TypeSchema, check_properties
from convergence.template.resolve import StackIdentity, TemplateResolver, UnknownValue
from convergence.template.source import DEFAULT_LIMITS, Limits
from convergence.template.versions import deletion_policies

NESTED_ATTRIBUTES = frozenset({"OS::stack_id", "OS::stack_name"})


@dataclass(frozen=True, slots=True)
class StackDefinition:
    """A validated stack: everything the planner needs, nothing resolved that needs the cloud."""

    template: Template
    environment: Environment
    parameters: Mapping[str, Any]
    conditions: Mapping[str, bool | None]
    resource_types: Mapping[str, str]  # effective type of each existing resource
    dependencies: Mapping[str, frozenset[str]]
    nested: Mapping[str, StackDefinition] = field(default_factory=dict)
    # What the autoscaler decided beside the template (see ``TemplateContent.scaling``).
    scaling: Mapping[str, Any] = field(default_factory=dict)

    def resolver(self, identity: StackIdentity | None = None, **kwargs: Any) -> TemplateResolver:
        return TemplateResolver(self.template, self.parameters, identity=identity, **kwargs)


@dataclass(slots=True)
class _Options:
    catalog: TypeCatalog
    custom: CustomConstraints
    limits: Limits
    identity: StackIdentity | None
    quiet_evaluation: bool = False
    parsed: dict[str, tuple[Template | None, Problems]] = field(default_factory=dict)


@collector_paused()
def validate_stack(
    template: Template | str | bytes | Mapping[str, Any],
    *,
    catalog: TypeCatalog,
    environments: tuple[Environment, ...] | list[Environment] = (),
    parameters: Mapping[str, Any] | None = None,
    files: Mapping[str, str] | None = None,
    location: str | None = None,
    custom_constraints: CustomConstraints = COMMON_CONSTRAINTS,
    identity: StackIdentity | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> StackDefinition:
    """Validate a whole stack; raise TemplateError with every problem found.

    ``parameters`` are the user's values (None when none were given: then missing required
    values are not an error, as when a template is validated alone).
    """
    problems = Problems()
    if not isinstance(template, Template):
        parsed = parse_collecting(template, problems, files=files, location=location,
                                  limits=limits)
        if parsed is None:
            problems.raise_if_any()
        assert parsed is not None
        template = parsed
    env = Environment()
    if environments:
        try:
            env = merge_environments(list(environments))
        except TemplateError as exc:
            problems.extend(exc.problems)
    given = dict(env.parameters)
    if parameters:
        given.update(parameters)
    # Problems in the document itself already speak for its calls; evaluating those calls
    # again would say the same thing twice in other words.
    opts = _Options(catalog, custom_constraints, limits, identity, quiet_evaluation=bool(problems))
    result = _validate(template, env, given, parameters is not None or bool(env.parameters),
                       opts, problems, depth=0)
    problems.raise_if_any()
    return result


def _validate(template: Template, env: Environment, given: Mapping[str, Any], require_all: bool,
              opts: _Options, problems: Problems, depth: int,
              require_given: bool = True) -> StackDefinition:
    """Validate one template; ``require_given``: values of parameters must all be supplied
    (a nested template's come from properties, checked by its parent, and may be unknown)."""
    values = resolve_values(template.parameters, given, env.parameter_defaults, problems,
                            require_all=require_all and require_given, custom=opts.custom)
    resolver = TemplateResolver(template, values, identity=opts.identity)
    conditions = _conditions(resolver, problems)
    # The maps below are kept small: on a large template they exist beside everything else.
    enabled: Mapping[str, ResourceDefinition] = template.resources
    if not all(condition_allows(d.condition, conditions) for d in enabled.values()):
        enabled = {name: defn for name, defn in enabled.items()
                   if condition_allows(defn.condition, conditions)}
    types: dict[str, str] = {}
    # What get_attr is checked against: a type's schema, or a nested template's.
    type_schemas: dict[str, TypeSchema | None] = {}
    nested_schemas: dict[str, Template | None] = {}
    nested: dict[str, StackDefinition] = {}
    registry = env.resource_registry
    # What a type maps to, for the resources the registry has no section of their own for:
    # worked out once per type, not once per resource.
    mapped: dict[str, str] = {}
    for name, defn in enabled.items():
        path: Path = ("resources", name)
        effective: str | None = None
        if defn.type:
            own = name in registry.resources
            effective = None if own else mapped.get(defn.type)
            if effective is None:
                effective = _effective_type(env, name, defn.type, path, problems)
                if effective is not None and not own:
                    mapped[defn.type] = effective
        if effective is None:
            continue
        types[name] = effective
        if is_template_reference(effective):
            child = _nested(template, env, name, effective, resolver, opts, problems, depth,
                            require_all)
            nested_schemas[name] = child.template if child else None
            if child is not None:
                nested[name] = child
            _check_deletion_policy(resolver, name, None, problems, opts)
            continue
        schema = type_schemas[effective] if effective in type_schemas else \
            type_schemas.setdefault(effective, opts.catalog.lookup(effective))
        if schema is None:
            alias = f" (mapped from '{defn.type}')" if effective != defn.type else ""
            problems.add((*path, "type"), f"resource type '{effective}'{alias} is not available"
                         f"{_suggest(effective, opts.catalog.names())}", TYPE)
            continue
        _check_deletion_policy(resolver, name, schema, problems, opts)
        # An external resource (``external_id``) is not made from its properties, so, as in
        # Heat, they are not checked (a server given by id needs no flavor).
        if schema.properties is not None and defn.external_id is None:
            props, unknown = _literal_properties(resolver, name, problems, opts)
            if props is not None:
                check_properties(schema.properties, props, (*path, "properties"), problems,
                                 opts.custom, unknown=unknown)
    _check_references(template, conditions, enabled, problems)
    _check_resource_types(template, types, type_schemas, problems)

    def schema_of(name: str) -> TypeSchema | Template | None:
        if name in nested_schemas:
            return nested_schemas[name]
        rtype = types.get(name)
        return None if rtype is None else type_schemas.get(rtype)

    _check_attributes(template, schema_of, problems)
    graph = resource_dependencies(template, conditions)
    implicit = {rtype: schema.implicit for rtype, schema in type_schemas.items()
                if schema is not None and schema.implicit is not None}
    rules = {name: implicit[rtype] for name, rtype in types.items()
             if rtype in implicit and name not in nested_schemas} if implicit else {}
    if rules:
        peers = Peers({name: Peer(types[name], template.resources[name].properties
                                  if isinstance(template.resources[name].properties, Mapping)
                                  else {})
                       for name in graph if name in types})
        graph = with_implicit(graph, rules, peers)
    for cycle in find_cycles(graph):
        problems.add(("resources", cycle[0]), "circular dependency: " + " -> ".join(cycle),
                     CYCLE)
    return StackDefinition(template, env, values, conditions, types, graph, nested)


def _conditions(resolver: TemplateResolver, problems: Problems) -> dict[str, bool | None]:
    try:
        return resolver.condition_values()
    except TemplateError as exc:
        problems.absorb(exc)
        return {}


def _effective_type(env: Environment, name: str, type_name: str, path: Path,
                    problems: Problems) -> str | None:
    try:
        return env.resource_registry.resolve_type(name, type_name)
    except TemplateError as exc:
        for p in exc.problems:
            problems.add((*path, "type"), p.message, p.kind)
        return None


def _check_deletion_policy(resolver: TemplateResolver, name: str, schema: TypeSchema | None,
                           problems: Problems, opts: _Options) -> None:
    """The resource's deletion policy, as far as parameters resolve it: one of the policies,
    and ``Snapshot`` only for a type that takes snapshots (``schema``; None: a template
    resource, which takes none). Heat refuses it likewise rather than delete without one."""
    path: Path = ("resources", name, "deletion_policy")
    policy = resolver.template.resources[name].deletion_policy
    if has_calls(policy):
        try:
            policy = resolver.resolve(policy)
        except UnknownValue:
            return  # a parameter without a value yet: checked once the stack gives it one
        except TemplateError as exc:
            if not opts.quiet_evaluation:
                problems.absorb(exc)
            return
        allowed = deletion_policies(resolver.version)
        if policy not in allowed:
            problems.add(path, f"deletion_policy must be one of {', '.join(allowed)}, not "
                         f"{policy!r}", STRUCTURE)
            return
    if isinstance(policy, str) and policy.lower() == "snapshot" and \
            not (schema is not None and schema.snapshot):
        what = f"resource type '{schema.name}'" if schema is not None else \
            "a template resource"
        problems.add(path, f'"Snapshot" deletion policy not supported: {what} takes no '
                     "snapshots", TYPE)


def _literal_properties(resolver: TemplateResolver, name: str, problems: Problems,
                        opts: _Options) -> tuple[dict[str, Any] | None, frozenset[str]]:
    """Properties resolved as far as parameters allow; names still unknown are set aside."""
    raw = resolver.template.resources[name].properties
    if not isinstance(raw, dict):
        return None, frozenset()
    values: dict[str, Any] = {}
    unknown: set[str] = set()
    for key, value in raw.items():
        if not has_calls(value):
            values[key] = value
            continue
        try:
            values[key] = resolver.resolve(value)
        except UnknownValue:
            values[key] = None
            unknown.add(key)
        except TemplateError as exc:
            if not opts.quiet_evaluation:
                problems.absorb(exc)
            values[key] = None
            unknown.add(key)
    return values, frozenset(unknown)


def _nested(parent: Template, env: Environment, name: str, type_ref: str,
            resolver: TemplateResolver, opts: _Options, problems: Problems,
            depth: int, require_all: bool) -> StackDefinition | None:
    path: Path = ("resources", name, "type")
    key = file_key(parent.files, type_ref, parent.location)
    if key is None:
        problems.add(path, f"template '{type_ref}' is not in the files supplied with the "
                     "template", FILE)
        return None
    if depth + 1 > opts.limits.max_nesting:
        problems.add(path, f"nested templates go deeper than {opts.limits.max_nesting} "
                     "levels", REFERENCE)
        return None
    prefix = f"resources.{name}({key})"
    cached = opts.parsed.get(key)
    if cached is None:
        found = Problems()
        cached = parse_collecting(parent.files[key], found, files=parent.files, location=key,
                                  limits=opts.limits), found
        opts.parsed[key] = cached
    child, found = cached
    for p in found:
        problems.add(f"{prefix}.{p.path}" if p.path else prefix, p.message, p.kind)
    if child is None:
        return None
    props, unknown = _literal_properties(resolver, name, problems, opts)
    given: dict[str, Any] = {}
    for prop, value in (props or {}).items():
        if prop not in child.parameters:
            problems.add(("resources", name, "properties", prop), f"unknown property "
                         f"'{prop}': template '{key}' has no such parameter"
                         f"{_suggest(prop, child.parameters)}", PROPERTY)
        elif prop not in unknown and value is not None:
            given[prop] = value
    if require_all:
        # As Heat's validate: without values, a nested parameter may still come from the
        # deployment's parameter_defaults, so only a stack with values must be complete.
        _check_required(child, props or {}, env, name, key, problems)
    # The child's registry leaves out the mapping that made this resource a template, so a
    # template wrapping the type it replaces does not nest into itself.
    registry = env.resource_registry.nested(name, parent.resources[name].type)
    child_env = Environment(parameter_defaults=env.parameter_defaults,
                            resource_registry=registry,
                            parameter_merge_strategies=env.parameter_merge_strategies)
    sub = Problems()
    definition = _validate(child, child_env, given, require_all, opts, sub, depth + 1,
                           require_given=False)
    for p in sub:
        problems.add(f"{prefix}.{p.path}" if p.path else prefix, p.message, p.kind)
    return definition


def _check_required(child: Template, props: Mapping[str, Any], env: Environment, name: str,
                    key: str, problems: Problems) -> None:
    for pname, schema in child.parameters.items():
        if _needs_value(schema) and pname not in props and pname not in env.parameter_defaults:
            problems.add(("resources", name, "properties"), f"property '{pname}' is required: "
                         f"template '{key}' gives it no default", PROPERTY)


def _needs_value(schema: ParameterSchema) -> bool:
    return schema.required


def _check_references(template: Template, conditions: Mapping[str, bool | None],
                      enabled: Mapping[str, Any], problems: Problems) -> None:
    """A resource or output that exists must not use a resource that does not."""
    if len(enabled) == len(template.resources):
        return  # all exist
    disabled = set(template.resources) - set(enabled)
    users = [(d.references, d.depends_on, ("resources", n)) for n, d in enabled.items()]
    users += [(o.references, (), ("outputs", n)) for n, o in template.outputs.items()
              if condition_allows(o.condition, conditions)]
    for references, depends_on, where in users:
        for dep in depends_on:
            if dep in disabled:
                problems.add((*where, "depends_on"), f"resource '{dep}' does not exist: its "
                             "condition is false", REFERENCE)
        for ref in references:
            if ref.target in disabled and guards_hold(ref.guards, conditions):
                problems.add(ref.path, f"resource '{ref.target}' does not exist: its "
                             "condition is false", REFERENCE)


def _check_resource_types(template: Template, types: Mapping[str, str],
                          type_schemas: Mapping[str, TypeSchema | None],
                          problems: Problems) -> None:
    """A property that names a resource of its stack of some types
    (``PropertySchema.resource_types``: a wait condition's handle) given a ``get_resource`` of
    a resource of another type: refused now, naming the property. Any other value (a
    parameter, a literal id) is resolved within the stack by the plugin when it runs."""
    wanted = {rtype: {prop: p.resource_types for prop, p in schema.properties.items()
                      if p.resource_types}
              for rtype, schema in type_schemas.items()
              if schema is not None and schema.properties}
    wanted = {rtype: props for rtype, props in wanted.items() if props}
    if not wanted:
        return
    for name, rtype in types.items():
        props = wanted.get(rtype)
        if props is None:
            continue
        for ref in template.resources[name].references:
            # Only a property's value itself: (resources, name, properties, prop, function).
            if ref.is_attribute or len(ref.path) != 5 or ref.path[2] != "properties":
                continue
            allowed = props.get(str(ref.path[3]))
            found = types.get(ref.target)
            if allowed and found is not None and found not in allowed:
                problems.add(ref.path[:4], f"{ref.path[3]} must be a resource of type "
                             f"{' or '.join(allowed)} of this stack: '{ref.target}' is a "
                             f"{found}", PROPERTY)


def _check_attributes(template: Template,
                      schema_of: Callable[[str], TypeSchema | Template | None],
                      problems: Problems) -> None:
    for use in template.attribute_uses:
        schema = schema_of(use.resource)
        if schema is None:
            continue
        if isinstance(schema, Template):
            known = set(schema.outputs) | NESTED_ATTRIBUTES
            if use.attribute in known or use.attribute.startswith("resource."):
                continue
            what = "the nested template has no such output"
        else:
            if schema.attributes is None or use.attribute in schema.attributes \
                    or use.attribute == "show":
                continue
            known = set(schema.attributes)
            what = f"type '{schema.name}' has no such attribute"
        problems.add(use.path, f"get_attr: '{use.resource}' has no attribute "
                     f"'{use.attribute}': {what}{_suggest(use.attribute, known)}", REFERENCE)
