"""More routes of Heat's orchestration API v1 under ``/v1/{tenant_id}``: the stack list with
its filters, a stack's environment and files, export and abandon, event detail, a resource's
events and metadata, mark-unhealthy and signals.

Callers: ``convergence.api.app`` includes :data:`router` before the stack routes (whose lookup
routes would otherwise take the ``stacks/{name}/{id}/...`` paths added here). The stack list
lives here rather than in ``convergence.api.stacks``. Requests are read with
``convergence.api.requests``; every read and change is a use case of ``convergence.services``.

- ``GET /stacks``: filters ``id``, ``name``, ``status``, ``action`` (repeatable; a status
  matches ``COMPLETE`` or ``CREATE_COMPLETE``), ``show_deleted``, ``show_nested`` (nested
  stacks are left out unless it is true, as in Heat), ``sort_keys`` (repeatable:
  ``stack_name``, ``stack_status``, ``creation_time``, ``updated_time``), ``sort_dir``,
  ``limit``/``marker`` paging (``convergence.services.pages``) and ``with_count`` (adds
  ``count``, the number before paging); each stack with its template's ``description``.
- ``GET .../environment``, ``.../files``: from the stored template content.
- ``GET .../export``, ``DELETE .../abandon``: Heat's abandon blob; abandon also forgets the
  stack's records (the physical resources stay) and leaves the stack DELETE_COMPLETE.
- ``GET .../events/{id}`` and ``.../resources/{name}/events[/{id}]``.
- ``GET .../progress`` (an extension): how far the stack's latest request has got, its
  traversal's counters; ``watch=true``: a stream of it (``convergence.api.stream``).
- ``GET .../resources/{name}/metadata``: the template's ``metadata`` of the resource.
- ``PATCH .../resources/{name_or_physical_id}``: ``mark_unhealthy``; the resource becomes
  CHECK_FAILED and the next update replaces it.
- ``POST .../resources/{name}/signal``: routed by ``convergence.services.resource_signals``:
  ``{"unset_hook": "pre-create"}`` clears a hook the resource is paused on; a scaling policy
  scales its group, a wait condition handle keeps the signal, a software deployment takes
  its agent's report; a type that takes no signals answers 400 NotSupported.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from convergence.api import event_params, stream, views
from convergence.api.auth import require_auth
from convergence.api.errors import ApiError
from convergence.api.policy import rule
from convergence.api.requests import (
    bad_request,
    base_url,
    canonical_stack,
    flag,
    int_param,
    json_body,
    runtime,
    signal_body,
)
from convergence.api.stacks import event_page
from convergence.errors import Conflict, NotFound
from convergence.heat_fields import FILTER_KEYS, StackQuery
from convergence.ports.pages import EventQuery
from convergence.ports.views import EventView, RecordView, StackView
from convergence.runtime import Runtime
from convergence.services import heat_shapes, inputs, pages, queries, resource_signals, stacks

router = APIRouter(prefix="/v1/{tenant_id}", dependencies=[Depends(require_auth)])


# The stack list ---------------------------------------------------------------------------------

@router.get("/stacks", dependencies=[rule("stacks:index")])
def list_stacks(request: Request, tenant_id: str,
                rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    query = request.query_params
    sort_dir = (query.get("sort_dir") or "desc").lower()
    if sort_dir not in ("asc", "desc"):
        raise bad_request("'sort_dir' must be asc or desc.")
    wanted = StackQuery(
        filters={k: query.getlist(k) for k in FILTER_KEYS if query.getlist(k)},
        sort_keys=query.getlist("sort_keys") or ["creation_time"],
        descending=sort_dir == "desc", marker=query.get("marker") or None,
        limit=int_param(query.get("limit"), "limit"),
        include_deleted=flag(query.get("show_deleted"), False),
        show_nested=flag(query.get("show_nested"), False))
    found = pages.stack_page(rt, tenant_id, wanted)
    listed = found.stacks
    body: dict[str, Any] = {}
    if found.more and listed:
        rest = [(k, v) for k, v in query.multi_items() if k not in ("limit", "marker")]
        params = "&".join(f"{quote(k)}={quote(v)}" for k, v in rest)
        href = f"{base_url(request)}/v1/{tenant_id}/stacks?limit={wanted.limit}" \
            f"&marker={quote(listed[-1].id)}" + (f"&{params}" if params else "")
        body["links"] = [{"rel": "next", "href": href}]
    described = inputs.descriptions(rt, listed)
    body["stacks"] = [views.stack_summary(base_url(request), s, description=described[s.id])
                      for s in listed]
    if flag(query.get("with_count"), False):
        body["count"] = found.count
    return body


# Environment, files, export, abandon ------------------------------------------------------------

@router.get("/stacks/{stack_name}/{stack_id}/environment",
            dependencies=[rule("stacks:environment")])
def show_environment(stack: StackView = Depends(canonical_stack),  # noqa: B008
                     rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    return heat_shapes.merged_environment(inputs.stack_content(rt, stack))


@router.get("/stacks/{stack_name}/{stack_id}/files", dependencies=[rule("stacks:files")])
def show_files(stack: StackView = Depends(canonical_stack),  # noqa: B008
               rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    content = inputs.stack_content(rt, stack)
    return dict(content.files) if content is not None else {}


@router.get("/stacks/{stack_name}/{stack_id}/export", dependencies=[rule("stacks:export")])
def export_stack(stack: StackView = Depends(canonical_stack),  # noqa: B008
                 rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    return queries.export_stack(rt, stack.tenant, stack.id)


@router.delete("/stacks/{stack_name}/{stack_id}/abandon", dependencies=[rule("stacks:abandon")])
def abandon_stack(stack: StackView = Depends(canonical_stack),  # noqa: B008
                  rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    try:
        return stacks.abandon_stack(rt, stack.tenant, stack.id)
    except Conflict as exc:
        raise ApiError(409, "ActionInProgress", str(exc)) from None


# Events ------------------------------------------------------------------------------------------

def _event_detail(request: Request, rt: Runtime, stack: StackView, event_id: str,
                  resource_name: str | None = None) -> dict[str, Any]:
    missing = NotFound(f"The Event ({event_id}) could not be found in Stack {stack.name}.")
    try:
        wanted = int(event_id)
    except ValueError:
        raise missing from None
    found: EventView | None = next(
        (e for e, _ in queries.events_after(rt, stack, wanted - 1, limit=1)
         if e.id == wanted), None) if wanted > 0 else None
    if found is None or (resource_name is not None and found.resource_name != resource_name):
        raise missing
    item = views.event_item(base_url(request), stack, found)
    item["resource_type"] = found.resource_type
    record = _record(rt, stack, found.resource_name)
    same = record is not None and record.physical_id == found.physical_resource_id
    item["resource_properties"] = dict(record.properties) if same and record else {}
    return {"event": item}


@router.get("/stacks/{stack_name}/{stack_id}/events/{event_id}", dependencies=[rule("events:show")])
def show_event(request: Request, event_id: str,
               stack: StackView = Depends(canonical_stack),  # noqa: B008
               rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    return _event_detail(request, rt, stack, event_id)


@router.get("/stacks/{stack_name}/{stack_id}/resources/{resource_name}/events/{event_id}",
            dependencies=[rule("events:show")])
def show_resource_event(request: Request, resource_name: str, event_id: str,
                        stack: StackView = Depends(canonical_stack),  # noqa: B008
                        rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    return _event_detail(request, rt, stack, event_id, resource_name)


@router.get("/stacks/{stack_name}/{stack_id}/resources/{resource_name}/events",
            dependencies=[rule("events:index")])
def list_resource_events(request: Request, resource_name: str,
                         stack: StackView = Depends(canonical_stack),  # noqa: B008
                         rt: Runtime = Depends(runtime)) -> Any:  # noqa: B008
    """One resource's events: the stack's event list with its ``resource_name`` (same
    parameters, paged in the database). 404 when the stack has no such resource and never
    had (no event names it)."""
    query = event_params.event_query(request.query_params, resource_name=resource_name)
    answer = event_page(request, rt, stack, query)
    if not answer["events"] and _record(rt, stack, resource_name) is None and \
            not queries.list_events(rt, stack.tenant, stack.id, query=EventQuery(
                limit=1, resource_names=(resource_name,))):
        raise _no_resource(stack, resource_name)
    return answer


@router.get("/stacks/{stack_name}/{stack_id}/progress", dependencies=[rule("stacks:progress")])
def show_progress(request: Request, watch: str | None = None,
                  stack: StackView = Depends(canonical_stack),  # noqa: B008
                  rt: Runtime = Depends(runtime)) -> Any:  # noqa: B008
    """How far the stack's latest request has got; ``watch=true``: as it goes (SSE)."""
    return stream.stack_progress(request, rt, stack, watch)


