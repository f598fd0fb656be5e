"""The control plane of the simulated cloud's software-configuration agent: ``/_sim/agent``
routes for its settings, the servers it watches, its run log and the faults it injects.

Callers: ``convergence_simcloud.app`` includes :data:`router`;
``convergence_simcloud.client.SimControl`` is the typed client of these routes (its
``agent_*`` methods). Like the rest of ``/_sim/`` they take no Keystone token (the control
token, when the cloud has one: ``convergence_simcloud.control_auth``). ``GET /_sim/agent``
answers the settings and ``PUT /_sim/agent`` changes any of ``poll_interval``,
``script_timeout`` and ``enabled`` (a bad field: 400 naming it, nothing changed;
``execute_scripts`` is shown, never changed here);
``GET /_sim/agent/servers`` lists the servers with an agent and the deployments each applied;
``GET /_sim/agent/runs?server=<id or name>&since=<seq>`` reads the run log;
``/_sim/agent/faults`` lists faults (GET: ``{"faults": [...]}``), adds one (POST: 201 with
the fault, its ``id`` included) and removes one (``DELETE .../{id}``: 204). The records
themselves are ``convergence_simcloud.agent_records``'.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from convergence_simcloud import agent_records as records
from convergence_simcloud.context import cloud_of

router = APIRouter(prefix="/_sim/agent")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": status, "message": message}}, status_code=status)


async def _body(request: Request) -> Any:
    try:
        return await request.json()
    except ValueError:
        raise records.InvalidInput("the body is not JSON") from None


@router.get("")
def show_settings(request: Request) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return asdict(records.settings(cloud))


@router.put("", response_model=None)
async def change_settings(request: Request) -> dict[str, Any] | JSONResponse:
    try:
        changes = records.parse_settings(await _body(request))
    except records.InvalidInput as invalid:
        return _error(400, str(invalid))
    cloud = cloud_of(request)
    with cloud.locked():
        return asdict(records.change_settings(cloud, changes))


@router.get("/servers")
def list_servers(request: Request) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"servers": [asdict(s) for s in records.servers(cloud)]}


@router.get("/runs", response_model=None)
def list_runs(request: Request) -> dict[str, Any] | JSONResponse:
    query = request.query_params
    try:
        since = int(query.get("since") or 0)
    except ValueError:
        return _error(400, f"since: not a sequence number: {query.get('since')!r}")
    cloud = cloud_of(request)
    with cloud.locked():
        found = records.runs(cloud, query.get("server") or None, since)
    return {"runs": [asdict(r) for r in found]}


@router.get("/faults")
def list_faults(request: Request) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"faults": [asdict(f) for f in records.faults(cloud)]}


@router.post("/faults", status_code=201, response_model=None)
async def add_fault(request: Request) -> dict[str, Any] | JSONResponse:
    try:
        fields = records.parse_fault(await _body(request))
    except records.InvalidInput as invalid:
        return _error(400, str(invalid))
    cloud = cloud_of(request)
    with cloud.locked():
        fault = records.add_fault(cloud, fields)
    cloud.changed()
    return asdict(fault)  # the fault itself, with its id


@router.delete("/faults/{fault_id}", status_code=204)
def remove_fault(fault_id: str, request: Request) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        removed = records.remove_fault(cloud, fault_id)
    if not removed:
        return _error(404, f"no agent fault {fault_id}")
    cloud.changed()
    return Response(status_code=204)
