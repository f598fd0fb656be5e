"""Nova's volume attachments (``/servers/{server_id}/os-volume_attachments``) in the simulated
cloud: list, attach, show and detach a Cinder volume, with Nova's shapes of 2.1-2.61.

Callers: ``convergence_simcloud.app`` mounts :data:`router` at ``/compute/v2.1``;
openstacksdk's ``compute`` proxy (``create_volume_attachment``, ``volume_attachments``,
``get_volume_attachment``, ``delete_volume_attachment``) and ``openstack server add volume`` /
``remove volume`` call these routes. Servers come from ``convergence_simcloud.servers``
(:func:`visible_server`); the volume's side (attaching -> in-use after the ``attach`` phase,
detaching -> available after ``detach``) is ``convergence_simcloud.volume_records``. An
attachment is shown as ``{"id", "volumeId", "serverId", "device"}`` (the ``tag`` of 2.70 and
the later fields are beyond the advertised 2.61).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud import volume_records
from convergence_simcloud.compute import Microversion, nova_error
from convergence_simcloud.context import Authenticated, Caller, cloud_of
from convergence_simcloud.servers import check_state, visible_server
from convergence_simcloud.state import Record, SimCloud

router = APIRouter()
# vm_states Nova attaches and detaches volumes in (check_instance_state of attach_volume)
ATTACHABLE = ("active", "paused", "stopped", "resized", "soft-delete", "shelved",
              "shelved_offloaded")


def _server(cloud: SimCloud, who: Caller, server_id: str) -> Record:
    return visible_server(cloud, who, server_id)


def _volume(cloud: SimCloud, who: Caller, volume_id: str) -> Record:
    volume = cloud.kind(volume_records.KIND).get(volume_id)
    if volume is None or not (who.is_admin or volume["project_id"] == who.project_id) or \
            volume_records.advance(cloud, volume) is None:
        raise nova_error(404, f"Volume {volume_id} could not be found.")
    return volume


def show(server_id: str, volume: Record) -> Record:
    return {"id": volume["id"], "volumeId": volume["id"], "serverId": server_id,
            "device": volume_records.device_of(volume, server_id)}


def _next_device(cloud: SimCloud, server_id: str) -> str:
    used = {volume_records.device_of(v, server_id)
            for v in volume_records.attached_volumes(cloud, server_id)}
    for letter in "bcdefghijklmnopqrstuvwxyz":
        if f"/dev/vd{letter}" not in used:
            return f"/dev/vd{letter}"
    raise nova_error(400, "No free disk device names for prefix 'vd'")


@router.get("/servers/{server_id}/os-volume_attachments")
def list_attachments(server_id: str, request: Request, who: Authenticated,
                     _: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        _server(cloud, who, server_id)
        rows = [show(server_id, v) for v in volume_records.attached_volumes(cloud, server_id)]
    query = request.query_params
    offset = int(query.get("offset") or 0)
    limit = int(query["limit"]) if query.get("limit") else None
    rows = rows[offset:] if limit is None else rows[offset:offset + limit]
    return {"volumeAttachments": rows}


@router.post("/servers/{server_id}/os-volume_attachments")
async def attach(server_id: str, request: Request, who: Authenticated,
                 _: Microversion) -> dict[str, Any]:
    try:
        payload = await request.json()
    except ValueError:
        raise nova_error(400, "Malformed request body") from None
    body = payload.get("volumeAttachment") if isinstance(payload, dict) else None
    if not isinstance(body, dict) or not isinstance(body.get("volumeId"), str):
        raise nova_error(400, "Invalid input for field/attribute volumeAttachment. Value: "
                              f"{body}. 'volumeId' is a required property")
    cloud = cloud_of(request)
    with cloud.locked():
        server = _server(cloud, who, server_id)
        volume = _volume(cloud, who, body["volumeId"])
        if volume_records.device_of(volume, server_id) is not None:
            raise nova_error(400, f"Invalid volume: volume {volume['id']} already attached")
        check_state(server, "attach_volume", ATTACHABLE, (None,))
        if volume["status"] != "available":
            raise nova_error(400, f"Invalid volume: volume '{volume['id']}' status must be "
                                  f"'available'. Currently in '{volume['status']}'")
        device = body.get("device") or _next_device(cloud, server_id)
        volume_records.start_attach(cloud, volume, server_id, str(device))
        cloud.changed()
        return {"volumeAttachment": show(server_id, volume)}


@router.get("/servers/{server_id}/os-volume_attachments/{volume_id}")
def show_attachment(server_id: str, volume_id: str, request: Request, who: Authenticated,
                    _: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        _server(cloud, who, server_id)
        volume = cloud.kind(volume_records.KIND).get(volume_id)
        if volume is None or volume_records.advance(cloud, volume) is None or \
                volume_records.device_of(volume, server_id) is None:
            raise nova_error(404, f"Volume {volume_id} is not attached to instance "
                                  f"{server_id}.")
        return {"volumeAttachment": show(server_id, volume)}


@router.delete("/servers/{server_id}/os-volume_attachments/{volume_id}", status_code=202)
def detach(server_id: str, volume_id: str, request: Request, who: Authenticated,
           _: Microversion) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        server = _server(cloud, who, server_id)
        volume = cloud.kind(volume_records.KIND).get(volume_id)
        if volume is None or volume_records.advance(cloud, volume) is None or \
                volume_records.device_of(volume, server_id) is None:
            raise nova_error(404, f"volume_id not found: {volume_id}")
        check_state(server, "detach_volume", ATTACHABLE, (None,))
        if volume["status"] == "detaching":
            raise nova_error(400, "Invalid volume: Unable to detach volume. Volume status "
                                  "must be 'in-use' and attach_status must be 'attached' "
                                  "to detach.")
        volume_records.start_detach(cloud, volume, server_id)
        cloud.changed()
    return Response(status_code=202)
