"""The stack routes of Heat's orchestration API v1, under ``/v1/{tenant_id}``.

Callers: ``convergence.api.app`` includes :data:`router`. Each route parses the request, calls
one use case of ``convergence.services`` and shapes the answer with ``convergence.api.views``.
Every route depends on ``convergence.api.auth.require_auth`` (the tenant is the URL's, checked
against the caller's token unless in noauth mode).

A stack's canonical path is ``stacks/{name}/{id}``; a path whose second segment is not the
stack's id (``stacks/{name_or_id}[/...]``) is a lookup, answered with a 302 to the canonical
path (the rest of the path and the query string kept), for every method, as Heat does.

Update, delete and the stack actions honour ``If-Match: <generation>`` (see
:func:`if_match_generation`): 412 when the stack is no longer at that generation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from convergence import services, stack_inputs
from convergence.admission import SizeLimits
from convergence.api import bodies, event_params, ops, resource_list, stream, views
from convergence.api.auth import require_auth
from convergence.api.errors import ApiError, Redirect
from convergence.errors import Conflict, NotFound
from convergence.ports.pages import EventQuery, ResourceQuery
from convergence.ports.views import StackView, TemplateContent
from convergence.runtime import Runtime
from convergence.template import TemplateError, load_document

router = APIRouter(prefix="/v1/{tenant_id}", dependencies=[Depends(require_auth)])

_ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]


# Request plumbing ----------------------------------------------------------------------------

def runtime(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _wake(request: Request) -> None:
    """Tell the dispatcher's driver (embedded mode) that work was dispatched."""
    driver = getattr(request.app.state, "driver", None)
    if driver is not None:
        driver.wake()


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object (an empty body is an empty object); 400 when it is not
    JSON or nests deeper than a template may (``convergence.api.bodies``)."""
    raw = await request.body()
    if not raw.strip():
        return {}
    data = bodies.parse_json(raw)
    if not isinstance(data, dict):
        raise ApiError(400, "MalformedRequestBody", "The request body must be a JSON object.")
    ops.check_template_size(request, data)
    return data


def _bad(message: str) -> ApiError:
    return ApiError(400, "HTTPBadRequest", message)


def _template_text(value: Any) -> str:
    """The template as text: given as a JSON object or as a YAML/JSON string."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return json.dumps(value)
    raise _bad("The template must be a JSON object or a YAML/JSON string.")


