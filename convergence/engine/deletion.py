"""Deletion policies: what the cleanup of a record does with what it made in the cloud.

``Delete`` removes it, ``Retain`` lets go of it and leaves it in the cloud, ``Snapshot`` has
the plugin take a snapshot of it first (only types that declare they can; validation refuses
the others). Callers: the step (:mod:`convergence.engine.step`), whose converge phase stamps on
every record it changes the policy of the definition it acted for (:func:`definition_policy`),
as do the parts of the engine that make records (:mod:`~convergence.engine.planning`,
:mod:`~convergence.engine.claim` and :mod:`~convergence.engine.batch`, for a replacement), and
the engine (``Engine._deletion_policy``), which reads it back for a cleanup
(:func:`record_policy`).

A Retain resource is never deleted, whatever becomes of its template. A template converged
long ago may no longer validate (a plugin upgrade removed an attribute it reads, a parameter's
constraint now fails), and a resource may be cleaned up before it ever converged (a stack
deleted while it is being created, a rollback of its failed create). So a cleanup does not
resolve the template at all when it can help it: the record carries its policy, resolved when
a step acted on it, from parameters only, as Heat resolves it when it builds a definition.
Records stamped by nobody (converged before the stamp existed) fall back on the template they
were converged to, on that resource's own definition if the whole no longer validates; when
the policy still cannot be told, nothing is deleted: the delete fails, saying why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from convergence.ports.views import RecordView, TemplateContent
from convergence.template import (
    Problems,
    StackDefinition,
    TemplateError,
    TemplateResolver,
    UnknownValue,
    merge_environments,
    parse_environment,
)
from convergence.template.functions.base import has_calls
from convergence.template.parameters import resolve_values
from convergence.template.parse import parse_collecting
from convergence.template.source import Limits

DELETE, RETAIN, SNAPSHOT = "Delete", "Retain", "Snapshot"
_SPELLINGS = {p.lower(): p for p in (DELETE, RETAIN, SNAPSHOT)}  # HOT allows lower case too


def canonical(value: Any) -> str | None:
    """``Retain`` for ``Retain`` or ``retain``; None for anything that is no policy."""
    return _SPELLINGS.get(value.lower()) if isinstance(value, str) else None


def definition_policy(definition: StackDefinition, name: str) -> str | None:
    """The policy ``definition`` gives resource ``name``; None when it cannot be told."""
    resource = definition.template.resources.get(name)
    if resource is None:
        return None
    if resource.external_id is not None:
        return RETAIN  # not the stack's to delete: it was there before, as Heat leaves it
    if isinstance(resource.deletion_policy, str):  # as written: nothing to resolve
        return canonical(resource.deletion_policy)
    try:
        return canonical(definition.resolver().resolve(resource.deletion_policy))
    except (TemplateError, UnknownValue):
        return None


def record_policy(record: RecordView, definition: Callable[[str], StackDefinition],
                  content: Callable[[str], TemplateContent]) -> str | None:
    """The policy of what ``record`` made; None when it cannot be told (delete nothing).

    ``definition`` and ``content`` give a stored template by id, validated and as stored.
    """
    if record.deletion_policy is not None:
        return canonical(record.deletion_policy)
    if record.template_id is None:
        # Acted on by no step that recorded a result (a crash before its first one): no
        # definition ever applied to it, and what an interrupted create made is removed.
        return DELETE
    try:
        return definition_policy(definition(record.template_id), record.name)
    except TemplateError:
        return stored_policy(content(record.template_id), record.name)


def stored_policy(content: TemplateContent, name: str) -> str | None:
    """The policy stored content gives resource ``name``, read from that resource's own
    definition and the parameters: for a template that no longer validates as a whole."""
    problems = Problems()  # the template's problems are no concern here, only the policy
    limits = Limits(max_bytes=max(len(content.text.encode()) + 1, 1024 * 1024))
    template = parse_collecting(content.text, problems, files=dict(content.files),
                                limits=limits)
    resource = template.resources.get(name) if template is not None else None
    if template is None or resource is None:
        return None
    if not has_calls(resource.deletion_policy):
        return canonical(resource.deletion_policy)
    try:
        env = merge_environments([parse_environment(doc, f"environment[{i}]", problems)
                                  for i, doc in enumerate(content.environments)])
        values = resolve_values(template.parameters, {**env.parameters, **content.parameters},
                                env.parameter_defaults, problems, require_all=False)
        return canonical(TemplateResolver(template, values).resolve(resource.deletion_policy))
    except (TemplateError, UnknownValue):
        return None
