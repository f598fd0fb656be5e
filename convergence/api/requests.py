"""Reading a request, for every route module: the runtime and the URL prefix it is served
under, the JSON body and its fields (template, files, environments, flags), query parameters,
``If-Match``, and the stack a path names (``stacks/{name}/{id}``, else a lookup redirect).

Callers: the route modules of ``convergence.api`` (``stacks``, ``actions``, ``stack_extras``,
``stream``, ``subscriptions``, ``services_api``), as FastAPI dependencies (:func:`runtime`,
:func:`json_body`, :func:`canonical_stack`) or plain helpers. A value that cannot be used is
answered 400 (:func:`bad_request`); the stack lookups call the use cases
(``convergence.services.queries``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from fastapi import Depends, Request

from convergence.api import bodies, ops, views
from convergence.api.errors import ApiError, Redirect
from convergence.errors import NotFound
from convergence.ports.views import StackView
from convergence.runtime import Runtime
from convergence.services import queries
from convergence.template import load_document


def runtime(request: Request) -> Runtime:
    """The app's runtime (``create_app``'s)."""
    rt: Runtime = request.app.state.runtime
    return rt


def base_url(request: Request) -> str:
    """The absolute prefix of this server as the client reached it (scheme, host, root)."""
    return str(request.base_url).rstrip("/")


def wake(request: Request) -> None:
    """Tell the dispatcher's driver (embedded mode) that work was dispatched."""
    driver = getattr(request.app.state, "driver", None)
    if driver is not None:
        driver.wake()


def bad_request(message: str) -> ApiError:
    return ApiError(400, "HTTPBadRequest", message)


# The body ------------------------------------------------------------------------------------

async def signal_body(request: Request) -> Any:
    """A signal's details: its JSON body, any JSON value (None when empty); 400 when it is
    not JSON or nests deeper than a template may, as :func:`json_body` (the body limit's 413
    came first)."""
    raw = await request.body()
    if not raw.strip():
        return None
    return bodies.parse_json(raw)


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


def no_template(body: Mapping[str, Any]) -> ApiError:
    """The 400 of a body without a template (``template_url`` is not supported)."""
    if body.get("template_url"):
        return ApiError(400, "NotSupported", "template_url is not supported; send the "
                        "template in the request.")
    return bad_request("No template specified")


def template_text(value: Any) -> str:
    """The template as text: given as a JSON object or as a YAML/JSON string."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return json.dumps(value)
    raise bad_request("The template must be a JSON object or a YAML/JSON string.")


def mapping(body: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The body's object ``key`` (``{}`` when absent or null)."""
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise bad_request(f"'{key}' must be a JSON object.")
    return dict(value)


def environments(body: Mapping[str, Any], files: Mapping[str, Any]) -> list[Any]:
    """The environments in Heat's order: ``environment_files`` first, then ``environment``."""
    envs: list[Any] = []
    names = body.get("environment_files") or []
    if not isinstance(names, list):
        raise bad_request("'environment_files' must be a list of names of the files map.")
    for name in names:
        if name not in files:
            raise bad_request(f"environment_files: {name} is not in the files map.")
        envs.append(load_document(str(files[name]), str(name)))
    env = body.get("environment")
    if isinstance(env, str) and env.strip():
        envs.append(load_document(env, "environment"))
    elif isinstance(env, Mapping) and env:
        envs.append(dict(env))
    elif env not in (None, "", {}) and not isinstance(env, Mapping | str):
        raise bad_request("'environment' must be a JSON object or a YAML string.")
    return envs


def timeout_mins(body: Mapping[str, Any]) -> int | None:
    value = body.get("timeout_mins")
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise bad_request("'timeout_mins' must be an integer.") from None


def flag(value: Any, default: bool) -> bool:
    """A boolean given as JSON or as a query string (``true``, ``1``, ``yes``, ``on``)."""
    if value is None:
        return default
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def optional_flag(body: Mapping[str, Any], key: str) -> bool | None:
    """A flag an update may leave out (or send as null): None keeps the stack's setting."""
    value = body.get(key)
    return None if value is None else flag(value, False)


def names(body: Mapping[str, Any], key: str) -> list[str]:
    """The body's list of names ``key`` (``[]`` when absent)."""
    value = body.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise bad_request(f"'{key}' must be a list of names")
    return value


def int_param(value: str | None, name: str) -> int | None:
    """A query parameter that must be an integer (None when absent or empty)."""
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise bad_request(f"'{name}' must be an integer.") from None


def if_match_generation(request: Request) -> int | None:
    """The stack generation ``If-Match`` names (``W/"3"``, ``"3"`` or ``3``); None without the
    header or with ``*``. A value that is not a generation is a 400.

    The routes pass it to the use case as ``expected_generation``: the use case compares it
    with the stack's generation inside the request's transaction (412 when the stack moved
    past it), so two writers sending the same If-Match cannot both be accepted.
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
        raise bad_request(f"If-Match must be a stack generation (an integer), not {value!r}.") \
            from None


# The stack a path names ------------------------------------------------------------------------

def lookup_redirect(request: Request, rt: Runtime, tenant: str, name_or_id: str) -> Redirect:
    """The 302 of a lookup path: the canonical stack path, the rest and the query kept."""
    stack = queries.get_stack(rt, tenant, name_or_id)
    prefix = f"/v1/{tenant}/stacks/"
    path = request.url.path
    rest = path[len(prefix):] if path.startswith(prefix) else ""
    rest = rest.split("/", 1)[1] if "/" in rest else ""
    location = views.stack_url(base_url(request), stack)
    if rest:
        location += "/" + quote(rest, safe="/")
    if request.url.query:
        location += "?" + request.url.query
    return Redirect(location)


def canonical_stack(request: Request, tenant_id: str, stack_name: str, stack_id: str,
                    rt: Runtime = Depends(runtime)) -> StackView:  # noqa: B008
    """The stack at ``stacks/{name}/{id}``; a lookup redirect when ``id`` is not its id."""
    try:
        stack: StackView | None = queries.get_stack(rt, tenant_id, stack_id)
    except NotFound:
        stack = None
    if stack is None or stack.id != stack_id:
        raise lookup_redirect(request, rt, tenant_id, stack_name)
    if stack.name != stack_name:
        raise NotFound(f"The Stack ({stack_name}) could not be found.")
    return stack
