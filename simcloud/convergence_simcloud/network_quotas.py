"""Neutron's quotas in the simulated cloud: per-project limits on networks, subnets, ports,
routers, floating IPs, security groups and their rules, and the check every create makes.

Callers: ``convergence_simcloud.network`` includes :data:`router` under ``/network/v2.0``
(``GET /quotas``, ``GET/PUT/DELETE /quotas/{project_id}``, ``/quotas/{project_id}/default``
and ``/quotas/{project_id}/details``, the shapes openstacksdk's ``Quota``, ``QuotaDefault``
and ``QuotaDetails`` read); the Neutron create routes (networks, subnets, ports, routers,
floating IPs, security groups and rules) call :func:`check_quota` before they store an
object. A fault rule with effect ``quota_exceeded`` (``faults.quota_rule``) refuses a create
the same way a real limit does: 409 ``OverQuota`` "Quota exceeded for resources: ['port']."
A limit of -1 is unlimited; only an admin may change or reset a project's limits.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud import faults
from convergence_simcloud.context import Authenticated, Caller, CloudError, cloud_of
from convergence_simcloud.network_common import bad_request, neutron_error
from convergence_simcloud.state import Record, SimCloud

router = APIRouter()
TABLE = "network_quota"
DEFAULTS = {"network": 100, "subnet": 100, "port": 500, "router": 10, "floatingip": 50,
            "security_group": 10, "security_group_rule": 100}


def over_quota(kind: str) -> CloudError:
    return neutron_error(409, "OverQuota", f"Quota exceeded for resources: ['{kind}'].")


def limits(cloud: SimCloud, project_id: str) -> dict[str, int]:
    """The project's limits: its own where set, else the seed's defaults, else Neutron's."""
    table = cloud.kind(TABLE)
    seeded = (table.get("default") or {}).get("limits", {})
    own = (table.get(project_id) or {}).get("limits", {})
    return {k: int(own.get(k, seeded.get(k, v))) for k, v in DEFAULTS.items()}


def used(cloud: SimCloud, project_id: str, kind: str) -> int:
    return sum(1 for r in cloud.kind(kind).values() if r.get("project_id") == project_id)


def check_quota(cloud: SimCloud, kind: str, project_id: str, record: Record) -> None:
    """Refuse a new ``kind`` object (``record``: what it would be) over the project's limit
    or by a ``quota_exceeded`` fault rule: 409 ``OverQuota``. Under the lock."""
    if faults.quota_rule(cloud, "network", kind, {"project_id": project_id, **record}):
        cloud.changed()  # the rule was used
        raise over_quota(kind)
    limit = limits(cloud, project_id).get(kind, -1)
    if limit >= 0 and used(cloud, project_id, kind) + 1 > limit:
        raise over_quota(kind)


def _project(who: Caller, project_id: str, change: bool = False) -> str:
    if not who.is_admin and (change or project_id != who.project_id):
        raise neutron_error(403, "HTTPForbidden",
                            "Only admins may read or change another project's quotas.")
    return project_id


def _shown(cloud: SimCloud, project_id: str) -> dict[str, Any]:
    return {**limits(cloud, project_id), "project_id": project_id, "tenant_id": project_id}


@router.get("/quotas")
def list_quotas(request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        ids = sorted(p for p in cloud.kind(TABLE) if who.is_admin or p == who.project_id)
        return {"quotas": [_shown(cloud, p) for p in ids]}


@router.get("/quotas/{project_id}")
def show_quota(project_id: str, request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"quota": _shown(cloud, _project(who, project_id))}


@router.get("/quotas/{project_id}/default")
def show_defaults(project_id: str, request: Request, who: Authenticated) -> dict[str, Any]:
    _project(who, project_id)
    return {"quota": {**DEFAULTS, "project_id": project_id, "tenant_id": project_id}}


@router.get("/quotas/{project_id}/details")
def show_details(project_id: str, request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        _project(who, project_id)
        shown: dict[str, Any] = {
            kind: {"limit": limit, "used": used(cloud, project_id, kind), "reserved": 0}
            for kind, limit in limits(cloud, project_id).items()}
        return {"quota": {**shown, "project_id": project_id, "tenant_id": project_id}}


@router.put("/quotas/{project_id}")
async def update_quota(project_id: str, request: Request, who: Authenticated,
                       ) -> dict[str, Any]:
    try:
        payload = await request.json()
    except ValueError:
        raise bad_request("Malformed request body.") from None
    body = payload.get("quota", payload) if isinstance(payload, dict) else None
    if not isinstance(body, dict):
        raise bad_request("Resource body required: quota.")
    body = {k: v for k, v in body.items() if k not in ("project_id", "tenant_id", "id",
                                                        "check_limit")}
    unknown = sorted(set(body) - set(DEFAULTS))
    if unknown:
        raise bad_request(f"Unrecognized attribute(s) '{', '.join(unknown)}'")
    for key, value in body.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < -1:
            raise bad_request(f"Invalid input for {key}. Reason: '{value}' is not an "
                              "integer >= -1.")
    cloud = cloud_of(request)
    with cloud.locked():
        _project(who, project_id, change=True)
        stored = cloud.kind(TABLE).setdefault(
            project_id, {"id": project_id, "project_id": project_id, "limits": {}})
        stored["limits"].update(body)
        shown = _shown(cloud, project_id)
    cloud.changed()
    return {"quota": shown}


@router.delete("/quotas/{project_id}", status_code=204)
def reset_quota(project_id: str, request: Request, who: Authenticated) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        _project(who, project_id, change=True)
        cloud.kind(TABLE).pop(project_id, None)
    cloud.changed()
    return Response(status_code=204)
