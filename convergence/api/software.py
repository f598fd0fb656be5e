"""Heat's software configuration API under ``/v1/{tenant_id}``: configs, deployments, and the
metadata a server's agent polls.

Callers: ``convergence.api.app`` includes :data:`router` (behind ``require_auth`` like the
stack routes). Each route is a use case of ``convergence.services.software``; the shapes are
Heat's, so unmodified openstacksdk (``conn.orchestration.software_configs()``...) and
heatclient (``openstack software config/deployment ...``) use them.

- ``GET /software_configs`` (``limit``, ``marker``), ``POST /software_configs``;
  ``GET``/``DELETE /software_configs/{id}`` (configs are immutable).
- ``GET /software_deployments`` (``server_id``), ``POST /software_deployments``;
  ``GET``/``PUT``/``DELETE /software_deployments/{id}``: a PUT that ends a deployment in
  progress (``status`` COMPLETE or FAILED) is its agent's report, and the stack resource that
  made it goes on.
- ``GET /software_deployments/metadata/{server_id}``: ``{"metadata": [...]}``, the derived
  configs of the server's deployments in the order they are applied.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from starlette.concurrency import run_in_threadpool

from convergence.api.auth import require_auth
from convergence.api.policy import rule
from convergence.api.requests import int_param, json_body, runtime
from convergence.runtime import Runtime
from convergence.services import software

router = APIRouter(prefix="/v1/{tenant_id}", dependencies=[Depends(require_auth)])


@router.get("/software_configs", dependencies=[rule("software_configs:index")])
def list_configs(request: Request, tenant_id: str,
                 rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    query = request.query_params
    found = software.list_configs(rt, tenant_id, int_param(query.get("limit"), "limit"),
                                  query.get("marker") or None)
    return {"software_configs": [software.config_dict(c) for c in found]}


@router.post("/software_configs", dependencies=[rule("software_configs:create")])
async def create_config(request: Request, tenant_id: str,
                        rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    body = await json_body(request)
    made = await run_in_threadpool(software.create_config, rt, tenant_id, body)
    return {"software_config": software.config_dict(made)}


@router.get("/software_configs/{config_id}", dependencies=[rule("software_configs:show")])
def show_config(tenant_id: str, config_id: str,
                rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    return {"software_config": software.config_dict(
        software.show_config(rt, tenant_id, config_id))}


@router.delete("/software_configs/{config_id}", status_code=204,
               dependencies=[rule("software_configs:delete")])
def delete_config(tenant_id: str, config_id: str,
                  rt: Runtime = Depends(runtime)) -> Response:  # noqa: B008
    software.delete_config(rt, tenant_id, config_id)
    return Response(status_code=204)


@router.get("/software_deployments", dependencies=[rule("software_deployments:index")])
def list_deployments(request: Request, tenant_id: str,
                     rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    found = software.list_deployments(rt, tenant_id,
                                      request.query_params.get("server_id") or None)
    return {"software_deployments": [software.deployment_dict(d) for d in found]}


@router.post("/software_deployments", dependencies=[rule("software_deployments:create")])
async def create_deployment(request: Request, tenant_id: str,
                            rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    body = await json_body(request)
    made = await run_in_threadpool(software.create_deployment, rt, tenant_id, body)
    return {"software_deployment": software.deployment_dict(made)}


@router.get("/software_deployments/metadata/{server_id}",
            dependencies=[rule("software_deployments:metadata")])
def server_metadata(tenant_id: str, server_id: str,
                    rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    return {"metadata": software.server_metadata(rt, tenant_id, server_id)}


@router.get("/software_deployments/{deployment_id}",
            dependencies=[rule("software_deployments:show")])
def show_deployment(tenant_id: str, deployment_id: str,
                    rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    return {"software_deployment": software.deployment_dict(
        software.show_deployment(rt, tenant_id, deployment_id))}


@router.put("/software_deployments/{deployment_id}",
            dependencies=[rule("software_deployments:update")])
async def update_deployment(request: Request, tenant_id: str, deployment_id: str,
                            rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    body = await json_body(request)
    changed = await run_in_threadpool(software.update_deployment, rt, tenant_id,
                                      deployment_id, body)
    return {"software_deployment": software.deployment_dict(changed)}


@router.delete("/software_deployments/{deployment_id}", status_code=204,
               dependencies=[rule("software_deployments:delete")])
def delete_deployment(tenant_id: str, deployment_id: str,
                      rt: Runtime = Depends(runtime)) -> Response:  # noqa: B008
    software.delete_deployment(rt, tenant_id, deployment_id)
    return Response(status_code=204)