# Resources ---------------------------------------------------------------------------------------

def _no_resource(stack: StackView, name: str) -> NotFound:
    return NotFound(f"The Resource ({name}) could not be found in Stack {stack.name}.")


def _record(rt: Runtime, stack: StackView, name: str) -> RecordView | None:
    return queries.current_resource(rt, stack.tenant, stack.id, name)


@router.get("/stacks/{stack_name}/{stack_id}/resources/{resource_name}/metadata",
            dependencies=[rule("resource:metadata")])
def show_metadata(resource_name: str, stack: StackView = Depends(canonical_stack),  # noqa: B008
                  rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    if _record(rt, stack, resource_name) is None:
        raise _no_resource(stack, resource_name)
    return {"metadata": heat_shapes.resource_metadata(inputs.stack_content(rt, stack),
                                                      resource_name)}


@router.patch("/stacks/{stack_name}/{stack_id}/resources/{resource_name}",
              dependencies=[rule("resource:mark_unhealthy")])
def mark_unhealthy(resource_name: str, stack: StackView = Depends(canonical_stack),  # noqa: B008
                   body: dict[str, Any] = Depends(json_body),  # noqa: B008
                   rt: Runtime = Depends(runtime)) -> Response:  # noqa: B008
    allowed = {"mark_unhealthy", "resource_status_reason"}
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise bad_request(f"Invalid keys in the body {unknown}: allowed are "
                          f"{', '.join(sorted(allowed))}.")
    if "mark_unhealthy" not in body:
        raise bad_request("'mark_unhealthy' is required.")
    unhealthy = body["mark_unhealthy"]
    if isinstance(unhealthy, str):
        if unhealthy.strip().lower() not in ("true", "false", "1", "0", "yes", "no", "on",
                                             "off"):
            raise bad_request("'mark_unhealthy' must be a boolean.")
    elif not isinstance(unhealthy, bool):
        raise bad_request("'mark_unhealthy' must be a boolean.")
    reason = body.get("resource_status_reason") or ""
    if not isinstance(reason, str):
        raise bad_request("'resource_status_reason' must be a string.")
    try:
        stacks.mark_resource_health(rt, stack.tenant, stack.id, resource_name,
                                    flag(unhealthy, False), reason)
    except Conflict as exc:
        raise ApiError(409, "ActionInProgress", str(exc)) from None
    return JSONResponse(None, status_code=200)


@router.post("/stacks/{stack_name}/{stack_id}/resources/{resource_name}/signal",
             dependencies=[rule("resource:signal")])
async def signal_resource(request: Request, resource_name: str,
                          stack: StackView = Depends(canonical_stack),  # noqa: B008
                          rt: Runtime = Depends(runtime)) -> Response:  # noqa: B008
    details = await signal_body(request)
    await run_in_threadpool(resource_signals.signal, rt, stack.tenant, stack.id,
                            resource_name, details)
    return JSONResponse(None, status_code=200)
