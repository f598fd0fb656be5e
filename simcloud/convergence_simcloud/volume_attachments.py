"""Cinder's attachments API (``/attachments``, microversion 3.27+; ``os-complete`` 3.44+) in
the simulated cloud: reserve a volume for an instance, give it a connector, complete and delete.

Callers: ``convergence_simcloud.volume`` includes :data:`router` in Cinder's router (mounted at
``/volume/v3/{project_id}``); openstacksdk's ``block_storage`` proxy (``create_attachment``,
``attachments``, ``get_attachment``, ``update_attachment``, ``complete_attachment``,
``delete_attachment``) calls these routes. An attachment is a record of kind
``"volume_attachment"`` made by ``volume_records.attachment_of`` (Nova's attachments make one
too): ``id``, ``project_id``, ``volume_id``, ``instance``, ``status`` (reserved, attaching,
attached), ``attach_mode``, ``attached_at``, ``detached_at``, ``connector``. The volume goes
``reserved`` on a create without connector, ``attaching`` with one, ``in-use`` on complete,
and back to ``available`` when its last attachment is deleted.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud import volume_records
from convergence_simcloud.context import Authenticated, Caller, cloud_of
from convergence_simcloud.state import Record, SimCloud
from convergence_simcloud.volume_common import (
    VolumeVersion,
    body_of,
    cinder_error,
    get_volume,
    listed,
    not_found,
    visible,
)

router = APIRouter()
KIND = "volume_attachment"


def _needs(version: tuple[int, int], wanted: tuple[int, int]) -> None:
    if version < wanted:
        raise cinder_error(404, "The resource could not be found.")


def _connection_info(attachment: Record) -> Record | None:
    if attachment.get("connector") is None:
        return None
    volume_id = attachment["volume_id"]
    return {"driver_volume_type": "iscsi", "attachment_id": attachment["id"],
            "data": {"target_discovered": False, "target_portal": "127.0.0.1:3260",
                     "target_iqn": f"iqn.2010-10.org.openstack:volume-{volume_id}",
                     "target_lun": 1, "volume_id": volume_id, "access_mode": "rw",
                     "encrypted": False, "auth_method": "CHAP"}}


def summary(attachment: Record) -> Record:
    return {"id": attachment["id"], "status": attachment["status"],
            "instance": attachment["instance"], "volume_id": attachment["volume_id"]}


def detail(attachment: Record) -> Record:
    return {**summary(attachment), "attached_at": attachment["attached_at"],
            "detached_at": attachment["detached_at"], "attach_mode": attachment["attach_mode"],
            "connection_info": _connection_info(attachment)}


def _live(cloud: SimCloud) -> list[Record]:
    volume_records.live_volumes(cloud)  # advances volumes (attaching -> attached)
    return list(cloud.kind(KIND).values())


def _get(cloud: SimCloud, who: Caller, attachment_id: str) -> Record:
    volume_records.live_volumes(cloud)
    attachment = cloud.kind(KIND).get(attachment_id)
    if attachment is None or not visible(who, attachment):
        raise not_found("VolumeAttachment", attachment_id)
    return attachment


def _list(request: Request, who: Caller, details: bool) -> dict[str, Any]:
    query = request.query_params
    cloud = cloud_of(request)
    with cloud.locked():
        rows = listed(request, who, _live(cloud))
        for key, field in (("status", "status"), ("volume_id", "volume_id"),
                           ("instance_id", "instance")):
            if query.get(key) is not None:
                rows = [r for r in rows if r.get(field) == query[key]]
        rows.sort(key=lambda r: (str(r["attached_at"]), r["id"]), reverse=True)
        return {"attachments": [detail(r) if details else summary(r) for r in rows]}


@router.get("/attachments")
def list_attachments(request: Request, who: Authenticated,
                     version: VolumeVersion) -> dict[str, Any]:
    _needs(version, (3, 27))
    return _list(request, who, False)


@router.get("/attachments/detail")
def list_attachments_detail(request: Request, who: Authenticated,
                            version: VolumeVersion) -> dict[str, Any]:
    _needs(version, (3, 27))
    return _list(request, who, True)


@router.post("/attachments")
async def create_attachment(request: Request, who: Authenticated,
                            version: VolumeVersion) -> dict[str, Any]:
    _needs(version, (3, 27))
    body = await body_of(request, "attachment")
    volume_id = body.get("volume_uuid")
    if not isinstance(volume_id, str):
        raise cinder_error(400, "Invalid input for field/attribute attachment. 'volume_uuid' "
                                "is a required property")
    cloud = cloud_of(request)
    with cloud.locked():
        volume = get_volume(cloud, who, volume_id)
        if volume["status"] != "available":
            raise cinder_error(400, f"Invalid volume: Volume {volume_id} status must be "
                                    "available or downloading to reserve, but the current "
                                    f"status is {volume['status']}.")
        connector = body.get("connector")
        status = "attaching" if connector else "reserved"
        entry = volume_records.attachment_of(cloud, volume, str(body.get("instance_uuid")),
                                             "", status=status)
        attachment = cloud.kind(KIND)[entry["attachment_id"]]
        attachment["instance"] = body.get("instance_uuid")
        attachment["attach_mode"] = body.get("mode") or "rw"
        attachment["connector"] = connector if isinstance(connector, dict) else None
        attachment["attached_at"] = None
        volume["status"] = status
        volume_records.touch(cloud, volume)
        cloud.changed()
        return {"attachment": detail(attachment)}


@router.get("/attachments/{attachment_id}")
def show_attachment(attachment_id: str, request: Request, who: Authenticated,
                    version: VolumeVersion) -> dict[str, Any]:
    _needs(version, (3, 27))
    cloud = cloud_of(request)
    with cloud.locked():
        return {"attachment": detail(_get(cloud, who, attachment_id))}


@router.put("/attachments/{attachment_id}")
async def update_attachment(attachment_id: str, request: Request, who: Authenticated,
                            version: VolumeVersion) -> dict[str, Any]:
    _needs(version, (3, 27))
    body = await body_of(request, "attachment")
    connector = body.get("connector")
    if not isinstance(connector, dict):
        raise cinder_error(400, "Invalid input for field/attribute attachment. 'connector' "
                                "is a required property")
    cloud = cloud_of(request)
    with cloud.locked():
        attachment = _get(cloud, who, attachment_id)
        attachment["connector"] = connector
        if attachment["status"] == "reserved":
            attachment["status"] = "attaching"
            volume = cloud.kind(volume_records.KIND).get(attachment["volume_id"])
            if volume is not None and volume["status"] == "reserved":
                volume["status"] = "attaching"
                volume_records.touch(cloud, volume)
        cloud.changed()
        return {"attachment": detail(attachment)}


@router.post("/attachments/{attachment_id}/action", status_code=204)
async def attachment_action(attachment_id: str, request: Request, who: Authenticated,
                            version: VolumeVersion) -> Response:
    _needs(version, (3, 44))
    payload = await request.json()
    if not isinstance(payload, dict) or "os-complete" not in payload:
        raise cinder_error(400, "There is no such action")
    cloud = cloud_of(request)
    with cloud.locked():
        attachment = _get(cloud, who, attachment_id)
        volume = cloud.kind(volume_records.KIND).get(attachment["volume_id"])
        if attachment["status"] != "attached" and volume is not None:
            attachment["status"] = "attached"
            attachment["attached_at"] = volume_records.stamp(cloud.now())
            volume["attachments"].append({
                "id": volume["id"], "attachment_id": attachment["id"],
                "volume_id": volume["id"], "server_id": attachment["instance"],
                "host_name": (attachment.get("connector") or {}).get("host"),
                "device": (attachment.get("connector") or {}).get("mountpoint"),
                "attached_at": attachment["attached_at"]})
            volume["status"] = "in-use"
            volume_records.touch(cloud, volume)
        cloud.changed()
    return Response(status_code=204)


@router.delete("/attachments/{attachment_id}")
def delete_attachment(attachment_id: str, request: Request, who: Authenticated,
                      version: VolumeVersion) -> dict[str, Any]:
    _needs(version, (3, 27))
    cloud = cloud_of(request)
    with cloud.locked():
        attachment = _get(cloud, who, attachment_id)
        cloud.kind(KIND).pop(attachment_id, None)
        volume = cloud.kind(volume_records.KIND).get(attachment["volume_id"])
        remaining: list[Record] = []
        if volume is not None:
            volume["attachments"] = [a for a in volume["attachments"]
                                     if a["attachment_id"] != attachment_id]
            remaining = [a for a in cloud.kind(KIND).values()
                         if a["volume_id"] == volume["id"]]
            if volume["status"] in ("reserved", "attaching", "in-use", "detaching"):
                volume["status"] = "in-use" if volume["attachments"] else "available"
                volume_records.sim(volume).pop("phase", None)
            volume_records.touch(cloud, volume)
        cloud.changed()
        return {"attachments": [summary(a) for a in remaining]}
