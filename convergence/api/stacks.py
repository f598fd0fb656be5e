"""The stack routes of Heat's orchestration API v1, under ``/v1/{tenant_id}``.

Callers: ``convergence.api.app`` includes :data:`router`; ``convergence.api.stack_extras``
reuses :func:`event_page`. Each route reads the request (``convergence.api.requests``), calls
the use cases of ``convergence.services`` and shapes the answer with ``convergence.api.views``.
Every route depends on ``convergence.api.auth.require_auth`` (the tenant is the URL's, checked
against the caller's token unless in noauth mode) and names its Heat rule
(``convergence.api.policy.rule``); a template's resource types are checked against the
``resource_types:`` rules (``convergence.api.policy.check_types``).

A stack's canonical path is ``stacks/{name}/{id}``; a path whose second segment is not the
stack's id (``stacks/{name_or_id}[/...]``) is a lookup, answered with a 302 to the canonical
path (the rest of the path and the query string kept), for every method, as Heat does.

Update, delete and the stack actions honour ``If-Match: <generation>`` (see
``convergence.api.requests.if_match_generation``): 412 when the stack is no longer at that
generation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from convergence.api import event_params, resource_list, stream, views
from convergence.api.auth import require_auth
from convergence.api.credentials import credentials, delegation
from convergence.api.errors import ApiError
from convergence.api.policy import check_types, rule
from convergence.api.requests import (
    bad_request,
    base_url,
    canonical_stack,
    environments,
    flag,
    if_match_generation,
    int_param,
    json_body,
    lookup_redirect,
    mapping,
    names,
    no_template,
    optional_flag,
    runtime,
    template_text,
    timeout_mins,
    wake,
)
from convergence.errors import Conflict, NotFound
from convergence.heat_fields import output_items
from convergence.ports.pages import EventQuery, ResourceQuery
from convergence.ports.views import StackView
from convergence.runtime import Runtime
from convergence.services import inputs, queries, stacks, templates
from convergence.services.admission import SizeLimits
from convergence.template import TemplateError, load_document

router = APIRouter(prefix="/v1/{tenant_id}", dependencies=[Depends(require_auth)])

_ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]


# Stacks ------------------------------------------------------------------------------------------

# GET /stacks (the list and its filters) is in convergence.api.stack_extras.


@router.post("/stacks", status_code=201, dependencies=[rule("stacks:create")])
def create_stack(request: Request, tenant_id: str,
                 body: dict[str, Any] = Depends(json_body),  # noqa: B008
                 rt: Runtime = Depends(runtime)) -> JSONResponse:  # noqa: B008
    check_types(request, body)
    name = body.get("stack_name")
    if not isinstance(name, str) or not name:
        raise bad_request("'stack_name' is required.")
    if body.get("template") is None:
        raise no_template(body)
    files = mapping(body, "files")
    try:
        stack = stacks.create_stack(
            rt, tenant_id, name, template_text(body["template"]), files=files,
            environments=environments(body, files), parameters=mapping(body, "parameters"),
            timeout_mins=timeout_mins(body),
            disable_rollback=flag(body.get("disable_rollback"), False),
            observe=flag(body.get("observe"), False),
            **credentials(request, rt, tenant_id, body).create_options())
    except Conflict as exc:
        raise ApiError(409, "StackExists", str(exc)) from None
    wake(request)
    url = views.stack_url(base_url(request), stack)
    return JSONResponse({"stack": {"id": stack.id, "links": [{"href": url, "rel": "self"}]}},
                        status_code=201, headers={"Location": url})


@router.get("/stacks/{stack_name}/{stack_id}", dependencies=[rule("stacks:show")])
def show_stack(request: Request, resolve_outputs: str | None = None,
               stack: StackView = Depends(canonical_stack),  # noqa: B008
               rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    # Every parameter's effective value, hidden ones masked (``convergence.services.inputs``).
    return {"stack": views.stack_detail(
        base_url(request), stack, description=inputs.descriptions(rt, [stack])[stack.id],
        parameters=inputs.stack_parameters(rt, stack),
        resolve_outputs=flag(resolve_outputs, True))}


def _update(request: Request, stack: StackView, rt: Runtime, body: Mapping[str, Any],
            existing: bool) -> JSONResponse:
    check_types(request, body)
    expected = if_match_generation(request)
    template = body.get("template")
    if template is None and not existing:
        raise no_template(body)
    files = mapping(body, "files")
    try:
        updated = stacks.update_stack(
            rt, stack.tenant, stack.id,
            template_text(template) if template is not None else None,
            files=files, environments=environments(body, files),
            parameters=mapping(body, "parameters"), existing=existing,
            timeout_mins=timeout_mins(body), clear_parameters=names(body, "clear_parameters"),
            disable_rollback=optional_flag(body, "disable_rollback"),
            expected_generation=expected,
            converge=bool(optional_flag(body, "converge")),
            observe=optional_flag(body, "observe"),
            **credentials(request, rt, stack.tenant).update_options())
    except ValueError as exc:
        if isinstance(exc, TemplateError):
            raise
        raise bad_request(str(exc)) from None
    wake(request)
    url = views.stack_url(base_url(request), updated)
    return JSONResponse({"stack": {"id": updated.id, "links": [{"href": url, "rel": "self"}],
                                   "generation": updated.generation}}, status_code=202)


@router.put("/stacks/{stack_name}/{stack_id}", dependencies=[rule("stacks:update")])
def update_stack(request: Request, stack: StackView = Depends(canonical_stack),  # noqa: B008
                 body: dict[str, Any] = Depends(json_body),  # noqa: B008
                 rt: Runtime = Depends(runtime)) -> JSONResponse:  # noqa: B008
    return _update(request, stack, rt, body, existing=False)


@router.patch("/stacks/{stack_name}/{stack_id}", dependencies=[rule("stacks:update_patch")])
def patch_stack(request: Request, stack: StackView = Depends(canonical_stack),  # noqa: B008
                body: dict[str, Any] = Depends(json_body),  # noqa: B008
                rt: Runtime = Depends(runtime)) -> JSONResponse:  # noqa: B008
    return _update(request, stack, rt, body, existing=True)


@router.delete("/stacks/{stack_name}/{stack_id}", status_code=204,
               dependencies=[rule("stacks:delete")])
def delete_stack(request: Request, stack: StackView = Depends(canonical_stack),  # noqa: B008
                 rt: Runtime = Depends(runtime)) -> Response:  # noqa: B008
    stacks.delete_stack(rt, stack.tenant, stack.id,
                        expected_generation=if_match_generation(request))
    wake(request)
    return Response(status_code=204)


# Under a stack ---------------------------------------------------------------------------------

@router.get("/stacks/{stack_name}/{stack_id}/resources", dependencies=[rule("resource:index")])
async def list_resources(request: Request,
                         stack: StackView = Depends(canonical_stack),  # noqa: B008
                         rt: Runtime = Depends(runtime)) -> Response:  # noqa: B008
    """Heat's resource list, paged, ordered and filtered in the database, answered chunk by
    chunk; a client that goes away stops the work (``convergence.api.resource_list``)."""
    wanted = resource_list.listing(request.query_params)
    return await resource_list.answer(request, rt, stack, wanted)


@router.get("/stacks/{stack_name}/{stack_id}/resources/{resource_name}",
            dependencies=[rule("resource:show")])
def show_resource(request: Request, resource_name: str,
                  stack: StackView = Depends(canonical_stack),  # noqa: B008
                  rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    found = queries.resource_page(rt, stack.tenant, stack.id,
                                  ResourceQuery(limit=1, names=(resource_name,)))
    if not found.records:
        raise NotFound(f"The Resource ({resource_name}) could not be found in Stack "
                       f"{stack.name}.")
    r = found.records[0]
    item = views.resource_item(base_url(request), stack, r, found.users(r), detail=True)
    for name in request.query_params.getlist("with_attr"):  # Heat: named attributes
        item["attributes"].setdefault(name, r.attributes.get(name))
    return {"resource": item}


@router.get("/stacks/{stack_name}/{stack_id}/events", dependencies=[rule("events:index")])
def list_events(request: Request, marker: str | None = None, watch: str | None = None,
                wait: str | None = None,
                stack: StackView = Depends(canonical_stack),  # noqa: B008
                rt: Runtime = Depends(runtime)) -> Any:  # noqa: B008
    """Heat's event list, paged in the database (its parameters: ``api.event_params``);
    ``watch=true``: the SSE stream; ``wait=N``: long-poll for an event after the marker."""
    after = int_param(marker, "marker")
    # The long-poll's marker is where the client stands in the log (``marker=0``: before
    # everything), not necessarily an event of the stack. Parameters are checked before the
    # wait, so that a bad one answers 400 at once.
    query = event_params.event_query(request.query_params, position_marker=wait is not None)
    pushed = stream.stack_events(request, rt, stack, watch=watch, wait=wait, marker=after,
                                 answer=lambda: event_page(request, rt, stack, query))
    if pushed is not None:
        return pushed
    return event_page(request, rt, stack, query)


def event_page(request: Request, rt: Runtime, stack: StackView,
               query: EventQuery) -> dict[str, Any]:
    """One page of the stack's events, as Heat's event list answers it."""
    events = queries.list_events(rt, stack.tenant, stack.id, query=query)
    base = base_url(request)
    return {"events": [views.event_item(base, stack, e) for e in events]}


@router.get("/stacks/{stack_name}/{stack_id}/outputs", dependencies=[rule("stacks:list_outputs")])
def list_outputs(stack: StackView = Depends(canonical_stack)) -> dict[str, Any]:  # noqa: B008
    return {"outputs": [{"output_key": i["output_key"], "description": i["description"]}
                        for i in output_items(stack)]}


@router.get("/stacks/{stack_name}/{stack_id}/outputs/{output_key}",
            dependencies=[rule("stacks:show_output")])
def show_output(output_key: str,
                stack: StackView = Depends(canonical_stack)) -> dict[str, Any]:  # noqa: B008
    for item in output_items(stack):
        if item["output_key"] == output_key:
            return {"output": item}
    raise NotFound(f"The Output ({output_key}) could not be found in Stack {stack.name}.")


@router.get("/stacks/{stack_name}/{stack_id}/template", dependencies=[rule("stacks:template")])
def show_template(stack: StackView = Depends(canonical_stack),  # noqa: B008
                  rt: Runtime = Depends(runtime)) -> Any:  # noqa: B008
    content = inputs.stack_content(rt, stack)
    if content is None:
        raise NotFound(f"The Stack ({stack.name}) has no template.")
    return load_document(content.text, "template")


# Lookups: every other path under a stack name or id redirects to the canonical path. ---------

# Redirects for every method: kept out of the OpenAPI document (one operation per method
# would repeat the same id).
@router.api_route("/stacks/{name_or_id}", methods=_ALL_METHODS, include_in_schema=False,
                  dependencies=[rule("stacks:lookup")])
def lookup_stack(request: Request, tenant_id: str, name_or_id: str,
                 rt: Runtime = Depends(runtime)) -> Response:  # noqa: B008
    raise lookup_redirect(request, rt, tenant_id, name_or_id)


@router.api_route("/stacks/{name_or_id}/{rest:path}", methods=_ALL_METHODS,
                  include_in_schema=False, dependencies=[rule("stacks:lookup")])
def lookup_stack_path(request: Request, tenant_id: str, name_or_id: str, rest: str,
                      rt: Runtime = Depends(runtime)) -> Response:  # noqa: B008
    try:
        stack: StackView | None = queries.get_stack(rt, tenant_id, rest.split("/", 1)[0])
    except NotFound:
        stack = None
    if stack is not None and stack.id == rest.split("/", 1)[0]:
        # A canonical path with no route (an endpoint not offered here).
        raise ApiError(404, "NotFound", f"No such endpoint: {request.method} "
                       f"{request.url.path}")
    raise lookup_redirect(request, rt, tenant_id, name_or_id)


# Validation ------------------------------------------------------------------------------------

@router.post("/validate", dependencies=[rule("stacks:validate_template")])
def validate(request: Request, tenant_id: str,
             body: dict[str, Any] = Depends(json_body),  # noqa: B008
             rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    check_types(request, body)
    if body.get("template") is None:
        raise bad_request("No template specified")
    files = mapping(body, "files")
    envs = environments(body, files)
    answer = templates.validate_template(
        template_text(body["template"]), files=files, environments=envs,
        parameters=mapping(body, "parameters"), catalog=rt.registry,
        sizes=SizeLimits.of(rt.settings), caller=delegation(request, tenant_id))
    answer["Environment"] = mapping(body, "environment") \
        if isinstance(body.get("environment"), Mapping) else {}
    return answer
