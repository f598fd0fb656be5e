"""Previews: what a create or an update would do, computed without changing anything.

Callers: ``convergence.api.actions`` (``POST /stacks/preview``, ``PUT|PATCH .../preview``) and
the CLI's embedded client (``stack create|update --dry-run``, ``convergence.cli.local``).
The classification of an update (:func:`classify_changes`) is pure: the current records and
the desired resources in, one bucket per resource out (Heat's ``resource_changes``), deciding
each resource the way the engine's converge step does (``engine.decide.decide_converge`` with
the plugin's ``needs_replace``). The use cases around it (:func:`preview_create`,
:func:`preview_update`) read the store and resolve the new template's properties against the
current records (values that cannot be known before the change runs count as changed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from convergence.engine.decide import Action, Desired, Observed, decide_converge
from convergence.engine.definitions import build_definition
from convergence.engine.stackdata import RecordData
from convergence.errors import Conflict
from convergence.ports.views import RecordView, StackView, TemplateContent
from convergence.services.admission import check_content, check_stack_name
from convergence.services.heat_shapes import current_records
from convergence.services.queries import stack_or_404
from convergence.services.templates import requested_content
from convergence.template import (
    StackDefinition,
    StackIdentity,
    TemplateError,
    TemplateResolver,
    UnknownValue,
)
from convergence.template.properties import with_defaults

if TYPE_CHECKING:
    from convergence.services.context import Runtime

ADDED, UPDATED, REPLACED, DELETED, UNCHANGED = (
    "added", "updated", "replaced", "deleted", "unchanged")
BUCKETS = (ADDED, UPDATED, REPLACED, DELETED, UNCHANGED)


class _Unknown:
    """A property value that is only known once the change runs (never equal to a value)."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"<unknown until applied: {self.what}>"


@dataclass(frozen=True, slots=True)
class DesiredResource:
    """A resource as the new template wants it: effective type and resolved properties."""

    name: str
    type: str
    properties: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ResourceChanges:
    """Resource names in each of Heat's preview buckets (each list sorted)."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def bucket(self, name: str) -> list[str]:
        found: list[str] = getattr(self, name)
        return found


NeedsReplace = Callable[[str, Mapping[str, Any], Mapping[str, Any]], bool]


def _observed(record: RecordView) -> Observed:
    return Observed(type=record.type, action=record.action, status=record.status,
                    physical_id=record.physical_id, properties=record.properties,
                    template_id=record.template_id, operation=record.operation,
                    replaced_by=record.replaced_by)


def _exists(record: RecordView) -> bool:
    """Whether the record stands for something that exists (or may) in the cloud."""
    return not (record.action == "INIT" or
                (record.action == "DELETE" and record.status == "COMPLETE"))


def classify(record: RecordView | None, desired: DesiredResource | None,
             needs_replace: NeedsReplace) -> str:
    """The bucket of one resource name: its current record against what is wanted."""
    if desired is None:
        return DELETED if record is not None and _exists(record) else UNCHANGED
    if record is None or not _exists(record):
        return ADDED
    replace = record.type == desired.type and \
        needs_replace(desired.type, record.properties, desired.properties)
    action = decide_converge(_observed(record),
                             Desired(desired.type, desired.properties, ""), replace)
    if action is Action.NOTHING:
        return UNCHANGED
    if action in (Action.REPLACE, Action.CREATE):
        return REPLACED
    return UPDATED


def classify_changes(current: Sequence[RecordView], desired: Sequence[DesiredResource],
                     needs_replace: NeedsReplace) -> ResourceChanges:
    """Every resource's bucket. ``current``: one record per name (the stack's heads)."""
    records = {r.name: r for r in current}
    wanted = {d.name: d for d in desired}
    changes = ResourceChanges()
    for name in sorted(set(records) | set(wanted)):
        record = records.get(name)
        if record is None and name not in wanted:
            continue
        bucket = classify(record, wanted.get(name), needs_replace)
        if record is None and bucket == UNCHANGED:
            continue
        if bucket == UNCHANGED and name not in wanted:
            continue  # gone already: neither in the stack nor in the template
        changes.bucket(bucket).append(name)
    return changes


def resolve_properties(resolver: TemplateResolver, definition: StackDefinition,
                       name: str) -> dict[str, Any]:
    """One resource's properties; the values not known yet become unknown markers."""
    try:
        return resolver.properties(name)
    except UnknownValue:
        pass
    raw = definition.template.resources[name].properties
    if not isinstance(raw, Mapping):
        return {"": _Unknown(f"the properties of '{name}'")}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            out[key] = resolver.resolve(value)
        except UnknownValue as exc:
            out[key] = _Unknown(exc.what)
    return out