def _mapping(body: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _bad(f"'{key}' must be a JSON object.")
    return dict(value)


def _environments(body: Mapping[str, Any], files: Mapping[str, Any]) -> list[Any]:
    """The environments in Heat's order: ``environment_files`` first, then ``environment``."""
    envs: list[Any] = []
    names = body.get("environment_files") or []
    if not isinstance(names, list):
        raise _bad("'environment_files' must be a list of names of the files map.")
    for name in names:
        if name not in files:
            raise _bad(f"environment_files: {name} is not in the files map.")
        envs.append(load_document(str(files[name]), str(name)))
    env = body.get("environment")
    if isinstance(env, str) and env.strip():
        envs.append(load_document(env, "environment"))
    elif isinstance(env, Mapping) and env:
        envs.append(dict(env))
    elif env not in (None, "", {}) and not isinstance(env, Mapping | str):
        raise _bad("'environment' must be a JSON object or a YAML string.")
    return envs


def _timeout(body: Mapping[str, Any]) -> int | None:
    value = body.get("timeout_mins")
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _bad("'timeout_mins' must be an integer.") from None


def _flag(value: Any, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def _optional_flag(body: Mapping[str, Any], key: str) -> bool | None:
    """A flag an update may leave out (or send as null): None keeps the stack's setting."""
    value = body.get(key)
    return None if value is None else _flag(value, False)


def _int_param(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise _bad(f"'{name}' must be an integer.") from None


# Stack identity --------------------------------------------------------------------------------

def _lookup_redirect(request: Request, rt: Runtime, tenant: str, name_or_id: str) -> Redirect:
    """The 302 of a lookup path: the canonical stack path, the rest and the query kept."""
    stack = services.get_stack(rt, tenant, name_or_id)
    prefix = f"/v1/{tenant}/stacks/"
    path = request.url.path
    rest = path[len(prefix):] if path.startswith(prefix) else ""
    rest = rest.split("/", 1)[1] if "/" in rest else ""
    location = views.stack_url(_base(request), stack)
    if rest:
        location += "/" + quote(rest, safe="/")
    if request.url.query:
        location += "?" + request.url.query
    return Redirect(location)


def canonical_stack(request: Request, tenant_id: str, stack_name: str, stack_id: str,
                    rt: Runtime = Depends(runtime)) -> StackView:  # noqa: B008
    """The stack at ``stacks/{name}/{id}``; a lookup redirect when ``id`` is not its id."""
    try:
        stack: StackView | None = services.get_stack(rt, tenant_id, stack_id)
    except NotFound:
        stack = None
    if stack is None or stack.id != stack_id:
        raise _lookup_redirect(request, rt, tenant_id, stack_name)
    if stack.name != stack_name:
        raise NotFound(f"The Stack ({stack_name}) could not be found.")
    return stack


def if_match_generation(request: Request) -> int | None:
    """The stack generation ``If-Match`` names (``W/"3"``, ``"3"`` or ``3``); None without the
    header or with ``*``. A value that is not a generation is a 400.

    The routes pass it to the use case as ``expected_generation``: services compares it with
    the stack's generation inside the request's transaction (412 when the stack moved past
    it), so two writers sending the same If-Match cannot both be accepted.
    """
    value = request.headers.get("if-match")
    if value is None:
        return None
    token = value.strip()
    if token.startswith("W/"):
        token = token[2:]
    token = token.strip('"')
    if token == "*":
        return None
    try:
        return int(token)
    except ValueError:
        raise _bad(f"If-Match must be a stack generation (an integer), not {value!r}.") \
            from None


def _content(rt: Runtime, stack: StackView) -> TemplateContent | None:
    if not stack.template_id:
        return None
    with rt.store.read() as tx:
        return tx.template(stack.template_id)


# Stacks ------------------------------------------------------------------------------------------

# GET /stacks (the list and its filters) is in convergence.api.stack_extras.


@router.post("/stacks", status_code=201)
def create_stack(request: Request, tenant_id: str,
                 body: dict[str, Any] = Depends(json_body),  # noqa: B008
                 rt: Runtime = Depends(runtime)) -> JSONResponse:  # noqa: B008
    name = body.get("stack_name")
    if not isinstance(name, str) or not name:
        raise _bad("'stack_name' is required.")
    if body.get("template") is None:
        if body.get("template_url"):
            raise ApiError(400, "NotSupported", "template_url is not supported; send the "
                           "template in the request.")
        raise _bad("No template specified")
    files = _mapping(body, "files")
    try:
        stack = services.create_stack(
            rt, tenant_id, name, _template_text(body["template"]), files=files,
            environments=_environments(body, files), parameters=_mapping(body, "parameters"),
            timeout_mins=_timeout(body),
            disable_rollback=_flag(body.get("disable_rollback"), False))
    except Conflict as exc:
        raise ApiError(409, "StackExists", str(exc)) from None
    _wake(request)
    url = views.stack_url(_base(request), stack)
    return JSONResponse({"stack": {"id": stack.id, "links": [{"href": url, "rel": "self"}]}},
                        status_code=201, headers={"Location": url})


@router.get("/stacks/{stack_name}/{stack_id}")
def show_stack(request: Request, resolve_outputs: str | None = None,
               stack: StackView = Depends(canonical_stack),  # noqa: B008
               rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    # Every parameter's effective value, hidden ones masked (``convergence.stack_inputs``).
    return {"stack": views.stack_detail(
        _base(request), stack, description=stack_inputs.descriptions(rt, [stack])[stack.id],
        parameters=stack_inputs.stack_parameters(rt, stack),
        resolve_outputs=_flag(resolve_outputs, True))}


def _names(body: Mapping[str, Any], key: str) -> list[str]:
    value = body.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(f"'{key}' must be a list of names")
    return value


def _update(request: Request, stack: StackView, rt: Runtime, body: Mapping[str, Any],
            existing: bool) -> JSONResponse:
    expected = if_match_generation(request)
    template = body.get("template")
    if template is None and not existing:
        if body.get("template_url"):
            raise ApiError(400, "NotSupported", "template_url is not supported; send the "
                           "template in the request.")
        raise _bad("No template specified")
    files = _mapping(body, "files")
    try:
        updated = services.update_stack(
            rt, stack.tenant, stack.id,
            _template_text(template) if template is not None else None,
            files=files, environments=_environments(body, files),
            parameters=_mapping(body, "parameters"), existing=existing,
            timeout_mins=_timeout(body), clear_parameters=_names(body, "clear_parameters"),
            disable_rollback=_optional_flag(body, "disable_rollback"),
            expected_generation=expected)
    except ValueError as exc:
        if isinstance(exc, TemplateError):
            raise
        raise _bad(str(exc)) from None
    _wake(request)
    url = views.stack_url(_base(request), updated)
    return JSONResponse({"stack": {"id": updated.id, "links": [{"href": url, "rel": "self"}],
                                   "generation": updated.generation}}, status_code=202)


@router.put("/stacks/{stack_name}/{stack_id}")
def update_stack(request: Request, stack: StackView = Depends(canonical_stack),  # noqa: B008
                 body: dict[str, Any] = Depends(json_body),  # noqa: B008
                 rt: Runtime = Depends(runtime)) -> JSONResponse:  # noqa: B008
    return _update(request, stack, rt, body, existing=False)


@router.patch("/stacks/{stack_name}/{stack_id}")
def patch_stack(request: Request, stack: StackView = Depends(canonical_stack),  # noqa: B008
                body: dict[str, Any] = Depends(json_body),  # noqa: B008
                rt: Runtime = Depends(runtime)) -> JSONResponse:  # noqa: B008
    return _update(request, stack, rt, body, existing=True)


@router.delete("/stacks/{stack_name}/{stack_id}", status_code=204)
def delete_stack(request: Request, stack: StackView = Depends(canonical_stack),  # noqa: B008
                 rt: Runtime = Depends(runtime)) -> Response:  # noqa: B008
    services.delete_stack(rt, stack.tenant, stack.id,
                          expected_generation=if_match_generation(request))
    _wake(request)
    return Response(status_code=204)


# Under a stack ---------------------------------------------------------------------------------

@router.get("/stacks/{stack_name}/{stack_id}/resources")
async def list_resources(request: Request,
                         stack: StackView = Depends(canonical_stack),  # noqa: B008
                         rt: Runtime = Depends(runtime)) -> Response:  # noqa: B008
    """Heat's resource list, paged, ordered and filtered in the database, answered chunk by
    chunk; a client that goes away stops the work (``convergence.api.resource_list``)."""
    wanted = resource_list.listing(request.query_params)
    return await resource_list.answer(request, rt, stack, wanted)


@router.get("/stacks/{stack_name}/{stack_id}/resources/{resource_name}")
def show_resource(request: Request, resource_name: str,
                  stack: StackView = Depends(canonical_stack),  # noqa: B008
                  rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    found = services.resource_page(rt, stack.tenant, stack.id,
                                   ResourceQuery(limit=1, names=(resource_name,)))
    if not found.records:
        raise NotFound(f"The Resource ({resource_name}) could not be found in Stack "
                       f"{stack.name}.")
    r = found.records[0]
    item = views.resource_item(_base(request), stack, r, found.users(r), detail=True)
    for name in request.query_params.getlist("with_attr"):  # Heat: named attributes
        item["attributes"].setdefault(name, r.attributes.get(name))
    return {"resource": item}


@router.get("/stacks/{stack_name}/{stack_id}/events")
def list_events(request: Request, marker: str | None = None, watch: str | None = None,
                wait: str | None = None,
                stack: StackView = Depends(canonical_stack),  # noqa: B008
                rt: Runtime = Depends(runtime)) -> Any:  # noqa: B008
    """Heat's event list, paged in the database (its parameters: ``api.event_params``);
    ``watch=true``: the SSE stream; ``wait=N``: long-poll for an event after the marker."""
    after = _int_param(marker, "marker")
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
    events = services.list_events(rt, stack.tenant, stack.id, query=query)
    base = _base(request)
    return {"events": [views.event_item(base, stack, e) for e in events]}


@router.get("/stacks/{stack_name}/{stack_id}/outputs")
def list_outputs(stack: StackView = Depends(canonical_stack)) -> dict[str, Any]:  # noqa: B008
    return {"outputs": [{"output_key": i["output_key"], "description": i["description"]}
                        for i in views.output_items(stack)]}


@router.get("/stacks/{stack_name}/{stack_id}/outputs/{output_key}")
def show_output(output_key: str,
                stack: StackView = Depends(canonical_stack)) -> dict[str, Any]:  # noqa: B008
    for item in views.output_items(stack):
        if item["output_key"] == output_key:
            return {"output": item}
    raise NotFound(f"The Output ({output_key}) could not be found in Stack {stack.name}.")


@router.get("/stacks/{stack_name}/{stack_id}/template")
def show_template(stack: StackView = Depends(canonical_stack),  # noqa: B008
                  rt: Runtime = Depends(runtime)) -> Any:  # noqa: B008
    content = _content(rt, stack)
    if content is None:
        raise NotFound(f"The Stack ({stack.name}) has no template.")
    return load_document(content.text, "template")


# Lookups: every other path under a stack name or id redirects to the canonical path. ---------

# Redirects for every method: kept out of the OpenAPI document (one operation per method
# would repeat the same id).
@router.api_route("/stacks/{name_or_id}", methods=_ALL_METHODS, include_in_schema=False)
def lookup_stack(request: Request, tenant_id: str, name_or_id: str,
                 rt: Runtime = Depends(runtime)) -> Response:  # noqa: B008
    raise _lookup_redirect(request, rt, tenant_id, name_or_id)


@router.api_route("/stacks/{name_or_id}/{rest:path}", methods=_ALL_METHODS,
                  include_in_schema=False)
def lookup_stack_path(request: Request, tenant_id: str, name_or_id: str, rest: str,
                      rt: Runtime = Depends(runtime)) -> Response:  # noqa: B008
    try:
        stack: StackView | None = services.get_stack(rt, tenant_id, rest.split("/", 1)[0])
    except NotFound:
        stack = None
    if stack is not None and stack.id == rest.split("/", 1)[0]:
        # A canonical path with no route (an endpoint not offered here).
        raise ApiError(404, "NotFound", f"No such endpoint: {request.method} "
                       f"{request.url.path}")
    raise _lookup_redirect(request, rt, tenant_id, name_or_id)


# Validation ------------------------------------------------------------------------------------

@router.post("/validate")
def validate(body: dict[str, Any] = Depends(json_body),  # noqa: B008
             rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    if body.get("template") is None:
        raise _bad("No template specified")
    files = _mapping(body, "files")
    environments = _environments(body, files)
    answer = services.validate_template(
        _template_text(body["template"]), files=files, environments=environments,
        parameters=_mapping(body, "parameters"), catalog=rt.registry,
        sizes=SizeLimits.of(rt.settings))
    answer["Environment"] = _mapping(body, "environment") \
        if isinstance(body.get("environment"), Mapping) else {}
    return answer
