"""Stacks, resources, events and outputs as Heat's API shows them (field names and links).

Callers: the route modules of ``convergence.api`` (``stacks``, ``actions``, ``stack_extras``,
``requests``, ``resource_list``, ``stream``). Plain functions from the store's views to
JSON-ready dicts; ``base`` is the absolute URL prefix of the request (scheme, host, root path),
so that links are right behind a proxy too. Extensions to Heat's fields: ``generation`` and
``observed_generation``. Heat's time format and a stack's outputs, which the CLI shows too,
are ``convergence.heat_fields``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from convergence.heat_fields import iso, output_items
from convergence.ports.views import EventView, RecordView, StackView


def stack_url(base: str, s: StackView) -> str:
    """The canonical URL of a stack: ``<base>/v1/{tenant}/stacks/{name}/{id}``."""
    return (f"{base}/v1/{quote(s.tenant, safe='')}/stacks/"
            f"{quote(s.name, safe='')}/{quote(s.id, safe='')}")


def _self(href: str) -> list[dict[str, str]]:
    return [{"href": href, "rel": "self"}]


def stack_summary(base: str, s: StackView, *, description: str = "") -> dict[str, Any]:
    """A stack as Heat's list shows it (the basic keys, ``description`` its template's), plus
    the generations."""
    return {
        "id": s.id,
        "stack_name": s.name,
        "links": _self(stack_url(base, s)),
        "description": description,
        "stack_status": s.stack_status,
        "stack_status_reason": s.status_reason,
        "creation_time": iso(s.created_at),
        "updated_time": iso(s.updated_at),
        "deletion_time": iso(s.deleted_at),
        "stack_owner": None,
        "parent": s.parent_id,
        "stack_user_project_id": None,
        "tags": None,
        "generation": s.generation,
        "observed_generation": s.observed_generation,
    }


def stack_detail(base: str, s: StackView, *, description: str = "",
                 parameters: Mapping[str, Any] | None = None,
                 resolve_outputs: bool = True) -> dict[str, Any]:
    """A stack as Heat's show answers it."""
    out = stack_summary(base, s, description=description)
    out["template_description"] = description
    out["capabilities"] = []
    out["notification_topics"] = []
    out["disable_rollback"] = s.disable_rollback
    out["timeout_mins"] = s.timeout_mins
    params = {k: v if isinstance(v, str) else str(v) for k, v in (parameters or {}).items()}
    params.update({"OS::stack_id": s.id, "OS::stack_name": s.name, "OS::project_id": s.tenant})
    out["parameters"] = params
    if resolve_outputs:
        out["outputs"] = output_items(s)
    return out


def resource_item(base: str, s: StackView, r: RecordView, required_by: Sequence[str], *,
                  detail: bool = False) -> dict[str, Any]:
    """A resource as Heat's resource list (or, with ``detail``, show) answers it.
    ``required_by``: the names of the records built on it, as the store reads them for a page
    (``convergence.ports.pages.ResourcePage.users``)."""
    stack_href = stack_url(base, s)
    out: dict[str, Any] = {
        "resource_name": r.name,
        "logical_resource_id": r.name,
        "physical_resource_id": r.physical_id or "",
        "resource_type": r.type,
        "resource_status": f"{r.action}_{r.status}",
        "resource_status_reason": r.status_reason,
        "required_by": list(required_by),
        "creation_time": iso(r.created_at),
        "updated_time": iso(r.updated_at or r.created_at),
        "links": [{"href": f"{stack_href}/resources/{quote(r.name, safe='')}", "rel": "self"},
                  {"href": stack_href, "rel": "stack"}],
        "generation": r.generation,
    }
    nested = _nested_stack_url(base, s, r)
    if nested is not None:
        out["links"].append({"href": nested, "rel": "nested"})
    if s.parent_resource is not None:
        out["parent_resource"] = s.parent_resource
    if detail:
        out["description"] = ""
        out["attributes"] = dict(r.attributes)
    return out


def _nested_stack_url(base: str, s: StackView, r: RecordView) -> str | None:
    """The nested stack a resource made (its attributes name it), as Heat links it."""
    child_id = r.attributes.get("OS::stack_id") if r.attributes else None
    child_name = r.attributes.get("OS::stack_name") if r.attributes else None
    if not isinstance(child_id, str) or not isinstance(child_name, str):
        return None
    return f"{base}/v1/{quote(s.tenant, safe='')}/stacks/{quote(child_name, safe='')}/" \
        f"{quote(child_id, safe='')}"


def event_item(base: str, s: StackView, e: EventView) -> dict[str, Any]:
    """An event as Heat's event list answers it."""
    stack_href = stack_url(base, s)
    resource_href = f"{stack_href}/resources/{quote(e.resource_name, safe='')}"
    return {
        "id": str(e.id),
        "event_time": iso(e.created_at),
        "resource_name": e.resource_name,
        "logical_resource_id": e.resource_name,
        "physical_resource_id": e.physical_resource_id or "",
        "resource_status": f"{e.action}_{e.status}",
        "resource_status_reason": e.reason,
        "links": [{"href": f"{resource_href}/events/{e.id}", "rel": "self"},
                  {"href": resource_href, "rel": "resource"},
                  {"href": stack_href, "rel": "stack"}],
        "generation": e.generation,
    }
