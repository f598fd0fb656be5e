"""Cinder's volume types, quotas (``os-quota-sets``), limits and availability zones in the
simulated cloud.

Callers: ``convergence_simcloud.volume`` includes :data:`router` in Cinder's router (mounted at
``/volume/v3/{project_id}``); openstacksdk's ``block_storage`` proxy (``types``, ``get_type``,
``create_type``, ``delete_type``, ``get_quota_set``, ``update_quota_set``, ``get_limits``,
``availability_zones``, ``summary``) and ``openstack volume type`` / ``openstack quota`` call
these routes; ``GET /volumes/summary`` is here too, beside the usage it counts, and the user
messages (``GET /messages``, what ``volume_records.user_message`` recorded).
Types are records of kind ``"volume_type"`` (seeded with ``__DEFAULT__`` and ``lvmdriver-1`` by
``volume_common.types``); quota overrides are records of kind ``"volume_quota"`` keyed by the
project id; usage is counted from the live volumes and snapshots.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud import volume_records
from convergence_simcloud.context import Authenticated, Caller, cloud_of
from convergence_simcloud.state import Record
from convergence_simcloud.volume_common import (
    VolumeVersion,
    body_of,
    cinder_error,
    find_type,
    forbidden,
    listed,
    types,
)
from convergence_simcloud.volume_quotas import DEFAULT_QUOTA, quota_limits, usage

router = APIRouter()
USER_VISIBLE_SPECS = ("multiattach", "RESKEY:availability_zones", "replication_enabled")


def show_type(who: Caller, row: Record) -> Record:
    specs = dict(row["extra_specs"])
    if not who.is_admin:
        specs = {k: v for k, v in specs.items() if k in USER_VISIBLE_SPECS}
    return {"id": row["id"], "name": row["name"], "description": row["description"],
            "is_public": row["is_public"], "os-volume-type-access:is_public": row["is_public"],
            "extra_specs": specs, "qos_specs_id": row["qos_specs_id"]}


def _type(request: Request, who: Caller, type_id: str) -> Record:
    table = types(cloud_of(request))
    row = table.get(type_id) or next((t for t in table.values() if t["name"] == type_id), None)
    if row is None or not (row["is_public"] or who.is_admin
                           or row.get("project_id") == who.project_id):
        raise cinder_error(404, f"Volume type {type_id} could not be found.")
    return row


@router.get("/types")
def list_types(request: Request, who: Authenticated, _: VolumeVersion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        rows = [t for t in types(cloud).values() if t["is_public"] or who.is_admin
                or t.get("project_id") == who.project_id]
        return {"volume_types": [show_type(who, t) for t in rows]}


@router.get("/types/default")
def default_type(request: Request, who: Authenticated, _: VolumeVersion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"volume_type": show_type(who, find_type(cloud, None))}


@router.get("/types/{type_id}")
def get_type(type_id: str, request: Request, who: Authenticated,
             _: VolumeVersion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"volume_type": show_type(who, _type(request, who, type_id))}


@router.post("/types")
async def create_type(request: Request, who: Authenticated, _: VolumeVersion,
                      ) -> dict[str, Any]:
    if not who.is_admin:
        raise forbidden("volume_extension:types_manage")
    body = await body_of(request, "volume_type")
    name = str(body.get("name") or "").strip()
    if not name:
        raise cinder_error(400, "Invalid input for field/attribute name.")
    cloud = cloud_of(request)
    with cloud.locked():
        table = types(cloud)
        if any(t["name"] == name for t in table.values()):
            raise cinder_error(409, f"Volume Type {name} already exists.")
        public = body.get("os-volume-type-access:is_public", body.get("is_public", True))
        row: Record = {"id": volume_records.new_id_dashed(), "name": name,
                       "description": body.get("description"),
                       "is_public": public not in (False, "false", "False"),
                       "qos_specs_id": None, "project_id": who.project_id,
                       "extra_specs": {str(k): str(v) for k, v in
                                       (body.get("extra_specs") or {}).items()}}
        table[row["id"]] = row
        cloud.changed()
        return {"volume_type": show_type(who, row)}


@router.delete("/types/{type_id}", status_code=202)
def delete_type(type_id: str, request: Request, who: Authenticated,
                _: VolumeVersion) -> Response:
    if not who.is_admin:
        raise forbidden("volume_extension:types_manage")
    cloud = cloud_of(request)
    with cloud.locked():
        row = _type(request, who, type_id)
        if any(v.get("volume_type_id") == row["id"]
               for v in volume_records.live_volumes(cloud)):
            raise cinder_error(400, "Target volume type is still in use.")
        if row["name"] == "__DEFAULT__":
            raise cinder_error(400, "Default volume type can not be deleted.")
        types(cloud).pop(row["id"], None)
        cloud.changed()
    return Response(status_code=202)


# -- quotas ----------------------------------------------------------------------------------

def _quota_body(cloud: Any, project_id: str, with_usage: bool) -> Record:
    limits = quota_limits(cloud, project_id)
    used = usage(cloud, project_id)
    found: Record = {"id": project_id}
    for key, limit in limits.items():
        found[key] = {"limit": limit, "in_use": used.get(key, 0), "reserved": 0} \
            if with_usage else limit
    for row in types(cloud).values():
        for key in ("volumes", "gigabytes", "snapshots"):
            name = f"{key}_{row['name']}"
            found[name] = {"limit": -1, "in_use": 0, "reserved": 0} if with_usage else -1
    return found


def _may_read(who: Caller, project_id: str) -> None:
    if project_id != who.project_id and not who.is_admin:
        raise forbidden("volume_extension:quotas:show")


@router.get("/os-quota-sets/{target}")
def show_quota(target: str, request: Request, who: Authenticated,
               _: VolumeVersion) -> dict[str, Any]:
    _may_read(who, target)
    cloud = cloud_of(request)
    with cloud.locked():
        with_usage = str(request.query_params.get("usage", "")).lower() in ("true", "1")
        return {"quota_set": _quota_body(cloud, target, with_usage)}


@router.get("/os-quota-sets/{target}/defaults")
def quota_defaults(target: str, request: Request, who: Authenticated,
                   _: VolumeVersion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        body = _quota_body(cloud, "default", False)
        body["id"] = target
        body.update({k: v for k, v in DEFAULT_QUOTA.items()
                     if k not in cloud.kind("volume_quota").get("default", {})})
        return {"quota_set": body}


@router.put("/os-quota-sets/{target}")
async def update_quota(target: str, request: Request, who: Authenticated,
                       _: VolumeVersion) -> dict[str, Any]:
    if not who.is_admin:
        raise forbidden("volume_extension:quotas:update")
    body = await body_of(request, "quota_set")
    cloud = cloud_of(request)
    with cloud.locked():
        row = cloud.kind("volume_quota").setdefault(target, {"id": target,
                                                             "project_id": target})
        for key, value in body.items():
            if key in DEFAULT_QUOTA:
                try:
                    number = int(value)
                except (TypeError, ValueError):
                    raise cinder_error(400, f"Invalid input received: Quota {key} must be "
                                            "an integer.") from None
                if number < -1:
                    raise cinder_error(400, f"Invalid input received: Quota {key} must be "
                                            "greater than or equal to -1.")
                row[key] = number
        cloud.changed()
        shown = _quota_body(cloud, target, False)
        del shown["id"]
        return {"quota_set": shown}


@router.delete("/os-quota-sets/{target}")
def reset_quota(target: str, request: Request, who: Authenticated,
                _: VolumeVersion) -> Response:
    if not who.is_admin:
        raise forbidden("volume_extension:quotas:delete")
    cloud = cloud_of(request)
    with cloud.locked():
        cloud.kind("volume_quota").pop(target, None)
        cloud.changed()
    return Response(status_code=200)


# -- limits and availability zones -----------------------------------------------------------

@router.get("/limits")
def limits(request: Request, who: Authenticated, _: VolumeVersion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        project_id = str(who.project_id)
        quota = quota_limits(cloud, project_id)
        used = usage(cloud, project_id)
        return {"limits": {"rate": [], "absolute": {
            "maxTotalVolumes": quota["volumes"], "maxTotalSnapshots": quota["snapshots"],
            "maxTotalVolumeGigabytes": quota["gigabytes"],
            "maxTotalBackups": quota["backups"],
            "maxTotalBackupGigabytes": quota["backup_gigabytes"],
            "totalVolumesUsed": used["volumes"], "totalSnapshotsUsed": used["snapshots"],
            "totalGigabytesUsed": used["gigabytes"], "totalBackupsUsed": used["backups"],
            "totalBackupGigabytesUsed": used["backup_gigabytes"]}}}


@router.get("/os-availability-zone")
def availability_zones(request: Request, who: Authenticated,
                       _: VolumeVersion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        names = sorted({z["name"] for z in cloud.kind("availability_zone").values()}) \
            or ["nova"]
        return {"availabilityZoneInfo": [{"zoneName": n, "zoneState": {"available": True}}
                                         for n in names]}


@router.get("/volumes/summary")
def volumes_summary(request: Request, who: Authenticated,
                    version: VolumeVersion) -> dict[str, Any]:
    """``GET /volumes/summary`` (3.12; ``metadata`` from 3.36): count and size of the
    volumes listed (``all_tenants`` for an admin)."""
    if version < (3, 12):
        raise cinder_error(404, "The resource could not be found.")
    cloud = cloud_of(request)
    with cloud.locked():
        rows = listed(request, who, volume_records.live_volumes(cloud))
        found: Record = {"total_size": sum(int(v["size"]) for v in rows),
                         "total_count": len(rows)}
        if version >= (3, 36):
            metadata: dict[str, list[str]] = {}
            for volume in rows:
                for key, value in volume["metadata"].items():
                    if value not in metadata.setdefault(key, []):
                        metadata[key].append(value)
            found["metadata"] = metadata
        return {"volume-summary": found}


@router.get("/messages")
def list_messages(request: Request, who: Authenticated,
                  version: VolumeVersion) -> dict[str, Any]:
    """``GET /messages`` (3.3): the user messages ``volume_records.user_message`` recorded
    (why a volume went to error), oldest first; 3.5 filters them by their fields."""
    if version < (3, 3):
        raise cinder_error(404, "The resource could not be found.")
    cloud = cloud_of(request)
    with cloud.locked():
        rows = [dict(m) for m in cloud.kind("volume_message").values()
                if who.is_admin or m["project_id"] == who.project_id]
    if version >= (3, 5):
        for key in ("resource_uuid", "resource_type", "event_id", "message_level",
                    "request_id"):
            if request.query_params.get(key) is not None:
                rows = [m for m in rows if m[key] == request.query_params[key]]
    rows.sort(key=lambda m: (m["created_at"], m["id"]))
    return {"messages": [{k: v for k, v in m.items() if k != "project_id"} for m in rows]}