def desired_resources(definition: StackDefinition, resolver: TemplateResolver,
                      schemas: Callable[[str], Any]) -> list[DesiredResource]:
    """The enabled resources of a definition with resolved properties (defaults filled in)."""
    out = []
    for name, rtype in sorted(definition.resource_types.items()):
        props = resolve_properties(resolver, definition, name)
        out.append(DesiredResource(name, rtype, with_defaults(schemas(rtype), props)))
    return out


def plain(value: Any) -> Any:
    """A JSON-ready copy: unknown markers become their description."""
    if isinstance(value, _Unknown):
        return repr(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


# Use cases ---------------------------------------------------------------------------------

def _schemas(rt: Runtime) -> Callable[[str], Any]:
    def lookup(rtype: str) -> Any:
        schema = rt.registry.lookup(rtype)
        return schema.properties if schema is not None else None
    return lookup


def _needs_replace(rt: Runtime) -> NeedsReplace:
    def verdict(rtype: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        plugin = rt.registry.plugin(rtype)
        if plugin is None:
            return True
        check = getattr(plugin(), "needs_replace", None)
        return bool(check(old, new)) if check is not None else old != new
    return verdict


@dataclass(frozen=True, slots=True)
class CreatePreview:
    """What a create would make: the definition and each resource's resolved properties."""

    definition: StackDefinition
    resources: list[DesiredResource]
    description: str


def preview_create(rt: Runtime, tenant: str, name: str, content: TemplateContent
                   ) -> CreatePreview:
    """Validate a new stack (raises TemplateError, Conflict) and list what it would create."""
    check_stack_name(name)
    check_content(content, rt.settings)
    definition = build_definition(content, rt.registry)
    with rt.store.read() as tx:
        if tx.find_stack(tenant, name) is not None:
            raise Conflict(f"The Stack ({name}) already exists.")
    resolver = definition.resolver(StackIdentity(name, "None", tenant))
    return CreatePreview(definition, desired_resources(definition, resolver, _schemas(rt)),
                         definition.template.description or "")


@dataclass(frozen=True, slots=True)
class UpdatePreview:
    stack: StackView
    changes: ResourceChanges
    heads: Mapping[str, RecordView]
    desired: Mapping[str, DesiredResource]


def heads_of(records: Sequence[RecordView]) -> dict[str, RecordView]:
    """One record per name: the one the stack uses (not one being replaced)."""
    return {r.name: r for r in current_records(records)}


def preview_update(rt: Runtime, tenant: str, name_or_id: str, template: str | None, *,
                   files: Mapping[str, str] | None = None,
                   environments: Sequence[Any] | None = None,
                   parameters: Mapping[str, Any] | None = None,
                   existing: bool = False) -> UpdatePreview:
    """What an update with this input would do to each resource; nothing is changed.

    ``existing`` (PATCH): the current template, environment and parameters, with what is
    given on top, as ``convergence.services.stacks.update_stack`` does.
    """
    with rt.store.read() as tx:
        stack = stack_or_404(tx, tenant, name_or_id)
        current = tx.template(stack.template_id) if stack.template_id else None
        records = tx.records(stack.id)
    content = requested_content(current, template, files, environments, parameters,
                                existing=existing)
    check_content(content, rt.settings)
    definition = build_definition(content, rt.registry)
    heads = heads_of(records)
    resolver = definition.resolver(StackIdentity(stack.name, stack.id, stack.tenant),
                                   data=RecordData(heads))
    try:
        desired = desired_resources(definition, resolver, _schemas(rt))
    except TemplateError:
        raise
    changes = classify_changes(list(heads.values()), desired, _needs_replace(rt))
    return UpdatePreview(stack, changes, heads, {d.name: d for d in desired})
