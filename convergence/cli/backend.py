"""What the CLI's commands ask of a stack engine, whichever mode it runs in: :class:`Backend`.

Two implementations with the same methods: ``convergence.cli.remote.RemoteClient`` (remote
mode: Heat's API over HTTP) and :class:`LocalClient` (embedded: the use cases of
``convergence.services`` and its neighbours, on this process's store). :func:`open_backend`
hands a command the one its invocation needs, so that a command is written once, not once a
mode. Both answer with the same plain dicts (Heat's field names, shaped by
``convergence.cli.output``), so the output is the same in both modes.

Callers: ``convergence.cli.stack_cmd``, ``convergence.cli.resource_cmd`` and
``convergence.cli.stack_info_cmd``. A stack is found first by the command (``stack_cmd._stack``,
which in embedded mode finishes the stack's interrupted work), then handed to the backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from convergence import preview, services, stack_inputs, stack_pages
from convergence.cli import output as out
from convergence.cli.listing import ResourceListing, page_resources
from convergence.errors import InvalidParameter, NotFound
from convergence.plugins import type_schemas
from convergence.plugins.registry import PluginRegistry
from convergence.stack_pages import StackQuery
from convergence.store.views import StackView, TemplateContent
from convergence.template import load_document

if TYPE_CHECKING:
    from convergence.cli.state import CliState
    from convergence.runtime import Runtime


class Backend(Protocol):
    """The stack engine as the CLI's commands see it (one tenant's)."""

    def stack_rows(self, query: StackQuery) -> list[dict[str, Any]]: ...

    def stack_detail(self, s: StackView) -> dict[str, Any]: ...

    def stack_template(self, s: StackView) -> dict[str, Any]: ...

    def stack_environment(self, s: StackView) -> dict[str, Any]: ...

    def stack_files(self, s: StackView) -> dict[str, Any]: ...

    def preview_create(self, name: str, text: str, *, files: Mapping[str, str],
                       environments: Sequence[Any], parameters: Mapping[str, Any],
                       timeout_mins: int | None, disable_rollback: bool) -> dict[str, Any]: ...

    def preview_update(self, s: StackView, text: str | None, *, files: Mapping[str, str],
                       environments: Sequence[Any], parameters: Mapping[str, Any],
                       existing: bool) -> dict[str, Any]: ...

    def resource_rows(self, s: StackView,
                      listing: ResourceListing) -> list[dict[str, Any]]: ...

    def nested_stack(self, s: StackView, resource_name: str) -> StackView | None: ...

    def mark_resource(self, s: StackView, resource: str, *, unhealthy: bool,
                      reason: str) -> None: ...

    def resource_types(self, *, name: str | None, support_status: str | None,
                       with_description: bool) -> list[dict[str, Any]]: ...

    def resource_type(self, type_name: str) -> dict[str, Any]: ...

    def resource_type_template(self, type_name: str, template_type: str) -> dict[str, Any]: ...


def open_backend(state: CliState) -> Backend:
    """The API client in remote mode, else the embedded backend."""
    return state.remote() or LocalClient(state)


class LocalClient:
    """The embedded backend: the use cases on this process's store and plugin registry.

    The runtime (the database) is opened on first use, so that the resource type commands,
    which only read the plugin registry, never open it.
    """

    def __init__(self, state: CliState) -> None:
        self._state = state
        self._registry: PluginRegistry | None = None

    @property
    def _rt(self) -> Runtime:
        return self._state.runtime()

    @property
    def _tenant(self) -> str:
        return self._state.tenant

    def _content(self, s: StackView) -> TemplateContent | None:
        return stack_inputs.stack_content(self._rt, s)

    # Stacks ------------------------------------------------------------------------------

    def stack_rows(self, query: StackQuery) -> list[dict[str, Any]]:
        listed = services.list_stacks(self._rt, self._tenant,
                                      include_deleted=query.include_deleted)
        found = stack_pages.page(listed, query).stacks
        described = stack_inputs.descriptions(self._rt, found)
        return [out.stack_row(s, described[s.id]) for s in found]

    def stack_detail(self, s: StackView) -> dict[str, Any]:
        return out.stack_detail(s, description=stack_inputs.descriptions(self._rt, [s])[s.id],
                                parameters=stack_inputs.stack_parameters(self._rt, s))

    def stack_template(self, s: StackView) -> dict[str, Any]:
        content = self._content(s)
        if content is None:
            raise NotFound(f"The Stack ({s.name}) has no template.")
        doc = load_document(content.text, "template")
        return dict(doc) if isinstance(doc, Mapping) else {}

    def stack_environment(self, s: StackView) -> dict[str, Any]:
        return services.merged_environment(self._content(s))

    def stack_files(self, s: StackView) -> dict[str, Any]:
        content = self._content(s)
        return dict(content.files) if content is not None else {}

    def preview_create(self, name: str, text: str, *, files: Mapping[str, str],
                       environments: Sequence[Any], parameters: Mapping[str, Any],
                       timeout_mins: int | None, disable_rollback: bool) -> dict[str, Any]:
        content = TemplateContent(text, dict(files), tuple(environments), dict(parameters))
        found = preview.preview_create(self._rt, self._tenant, name, content)
        deps = found.definition.dependencies
        params = stack_inputs.definition_parameters(found.definition)
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

    # Resources ---------------------------------------------------------------------------

    def resource_rows(self, s: StackView, listing: ResourceListing) -> list[dict[str, Any]]:
        """Every version of each resource (a replaced one too, until it is cleaned up), by
        record id; filtered, sorted and cut here (``listing.page_resources``)."""
        records = sorted(services.list_resources(self._rt, self._tenant, s.id),
                         key=lambda r: r.id)
        rows = [out.resource_fields(r) for r in records]
        if listing.with_detail or listing.nested_depth:
            rows = [{**r, "stack_name": s.name} for r in rows]
        return [dict(r) for r in page_resources(rows, listing)]

    def nested_stack(self, s: StackView, resource_name: str) -> StackView | None:
        return None  # no resource type makes a nested stack here yet

    def mark_resource(self, s: StackView, resource: str, *, unhealthy: bool,
                      reason: str) -> None:
        services.mark_resource_health(self._rt, self._tenant, s.id, resource, unhealthy,
                                      reason)

    # Resource types (the plugin registry only) --------------------------------------------

    @property
    def _types(self) -> PluginRegistry:
        if self._registry is None:
            self._registry = services.default_catalog()
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
