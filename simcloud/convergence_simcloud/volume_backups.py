"""Cinder's volume backups in the simulated cloud: create (the volume ``backing-up`` meanwhile),
list, show, update, delete and restore to a new or an existing volume, with Cinder's shapes.

Callers: ``convergence_simcloud.volume`` includes :data:`router` in Cinder's router (mounted at
``/volume/v3/{project_id}``); openstacksdk's ``block_storage`` proxy (``create_backup``,
``backups``, ``get_backup``, ``delete_backup``, ``restore_backup``) and ``openstack volume
backup`` call these routes; ``volume_quotas.usage`` counts backups against the ``backups`` and
``backup_gigabytes`` quotas. A backup is a record of kind ``"backup"``: ``id``,
``project_id``, ``user_id``, ``name``, ``description``, ``volume_id``, ``snapshot_id``,
``size``, ``status`` (creating, available, restoring, deleting, error), ``container``,
``availability_zone``, ``is_incremental``, ``metadata``, ``created_at``, ``updated_at``,
``data_timestamp``, and ``_sim: {made_at, phase, phase_until, after}``. Creating (the volume
``backing-up`` for as long) and restoring last the ``snapshot`` and ``create`` phases of
``cloud.options``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud import copy_records, volume_records
from convergence_simcloud.context import Authenticated, Caller, cloud_of
from convergence_simcloud.state import Record, SimCloud
from convergence_simcloud.volume_common import (
    VolumeVersion,
    body_of,
    cinder_error,
    find_type,
    get_volume,
    links,
    listed,
    not_found,
    paginate,
    truthy,
    visible,
)
from convergence_simcloud.volume_quotas import enforce, quota_limits, usage

router = APIRouter()
KIND = "backup"


def get_backup(cloud: SimCloud, who: Caller, backup_id: str) -> Record:
    backup = cloud.kind(KIND).get(backup_id)
    if backup is None or not visible(who, backup) or \
            copy_records.advance(cloud, KIND, backup) is None:
        raise not_found("Backup", backup_id)
    return backup


def show(request: Request, who: Caller, version: tuple[int, int], backup: Record) -> Record:
    shown: Record = {key: backup[key] for key in (
        "id", "name", "description", "status", "size", "volume_id", "snapshot_id",
        "availability_zone", "container", "created_at", "updated_at", "data_timestamp",
        "is_incremental", "fail_reason")}
    shown.update(object_count=0, has_dependent_backups=False,
                 links=links(request, "backups", backup["id"]))
    if version >= (3, 18):
        shown["os-backup-project-attr:project_id"] = backup["project_id"]
    if version >= (3, 43):
        shown["metadata"] = dict(backup["metadata"])
    if version >= (3, 56):
        shown["user_id"] = backup["user_id"]
    return shown


def _list(request: Request, who: Caller, version: tuple[int, int],
          detail: bool) -> dict[str, Any]:
    query = request.query_params
    cloud = cloud_of(request)
    with cloud.locked():
        rows = listed(request, who, copy_records.live(cloud, KIND))
        for key in ("name", "status", "volume_id"):
            if query.get(key) is not None:
                rows = [r for r in rows if str(r.get(key)) == query[key]]
        page, page_links = paginate(request, "backups", rows)
        body: dict[str, Any] = {"backups": [
            show(request, who, version, b) if detail else
            {"id": b["id"], "name": b["name"], "links": links(request, "backups", b["id"])}
            for b in page]}
    if page_links:
        body["backups_links"] = page_links
    return body


@router.get("/backups")
def list_backups(request: Request, who: Authenticated, version: VolumeVersion,
                 ) -> dict[str, Any]:
    return _list(request, who, version, False)


@router.get("/backups/detail")
def list_backups_detail(request: Request, who: Authenticated, version: VolumeVersion,
                        ) -> dict[str, Any]:
    return _list(request, who, version, True)


@router.post("/backups", status_code=202)
async def create_backup(request: Request, who: Authenticated, version: VolumeVersion,
                        ) -> dict[str, Any]:
    body = await body_of(request, "backup")
    cloud = cloud_of(request)
    with cloud.locked():
        if not body.get("volume_id"):
            raise cinder_error(400, "Invalid input for field/attribute backup. 'volume_id' is "
                                    "a required property")
        volume = get_volume(cloud, who, str(body["volume_id"]))
        force = truthy(str(body.get("force")))
        if volume["status"] != "available" and not (force and volume["status"] == "in-use"):
            raise cinder_error(400, f"Invalid volume: Volume to be backed up must be available "
                                    f"or in-use, but the current status is "
                                    f"\"{volume['status']}\".")
        enforce_backup(cloud, volume["project_id"], int(volume["size"]))
        now = cloud.now()
        metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        backup: Record = {
            "id": volume_records.new_id_dashed(), "project_id": volume["project_id"],
            "user_id": who.user_id, "name": body.get("name"),
            "description": body.get("description"), "volume_id": volume["id"],
            "snapshot_id": body.get("snapshot_id"), "size": volume["size"],
            "status": "creating", "container": body.get("container") or "volumebackups",
            "availability_zone": volume["availability_zone"],
            "created_at": volume_records.stamp(now), "updated_at": None,
            "data_timestamp": volume_records.stamp(now),
            "is_incremental": truthy(str(body.get("incremental"))), "fail_reason": None,
            "metadata": {str(k): str(v) for k, v in (metadata or {}).items()},
            "_sim": {"made_at": now}}
        cloud.kind(KIND)[backup["id"]] = backup
        seconds = cloud.options.volume_phase_seconds("snapshot", int(volume["size"]))
        volume_records.start_phase(cloud, volume, "backing-up", volume["status"], seconds)
        copy_records.start_phase(cloud, KIND, backup, "creating", "available", seconds)
        cloud.changed()
        return {"backup": {"id": backup["id"], "name": backup["name"],
                           "links": links(request, "backups", backup["id"])}}


def enforce_backup(cloud: SimCloud, project_id: str, gigabytes: int) -> None:
    """413 as Cinder answers when one more backup of ``gigabytes`` is over quota."""
    limits, used = quota_limits(cloud, project_id), usage(cloud, project_id)
    if 0 <= limits["backups"] < used["backups"] + 1:
        raise cinder_error(413, f"BackupLimitExceeded: Maximum number of backups allowed "
                                f"({limits['backups']}) exceeded")
    if 0 <= limits["backup_gigabytes"] < used["backup_gigabytes"] + gigabytes:
        raise cinder_error(413, "VolumeBackupSizeExceedsAvailableQuota: Requested backup "
                                f"exceeds allowed Backup gigabytes quota. Requested "
                                f"{gigabytes}G, quota is {limits['backup_gigabytes']}G and "
                                f"{used['backup_gigabytes']}G has been consumed.")
    enforce(cloud, project_id, None, 0)


@router.get("/backups/{backup_id}")
def show_backup(backup_id: str, request: Request, who: Authenticated,
                version: VolumeVersion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"backup": show(request, who, version, get_backup(cloud, who, backup_id))}


@router.put("/backups/{backup_id}")
async def update_backup(backup_id: str, request: Request, who: Authenticated,
                        version: VolumeVersion) -> dict[str, Any]:
    if version < (3, 9):
        raise cinder_error(404, "The resource could not be found.")
    body = await body_of(request, "backup")
    cloud = cloud_of(request)
    with cloud.locked():
        backup = get_backup(cloud, who, backup_id)
        for key in ("name", "description"):
            if key in body:
                backup[key] = body[key]
        if isinstance(body.get("metadata"), dict) and version >= (3, 43):
            backup["metadata"] = {str(k): str(v) for k, v in body["metadata"].items()}
        volume_records.touch(cloud, backup)
        cloud.changed()
        return {"backup": show(request, who, version, backup)}


@router.delete("/backups/{backup_id}", status_code=202)
def delete_backup(backup_id: str, request: Request, who: Authenticated,
                  _: VolumeVersion) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        backup = get_backup(cloud, who, backup_id)
        if backup["status"] not in ("available", "error"):
            raise cinder_error(400, "Invalid backup: Backup status must be available or "
                                    "error")
        copy_records.start_delete(cloud, KIND, backup, "Backup")
        cloud.changed()
    return Response(status_code=202)


@router.post("/backups/{backup_id}/restore", status_code=202)
async def restore_backup(backup_id: str, request: Request, who: Authenticated,
                         _: VolumeVersion) -> dict[str, Any]:
    body = await body_of(request, "restore")
    cloud = cloud_of(request)
    with cloud.locked():
        backup = get_backup(cloud, who, backup_id)
        if backup["status"] != "available":
            raise cinder_error(400, "Invalid backup: Backup status must be available")
        size = int(backup["size"])
        if body.get("volume_id"):
            volume = get_volume(cloud, who, str(body["volume_id"]))
            if volume["status"] != "available":
                raise cinder_error(400, "Invalid volume: Volume to be restored to must be "
                                        "available")
            if int(volume["size"]) < size:
                raise cinder_error(400, f"Invalid volume: volume size {volume['size']} is too "
                                        f"small to restore backup of size {size}.")
        else:
            enforce(cloud, str(who.project_id), "volumes", size)
            volume = volume_records.new_volume(
                cloud, str(who.project_id), who.user_id, size,
                name=body.get("name") or f"restore_backup_{backup_id}",
                volume_type=find_type(cloud, None),
                availability_zone=backup["availability_zone"])
        seconds = cloud.options.volume_phase_seconds("create", size)
        volume_records.sim(volume).pop("phase", None)
        volume_records.start_phase(cloud, volume, "restoring-backup", "available", seconds)
        copy_records.start_phase(cloud, KIND, backup, "restoring", "available", seconds)
        cloud.changed()
        return {"restore": {"backup_id": backup_id, "volume_id": volume["id"],
                            "volume_name": volume["name"]}}
