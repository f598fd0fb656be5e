"""Signed URLs: ``/v1/signed/{token}``, what servers, wait condition scripts and alarms call
without a tenant's token (``convergence.services.signals`` signs and checks the tokens).

Callers: ``convergence.api.app`` includes :data:`router` outside ``require_auth``: the token
is the credential, and it names exactly one thing it may do:

- ``GET`` of a ``metadata`` token: ``{"deployments": [...]}``, the software deployments of
  the server that resource is, in the order its agent applies them (Heat's POLL_TEMP_URL
  metadata);
- ``POST`` or ``PUT`` of a ``deployment`` token: that deployment's agent reports (its
  ``deploy_stdout``, ``deploy_stderr``, ``deploy_status_code`` and outputs); a report on a
  derived config the deployment no longer applies answers 404 (see below), and one that
  loses the race with a new one is ignored;
- ``POST`` or ``PUT`` of a ``signal`` token: a signal to that resource
  (``convergence.services.resource_signals``: a wait condition handle, a scaling policy...).

Each token is bound to the version of the resource it was made for
(``convergence.services.signals.resolve``): a replaced resource's URL (an old server's, an
old handle's), a deployment's URL of a derived config it no longer applies and, with
``CONVERGENCE_SIGNED_URL_SECONDS``, an expired URL reach nothing. A token that does not
verify (a malformed or non-ASCII one included), one bound to what is not current, or a
request its kind does not allow, answers 404 as an unknown URL would: nothing about the
engine's resources is told.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from convergence.api.errors import ApiError
from convergence.api.requests import runtime, signal_body
from convergence.runtime import Runtime
from convergence.services import resource_signals, signals, software

router = APIRouter(prefix="/v1/signed")


def _claims(rt: Runtime, token: str, kinds: tuple[str, ...]) -> dict[str, str]:
    claims = signals.resolve(rt, token, kinds)  # reads the store: off the event loop
    if claims is None:
        raise ApiError(404, "NotFound", "The resource could not be found.")
    return claims


@router.get("/{token}")
def metadata(token: str, rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    claims = _claims(rt, token, (signals.METADATA,))
    return {"deployments": software.resource_metadata(rt, claims["t"], claims["s"],
                                                      claims["r"], signals.record_of(claims))}


@router.api_route("/{token}", methods=["POST", "PUT"])
async def signal(request: Request, token: str,
                 rt: Runtime = Depends(runtime)) -> JSONResponse:  # noqa: B008
    claims = await run_in_threadpool(_claims, rt, token, (signals.DEPLOYMENT, signals.SIGNAL))
    details = await signal_body(request)
    if claims["k"] == signals.DEPLOYMENT:
        taken = await run_in_threadpool(software.report, rt, claims["d"], details or {},
                                        tenant=claims["t"], config_id=claims.get("c"))
        return JSONResponse({"taken": taken})
    said = await run_in_threadpool(resource_signals.signal, rt, claims["t"], claims["s"],
                                   claims["r"], details, signals.record_of(claims))
    return JSONResponse({"result": said})
