"""The simulated cloud's ASGI app: each service's routes mounted at its prefix.

Callers: ``convergence_simcloud.serve`` serves :func:`create_app` with uvicorn (the CLI's
``convergence simcloud`` and the tests' in-process server). Keystone is at ``/v3`` (its
version list also at ``/``); the other services' prefixes are in
``convergence_simcloud.catalog.PREFIXES`` (``/compute/v2.1``, ``/network``,
``/volume/v3/{project_id}``, ``/image``): a service module exposes an ``APIRouter`` and is
included here. A :class:`~convergence_simcloud.context.CloudError` becomes the error body of
the service that raised it. ``/_sim/`` asks for the cloud's control token when it has one
(``convergence_simcloud.control_auth``). The app also registers the cloud's settlers (Nova's servers
brought up to the clock before Neutron answers about their ports).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from convergence_simcloud import (
    agent_control,
    compute,
    compute_flavors,
    compute_quotas,
    compute_volumes,
    control,
    control_auth,
    identity,
    image,
    keypairs,
    network,
    server_actions,
    server_boot,
    server_groups,
    server_interfaces,
    server_meta,
    server_routes,
    servers,
    trusts,
    volume,
    volume_common,
)
from convergence_simcloud.catalog import PREFIXES
from convergence_simcloud.context import CloudError
from convergence_simcloud.state import SimCloud


def error_body(error: CloudError) -> dict[str, Any]:
    """The error body of ``error.service`` (Keystone's for identity and, until the other
    services bring their own formats, for everything)."""
    if error.service == "compute":
        return compute.error_body(error)
    if error.service == "image":
        return image.error_body(error)
    if error.service == "volume":
        return volume_common.error_body(error)
    if error.service == "network":
        return {"NeutronError": {"type": error.title, "message": error.message, "detail": ""}}
    return {"error": {"code": error.status, "title": error.title, "message": error.message}}


def create_app(cloud: SimCloud) -> FastAPI:
    app = FastAPI(title="convergence simcloud", docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.cloud = cloud
    if servers.advance_all not in cloud.settlers:
        cloud.settlers.append(servers.advance_all)

    @app.exception_handler(CloudError)
    async def cloud_error(_: Request, exc: CloudError) -> JSONResponse:
        return JSONResponse(error_body(exc), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        error = CloudError(400, "Bad Request", str(exc.errors()))
        return JSONResponse(error_body(error), status_code=400)

    app.add_middleware(control.Middleware, cloud=cloud, error_body=error_body)
    app.add_middleware(control_auth.Guard, cloud=cloud)  # outermost: before any fault rule
    app.include_router(control.router)
    app.include_router(agent_control.router)
    app.add_api_route("/", identity.versions, methods=["GET"])
    app.include_router(identity.router, prefix=PREFIXES["identity"])
    app.include_router(trusts.router, prefix=PREFIXES["identity"])
    app.add_api_route("/compute", compute.versions, methods=["GET"])
    app.add_api_route("/compute/", compute.versions, methods=["GET"])
    app.include_router(compute.router, prefix=PREFIXES["compute"])
    app.include_router(compute_flavors.router, prefix=PREFIXES["compute"])
    for servers_router in (server_boot.router, server_routes.router, server_actions.router,
                           server_meta.router):  # Nova's servers
        app.include_router(servers_router, prefix=PREFIXES["compute"])
    app.include_router(keypairs.router, prefix=PREFIXES["compute"])
    app.include_router(server_groups.router, prefix=PREFIXES["compute"])
    app.include_router(server_interfaces.router, prefix=PREFIXES["compute"])
    app.include_router(compute_quotas.router, prefix=PREFIXES["compute"])
    app.include_router(compute_volumes.router, prefix=PREFIXES["compute"])
    app.include_router(image.router, prefix=PREFIXES["image"])
    app.include_router(network.router, prefix=PREFIXES["network"])
    app.add_api_route("/volume", volume_common.versions, methods=["GET"])
    app.add_api_route("/volume/", volume_common.versions, methods=["GET"])
    app.add_api_route(PREFIXES["volume"], volume_common.versions, methods=["GET"])
    app.add_api_route(PREFIXES["volume"] + "/", volume_common.versions, methods=["GET"])
    app.include_router(volume.router, prefix=PREFIXES["volume"] + "/{project_id}")
    return app
