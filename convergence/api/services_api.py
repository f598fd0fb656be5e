"""Heat's service list: the processes running steps, from their heartbeats.

Callers: ``convergence.api.app`` includes :data:`router` (under ``/v1/{tenant_id}``, behind
``require_auth`` like the other routes). The list is the use case
``convergence.services.operations.list_services``.

- ``GET /services``: ``{"services": [...]}``, one item per worker process (and API process
  stepping in-process) heard from in the last day, in Heat's shape (``id``, ``engine_id``,
  ``host``, ``hostname``, ``binary``, ``topic``, ``report_interval``, ``status`` up or down,
  ``created_at``, ``updated_at``, ``deleted_at``); the heartbeats are written by
  ``convergence.workers.heartbeat``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from convergence.api.auth import require_auth
from convergence.api.policy import rule
from convergence.api.requests import runtime
from convergence.runtime import Runtime
from convergence.services.operations import list_services

router = APIRouter(prefix="/v1/{tenant_id}", dependencies=[Depends(require_auth)])


@router.get("/services", dependencies=[rule("service:index")])
def services_list(rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    return {"services": list_services(rt.store, rt.settings.heartbeat_seconds)}
