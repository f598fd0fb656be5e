"""The CLI's embedded mode: the commands call the use cases on this process's store.

Callers: ``convergence.cli.client.open_client`` builds a :class:`LocalClient` when no URL is
given (no ``--url`` / ``CONVERGENCE_URL``); it is one of the two implementations of
``convergence.cli.client.StackClient`` (the other is ``convergence.cli.remote.RemoteClient``).
It calls the use cases of ``convergence.services`` (and the plugin registry's
``type_schemas``) and nothing below them; the runtime
(the database) is opened on first use (``CliState.runtime``), so the resource type commands
and ``template validate``, which never need it, never open it.

Without a broker a command that starts work runs its traversal to the end in this process
(``convergence.cli.progress.run_to_end``). A command that looks at a stack shows it as it is
while another live process drives its work, and never waits for it; it resumes only work that
no live process is on any more (the command that started it was interrupted, or its process
died), first, showing the progress. With a broker, requests return at once unless ``--wait``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from convergence.cli import output as out
from convergence.cli.client import Refused, Request, Session
from convergence.cli.common import interruptible
from convergence.cli.listing import EventListing, ResourceListing, page_resources
from convergence.cli.progress import View, run_to_end, settle, settled
from convergence.errors import InvalidParameter, NotFound
from convergence.plugins import type_schemas
from convergence.plugins.base import CloudScope
from convergence.ports.pages import EventQuery, sorts_by_type
from convergence.ports.views import EventView, RecordView, StackView, TemplateContent
from convergence.services import (
    heat_shapes,
    hooks,
    inputs,
    operations,
    pages,
    preview,
    queries,
    stacks,
    templates,
)
from convergence.template import TemplateError, load_document

if TYPE_CHECKING:
    from convergence.heat_fields import StackQuery
    from convergence.plugins.registry import PluginRegistry
    from convergence.runtime import Runtime


class LocalClient:
    """The embedded client: the use cases on this process's store and plugin registry."""

    def __init__(self, state: Session) -> None:
        self._state = state
        self._registry: PluginRegistry | None = None

    @property
    def _rt(self) -> Runtime:
        return self._state.runtime()

    @property
    def _tenant(self) -> str:
        return self._state.tenant

    def _content(self, s: StackView) -> TemplateContent | None:
        return inputs.stack_content(self._rt, s)

    def _interrupted(self, stack: StackView) -> str:
        """What Ctrl-C leaves behind: the work for the next command, or the workers'."""
        if self._state.embedded:
            return (f"\nInterrupted: stack {stack.name} stays {stack.action}_IN_PROGRESS; "
                    "the next command that touches it resumes it.")
        return f"\nStopped waiting; the workers go on with stack {stack.name}."

    # Stacks ------------------------------------------------------------------------------

    def find_stack(self, name: str) -> StackView:
        """The stack; work on it that no live process is on any more (interrupted, or its
        process died) is finished first."""
        rt = self._rt
        stack = queries.get_stack(rt, self._tenant, name)
        with interruptible(self._interrupted(stack)):
            return settle(rt, self._tenant, stack)

    def stack_rows(self, query: StackQuery) -> list[dict[str, Any]]:
        found = pages.stack_page(self._rt, self._tenant, query).stacks
        described = inputs.descriptions(self._rt, found)
        return [out.stack_row(s, described[s.id]) for s in found]

    def stack_detail(self, s: StackView) -> dict[str, Any]:
        return out.stack_detail(s, description=inputs.descriptions(self._rt, [s])[s.id],
                                parameters=inputs.stack_parameters(self._rt, s))

    def stack_template(self, s: StackView) -> dict[str, Any]:
        content = self._content(s)
        if content is None:
            raise NotFound(f"The Stack ({s.name}) has no template.")
        doc = load_document(content.text, "template")
        return dict(doc) if isinstance(doc, Mapping) else {}

    def stack_environment(self, s: StackView) -> dict[str, Any]:
        return heat_shapes.merged_environment(self._content(s))

    def stack_files(self, s: StackView) -> dict[str, Any]:
        content = self._content(s)
        return dict(content.files) if content is not None else {}

    # Requests ----------------------------------------------------------------------------

    def preview_create(self, name: str, text: str, *, files: Mapping[str, str],
                       environments: Sequence[Any], parameters: Mapping[str, Any],
                       timeout_mins: int | None, disable_rollback: bool) -> dict[str, Any]:
        content = TemplateContent(text, dict(files), tuple(environments), dict(parameters))
        found = preview.preview_create(self._rt, self._tenant, name, content)
        deps = found.definition.dependencies
        params = inputs.definition_parameters(found.definition)
        params.update({"OS::stack_id": "None", "OS::stack_name": name,
                       "OS::project_id": self._tenant})
        return out.create_preview({
            "stack_name": name, "description": found.description, "parameters": params,
            "disable_rollback": disable_rollback, "timeout_mins": timeout_mins,
            "resources": [{"resource_name": r.name, "resource_type": r.type,
                           "required_by": sorted(o for o, d in deps.items() if r.name in d),
                           "properties": preview.plain(r.properties)}
                          for r in found.resources]})

    def preview_update(self, s: StackView, text: str | None, *, files: Mapping[str, str],
                       environments: Sequence[Any], parameters: Mapping[str, Any],
                       existing: bool) -> dict[str, Any]:
        found = preview.preview_update(self._rt, self._tenant, s.id, text, files=files,
                                       environments=environments, parameters=parameters,
                                       existing=existing)

        def kind(name: str) -> str:
            desired, head = found.desired.get(name), found.heads.get(name)
            return desired.type if desired is not None else head.type if head else ""

        return out.update_preview({
            bucket: [{"resource_name": n, "resource_type": kind(n)}
                     for n in found.changes.bucket(bucket)]
            for bucket in preview.BUCKETS})

    def create_stack(self, name: str, text: str, *, files: Mapping[str, str],
                     environments: Sequence[Any], parameters: Mapping[str, Any],
                     timeout_mins: int | None, disable_rollback: bool,
                     observe: bool = False, cloud: str | None = None) -> Request:
        return Request(stacks.create_stack(
            self._rt, self._tenant, name, text, files=files, environments=environments,
            parameters=parameters, timeout_mins=timeout_mins,
            disable_rollback=disable_rollback, observe=observe,
            scope=CloudScope(cloud=cloud)))

    def update_stack(self, name: str, text: str | None, *, files: Mapping[str, str] | None,
                     environments: Sequence[Any], parameters: Mapping[str, Any] | None,
                     existing: bool, timeout_mins: int | None, disable_rollback: bool | None,
                     watch: bool, converge: bool = False,
                     observe: bool | None = None) -> Request:
        return Request(stacks.update_stack(
            self._rt, self._tenant, name, text, files=files, environments=environments,
            parameters=parameters, existing=existing, timeout_mins=timeout_mins,
            disable_rollback=disable_rollback, converge=converge, observe=observe))

    def check_stack(self, name: str, *, watch: bool) -> Request:
        return Request(stacks.check_stack(self._rt, self._tenant, name))

    def cancel_stack(self, name: str, *, rollback: bool, watch: bool) -> Request:
        # No settling first: the request in progress is the one to cancel, not to finish.
        return Request(stacks.cancel_stack(self._rt, self._tenant, name, rollback=rollback))

    def delete_stack(self, name: str, *, watch: bool) -> Request:
        return Request(stacks.delete_stack(self._rt, self._tenant, name))

    def follows(self, wait: bool) -> bool:
        return wait or self._state.embedded  # embedded: the work runs in this process

    def follow(self, request: Request, view: View | None) -> StackView:
        """Run the request's work here (embedded) or wait for the workers, to its end."""
        stack = request.stack
        with interruptible(self._interrupted(stack)):
            return run_to_end(self._rt, self._tenant, stack.id, view=view)

    def stack_events(self, s: StackView) -> list[EventView]:
        return queries.list_events(self._rt, self._tenant, s.id)

    # Events ------------------------------------------------------------------------------

    def event_page(self, s: StackView, listing: EventListing) -> list[EventView]:
        return queries.list_events(self._rt, self._tenant, s.id, query=_event_query(listing))

    def follow_events(self, name: str, listing: EventListing,
                      on_event: Callable[[EventView], None]) -> None:
        """The stack's events, then those of its request as it runs here (or with a broker,
        as the workers run it) until it ends. No settling first: following is finishing."""
        rt = self._rt
        s = queries.get_stack(rt, self._tenant, name)
        last = 0

        def poll(_: StackView) -> None:
            nonlocal last
            for e in queries.list_events(rt, self._tenant, s.id, after=last):
                on_event(e)
                last = e.id

        poll(s)
        if not settled(s):
            with interruptible(self._interrupted(s)):
                run_to_end(rt, self._tenant, s.id, extra=poll)
        poll(s)

    # Resources ---------------------------------------------------------------------------

    def resource_rows(self, s: StackView, listing: ResourceListing) -> list[dict[str, Any]]:
        """Every version of each resource (a replaced one too, until it is cleaned up), by
        record id; filtered, sorted and cut here (``listing.page_resources``)."""
        records = sorted(queries.list_resources(self._rt, self._tenant, s.id),
                         key=lambda r: r.id)
        rows = [out.resource_fields(r) for r in records]
        if listing.with_detail or listing.nested_depth:
            rows = [{**r, "stack_name": s.name} for r in rows]
        return [dict(r) for r in page_resources(rows, listing)]

    def resource_detail(self, s: StackView, resource_name: str) -> dict[str, Any]:
        records = queries.list_resources(self._rt, self._tenant, s.id)
        record = _current(records, resource_name)
        if record is None:
            raise click.ClickException(
                f"The Resource ({resource_name}) could not be found in stack {s.name}.")
        return out.resource_detail(record, records)

    def nested_stack(self, s: StackView, resource_name: str) -> StackView | None:
        record = _current(queries.list_resources(self._rt, self._tenant, s.id), resource_name)
        child = record.attributes.get("OS::stack_id") if record is not None else None
        if not isinstance(child, str):
            return None
        try:
            return queries.get_stack(self._rt, self._tenant, child)
        except NotFound:
            return None

    def clear_hook(self, s: StackView, resource: str, hook: str) -> None:
        hooks.clear_hook(self._rt, self._tenant, s.id, resource, hook)

    def mark_resource(self, s: StackView, resource: str, *, unhealthy: bool,
                      reason: str) -> None:
        stacks.mark_resource_health(self._rt, self._tenant, s.id, resource, unhealthy,
                                    reason)

    # The engine itself (resource types: the plugin registry only) -------------------------

    @property
    def _types(self) -> PluginRegistry:
        if self._registry is None:
            self._registry = templates.default_catalog()
        return self._registry

    def resource_types(self, *, name: str | None, support_status: str | None,
                       with_description: bool) -> list[dict[str, Any]]:
        names = type_schemas.list_types(self._types, name=name, support_status=support_status)
        if with_description:
            return type_schemas.described_types(self._types, names)
        return [{"resource_type": n} for n in names]

    def resource_type(self, type_name: str) -> dict[str, Any]:
        return type_schemas.type_schema(type_schemas.schema_or_404(self._types, type_name))

    def resource_type_template(self, type_name: str, template_type: str) -> dict[str, Any]:
        type_schemas.schema_or_404(self._types, type_name)
        if template_type.lower() != "hot":
            raise InvalidParameter("template_type", f"Template type {template_type} is not "
                                   "supported; only hot templates are generated.")
        return type_schemas.template_of(self._types, type_name)

    def validate(self, file: Path, *, root: Path, env_files: Sequence[Path],
                 params: Sequence[str]) -> dict[str, Any]:
        """The template validated at its key (relative to ``root``) with the files it
        references, within the configured size limits; no database."""
        from convergence.cli.files import key_for, parse_params, sent_files
        from convergence.services.admission import SizeLimits

        location = key_for(file, root)
        try:
            files, environments = sent_files(file, file.read_bytes(), env_files, root,
                                             location=location)
            return templates.validate_template(
                file.read_bytes(), files=files, location=location,
                environments=environments, parameters=parse_params(params) if params else None,
                sizes=SizeLimits.of(self._state.settings()))
        except TemplateError as exc:
            raise Refused([str(p) for p in exc.problems],
                          [{"path": p.path, "message": p.message, "kind": p.kind}
                           for p in exc.problems]) from None

    def list_services(self) -> list[dict[str, Any]]:
        rt = self._rt
        return list(operations.list_services(rt.store, rt.settings.heartbeat_seconds))


def _current(records: Sequence[RecordView], name: str) -> RecordView | None:
    """The version of a resource the stack uses (not one being replaced)."""
    versions = [r for r in records if r.name == name]
    if not versions:
        return None
    return max(versions, key=lambda r: (r.replaced_by is None, r.id))


def _event_query(listing: EventListing) -> EventQuery:
    """The store's query for the page ``event list`` asks for."""
    wanted = listing.filters
    return EventQuery(limit=listing.limit, marker=listing.marker,
                      descending=listing.descending, by_type=sorts_by_type(listing.sort_keys),
                      resource_names=tuple(wanted.get("resource_name", ())),
                      actions=tuple(wanted.get("resource_action", ())),
                      statuses=tuple(wanted.get("resource_status", ())),
                      resource_types=tuple(wanted.get("resource_type", ())),
                      physical_ids=tuple(wanted.get("physical_resource_id", ())))
