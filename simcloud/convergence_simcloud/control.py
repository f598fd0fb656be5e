"""The simulated cloud's control plane: ``/_sim/`` routes for fault rules and the request
journal, and the ASGI middleware that applies request faults and journals every request.

Callers: ``convergence_simcloud.app`` includes :data:`router` and wraps the whole app in
:class:`Middleware`; ``convergence_simcloud.client.SimControl`` is the typed client of these
routes. The routes are the simulator's own, not OpenStack's, so they take no Keystone token:
on loopback they are open; a cloud served elsewhere has a control token that
``convergence_simcloud.control_auth`` checks before these routes are reached. Rules
(``convergence_simcloud.faults``) are listed, added, read and removed under ``/_sim/rules``;
the journal (method, path, query, status, service, project, time on the cloud's clock, wall
seconds spent answering) is read from ``/_sim/journal`` with ``since`` (a sequence number),
``service``, ``method``, ``project_id`` and ``path`` (a glob) filters; ``/_sim/objects``
counts the objects of each kind. Requests to ``/_sim/`` are not journaled.
"""

from __future__ import annotations

import asyncio
import fnmatch
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from convergence_simcloud import faults
from convergence_simcloud.catalog import PREFIXES
from convergence_simcloud.context import CloudError, cloud_of, token_record
from convergence_simcloud.state import SimCloud

router = APIRouter(prefix="/_sim")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def service_of(path: str) -> str | None:
    """The service a request path belongs to (None: the control plane or the root)."""
    for service, prefix in PREFIXES.items():
        if path == prefix or path.startswith(prefix + "/"):
            return service
    if path == "/compute" or path.startswith("/compute/"):
        return "compute"
    if path == "/volume" or path.startswith("/volume/"):
        return "volume"
    return None


# -- middleware ----------------------------------------------------------------------------

class Middleware:
    """Applies request fault rules before the app sees a request and journals the answer."""

    def __init__(self, app: ASGIApp, cloud: SimCloud,
                 error_body: Callable[[CloudError], dict[str, Any]]) -> None:
        self.app = app
        self.cloud = cloud
        self.error_body = error_body
        self.journal = cloud.journal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/_sim"):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        # The cloud's clock when the request came: read after the answer, it may be later
        # already (the caller, answered, moved a manual clock on before this line ran).
        arrived = self.cloud.now()
        method, path = scope["method"], scope["path"]
        service = service_of(path)
        token_id = _header(scope, b"x-auth-token")
        cloud = self.cloud
        with cloud.locked():
            token = token_record(cloud, token_id)
            project_id = None if token is None else token.get("project_id")
            rule = faults.request_rule(cloud, service, method, path, project_id)
            if rule is not None and rule.effect == faults.TOKEN_EXPIRY and token is not None:
                token["expires_at"] = cloud.now()  # the route now answers 401
        status = [0]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                if rule is not None and rule.effect == faults.LATE_ANSWER:
                    await asyncio.sleep(rule.seconds)  # done already: only the answer waits
            await send(message)

        try:
            if rule is not None and rule.effect == faults.SLOW:
                await asyncio.sleep(rule.seconds)
            if rule is not None and rule.effect in (faults.UNAVAILABLE, faults.RATE_LIMITED):
                await self._refuse(rule, service, sending)
            else:
                await self.app(scope, receive, sending)
        finally:
            self.journal.add(arrived, method, path,
                             scope.get("query_string", b"").decode("latin-1"), status[0],
                             service, project_id, time.perf_counter() - started)

    async def _refuse(self, rule: faults.Rule, service: str | None, send: Send) -> None:
        if rule.effect == faults.UNAVAILABLE:
            error = CloudError(503, "Service Unavailable",
                               rule.message or "The service is unavailable (simulated).",
                               service or "identity")
        else:
            error = CloudError(429, "Too Many Requests",
                               rule.message or "Rate limit exceeded (simulated).",
                               service or "identity",
                               headers={"Retry-After": f"{rule.seconds:g}"})
        response = JSONResponse(self.error_body(error), status_code=error.status,
                                headers=error.headers)
        await response({"type": "http"}, _no_body, send)


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


# -- routes --------------------------------------------------------------------------------

def _invalid(message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": 400, "message": message}}, status_code=400)


@router.get("/rules")
def list_rules(request: Request) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"rules": [r.to_json() for r in faults.rules(cloud)]}


@router.post("/rules", status_code=201, response_model=None)
async def add_rule(request: Request) -> dict[str, Any] | JSONResponse:
    try:
        body = await request.json()
    except ValueError:
        return _invalid("the body is not JSON")
    try:
        rule = faults.parse_rule(body.get("rule") if isinstance(body, dict) else body)
    except faults.InvalidRule as invalid:
        return _invalid(f"rule: {invalid}")
    cloud = cloud_of(request)
    with cloud.locked():
        faults.add_rule(cloud, rule)
    cloud.changed()
    return {"rule": rule.to_json()}


@router.get("/rules/{rule_id}", response_model=None)
def show_rule(rule_id: str, request: Request) -> dict[str, Any] | JSONResponse:
    cloud = cloud_of(request)
    with cloud.locked():
        found = [r for r in faults.rules(cloud) if r.id == rule_id]
    if not found:
        return JSONResponse({"error": {"code": 404, "message": f"no rule {rule_id}"}},
                            status_code=404)
    return {"rule": found[0].to_json()}


@router.delete("/rules/{rule_id}", status_code=204)
def remove_rule(rule_id: str, request: Request) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        removed = faults.remove_rule(cloud, rule_id)
    if not removed:
        return JSONResponse({"error": {"code": 404, "message": f"no rule {rule_id}"}},
                            status_code=404)
    cloud.changed()
    return Response(status_code=204)


@router.delete("/rules", status_code=204)
def clear_rules(request: Request) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        faults.clear_rules(cloud)
    cloud.changed()
    return Response(status_code=204)


@router.get("/journal", response_model=None)
def read_journal(request: Request) -> dict[str, Any] | JSONResponse:
    query = request.query_params
    try:
        since = int(query.get("since") or 0)
    except ValueError:
        return _invalid(f"since: not a sequence number: {query.get('since')!r}")
    journal = cloud_of(request).journal
    entries = journal.entries(since)
    for key in ("service", "method", "project_id"):
        if query.get(key):
            wanted = query[key].upper() if key == "method" else query[key]
            entries = [e for e in entries if getattr(e, key) == wanted]
    if query.get("path"):
        entries = [e for e in entries if fnmatch.fnmatchcase(e.path, query["path"])]
    return {"entries": [asdict(e) for e in entries], "last": journal.last}


@router.delete("/journal", status_code=204)
def clear_journal(request: Request) -> Response:
    cloud_of(request).journal.clear()
    return Response(status_code=204)


@router.get("/objects")
def count_objects(request: Request) -> dict[str, Any]:
    """How many objects of each kind the cloud holds (all projects)."""
    cloud = cloud_of(request)
    with cloud.locked():
        return {"objects": {kind: len(rows) for kind, rows in sorted(cloud.objects.items())}}
