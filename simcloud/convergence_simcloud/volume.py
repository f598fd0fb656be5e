"""Cinder v3 of the simulated cloud: volumes (create, list, show, update, delete, actions,
metadata) under ``/volume/v3/{project_id}``, and the version documents.

Callers: ``convergence_simcloud.app`` mounts :data:`router` at ``/volume/v3/{project_id}`` and
serves :func:`~convergence_simcloud.volume_common.versions` at ``/volume/`` and ``/volume/v3/``;
openstacksdk's ``block_storage`` proxy and the ``openstack volume`` commands call these routes.
The snapshots, types, quotas and limits, actions, attachments and backups routes live in
``volume_snapshots``, ``volume_types``, ``volume_actions``, ``volume_attachments`` and
``volume_backups`` and are included in :data:`router`. Volumes are records of kind ``"volume"``
(``convergence_simcloud.volume_records`` has their shape and the lazy state machine: a read
advances them from the clock); faults of service ``"volume"`` and kind ``"volume"`` apply.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from convergence_simcloud import (
    faults,
    volume_actions,
    volume_attachments,
    volume_backups,
    volume_records,
    volume_snapshots,
    volume_types,
)
from convergence_simcloud.context import Authenticated, Caller, cloud_of
from convergence_simcloud.state import Record, SimCloud
from convergence_simcloud.volume_common import (
    VolumeVersion,
    body_of,
    check_project,
    cinder_error,
    find_type,
    forbidden,
    get_volume,
    links,
    listed,
    paginate,
    parse_size,
    time_filter,
    truthy,
)
from convergence_simcloud.volume_delete import start_delete
from convergence_simcloud.volume_quotas import enforce, over_count, quota_limits

router = APIRouter(dependencies=[Depends(check_project)])
router.include_router(volume_snapshots.router)
router.include_router(volume_types.router)
router.include_router(volume_attachments.router)
router.include_router(volume_actions.router)
router.include_router(volume_backups.router)

def show(request: Request, who: Caller, version: tuple[int, int], volume: Record) -> Record:
    """Cinder's detail view of ``volume`` at ``version`` for ``who``."""
    shown: Record = {
        "id": volume["id"], "name": volume["name"], "description": volume["description"],
        "status": volume["status"], "size": volume["size"],
        "availability_zone": volume["availability_zone"],
        "created_at": volume["created_at"], "updated_at": volume["updated_at"],
        "attachments": [dict(a) for a in volume["attachments"]],
        "bootable": volume["bootable"], "encrypted": volume["encrypted"],
        "multiattach": volume["multiattach"], "metadata": dict(volume["metadata"]),
        "volume_type": volume["volume_type"], "snapshot_id": volume["snapshot_id"],
        "source_volid": volume["source_volid"], "user_id": volume["user_id"],
        "replication_status": volume["replication_status"],
        "consistencygroup_id": volume["consistencygroup_id"],
        "os-vol-tenant-attr:tenant_id": volume["project_id"],
        "links": links(request, "volumes", volume["id"])}
    if "volume_image_metadata" in volume:
        shown["volume_image_metadata"] = dict(volume["volume_image_metadata"])
    if who.is_admin:
        shown["os-vol-host-attr:host"] = volume["host"]
        shown["os-vol-mig-status-attr:migstat"] = volume["migration_status"]
        shown["os-vol-mig-status-attr:name_id"] = None
    if version >= (3, 13):
        shown["group_id"] = volume["group_id"]
    if version >= (3, 21) and who.is_admin:
        shown["provider_id"] = None
    if version >= (3, 48):
        shown["service_uuid"] = "c5b0b5e3-7f3a-4d33-9a1c-5d0f3e4b2a11"
        shown["shared_targets"] = False
    return shown


def summary(request: Request, volume: Record) -> Record:
    return {"id": volume["id"], "name": volume["name"],
            "links": links(request, "volumes", volume["id"])}


def _metadata_filter(text: str) -> dict[str, str]:
    try:
        found = json.loads(text)
    except ValueError:
        try:
            found = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise cinder_error(400, f"Invalid input received: metadata {text}") from None
    if not isinstance(found, dict):
        raise cinder_error(400, f"Invalid input received: metadata {text}")
    return {str(k): str(v) for k, v in found.items()}


def _list(request: Request, who: Caller, detail: bool,
          version: tuple[int, int]) -> dict[str, Any]:
    query = request.query_params
    cloud = cloud_of(request)
    with cloud.locked():
        rows = listed(request, who, volume_records.live_volumes(cloud))
        for key in ("name", "status", "availability_zone", "bootable", "user_id"):
            if query.get(key) is not None:
                rows = [r for r in rows if str(r.get(key)) == query[key]]
        if query.get("metadata"):
            wanted = _metadata_filter(query["metadata"])
            rows = [r for r in rows
                    if all(r["metadata"].get(k) == v for k, v in wanted.items())]
        if version >= (3, 60):
            for key in ("created_at", "updated_at"):
                if query.get(key):
                    rows = time_filter(rows, key, query[key])
        page, page_links = paginate(request, "volumes", rows)
        body: dict[str, Any] = {"volumes": [show(request, who, version, v) if detail
                                            else summary(request, v) for v in page]}
        if version >= (3, 45) and truthy(query.get("with_count")):
            body["count"] = len(rows)
    if page_links:
        body["volumes_links"] = page_links
    return body


@router.get("/volumes")
def list_volumes(request: Request, who: Authenticated, version: VolumeVersion,
                 ) -> dict[str, Any]:
    return _list(request, who, False, version)


@router.get("/volumes/detail")
def list_volumes_detail(request: Request, who: Authenticated, version: VolumeVersion,
                        ) -> dict[str, Any]:
    return _list(request, who, True, version)


def _image(cloud: SimCloud, who: Caller, image_id: str) -> Record:
    image = cloud.kind("image").get(image_id)
    if image is None:
        image = next((i for i in cloud.kind("image").values() if i.get("name") == image_id),
                     None)
    if image is None or not (image.get("visibility") in ("public", "community")
                             or image.get("owner") == who.project_id or who.is_admin):
        raise cinder_error(400, "Invalid image identifier or unable to access requested "
                                "image.")
    return image


def _fits_image(size: int, image: Record) -> None:
    """Cinder's checks of a volume made from ``image``: its size and ``min_disk`` fit."""
    image_gib = -(-int(image.get("size") or 0) // 1024 ** 3)
    if image_gib > size:
        raise cinder_error(400, f"Invalid input received: Size of specified image {image_gib}"
                                f"GB is larger than volume size {size}GB.")
    min_disk = int(image.get("min_disk") or 0)
    if min_disk > size:
        raise cinder_error(400, f"Invalid input received: Volume size {size}GB cannot be "
                                f"smaller than the image minDisk size {min_disk}GB.")


@router.post("/volumes", status_code=202)
async def create_volume(request: Request, who: Authenticated, version: VolumeVersion,
                        ) -> dict[str, Any]:
    body = await body_of(request, "volume")
    cloud = cloud_of(request)
    with cloud.locked():
        snapshot = source = image = None
        if body.get("snapshot_id"):
            snapshot = volume_snapshots.get_snapshot(cloud, who, str(body["snapshot_id"]))
            if snapshot["status"] != "available":
                raise cinder_error(400, "Invalid snapshot: Originating snapshot status must "
                                        "be one of 'available' values")
        if body.get("source_volid"):
            source = get_volume(cloud, who, str(body["source_volid"]))
            if source["status"] not in ("available", "in-use"):
                raise cinder_error(400, "Invalid volume: Unable to clone volumes that are in "
                                        f"{source['status']} status")
        image_ref = body.get("imageRef") or body.get("image_id")
        if image_ref:
            image = _image(cloud, who, str(image_ref))
        origin = snapshot or source
        size = parse_size(body["size"] if body.get("size") is not None or origin is None
                     else origin["size"])
        if origin is not None and size < int(origin["size"]):
            raise cinder_error(400, f"Invalid input received: Volume size '{size}'GB cannot "
                                    f"be smaller than the source size {origin['size']}GB. "
                                    "They must be >= original volume size.")
        if image is not None:
            _fits_image(size, image)
        kind = body.get("volume_type") or (source or {}).get("volume_type")
        volume_type = find_type(cloud, kind)
        zone = body.get("availability_zone") or (source or {}).get("availability_zone") \
            or "nova"
        zones = {z["name"] for z in cloud.kind("availability_zone").values()} | {"nova"}
        if zone not in zones:
            raise cinder_error(400, f"Invalid input received: Availability zone '{zone}' is "
                                    "invalid.")
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise cinder_error(400, "Invalid input for field/attribute metadata.")
        project_id = str(who.project_id)
        draft = {"name": body.get("name"), "metadata": metadata, "project_id": project_id,
                 "size": size}
        rule = faults.quota_rule(cloud, "volume", "volume", draft)
        if rule is not None:
            if rule.message:
                raise cinder_error(413, rule.message)
            raise over_count("volumes", quota_limits(cloud, project_id)["volumes"])
        enforce(cloud, project_id, "volumes", size)
        image_metadata = None if image is None else {
            "image_id": image["id"], "image_name": image["name"],
            "checksum": image.get("checksum"), "container_format": image["container_format"],
            "disk_format": image["disk_format"], "min_disk": str(image.get("min_disk", 0)),
            "min_ram": str(image.get("min_ram", 0)), "size": str(image.get("size"))}
        volume = volume_records.new_volume(
            cloud, project_id, who.user_id, size, name=body.get("name"),
            description=body.get("description"), volume_type=volume_type,
            availability_zone=zone, metadata={str(k): str(v) for k, v in metadata.items()},
            bootable=image is not None or (source or {}).get("bootable") == "true",
            snapshot_id=None if snapshot is None else snapshot["id"],
            source_volid=None if source is None else source["id"],
            image_metadata=image_metadata)
        cloud.changed()
        return {"volume": show(request, who, version, volume)}


@router.get("/volumes/{volume_id}")
def show_volume(volume_id: str, request: Request, who: Authenticated,
                version: VolumeVersion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"volume": show(request, who, version, get_volume(cloud, who, volume_id))}


@router.put("/volumes/{volume_id}")
async def update_volume(volume_id: str, request: Request, who: Authenticated,
                        version: VolumeVersion) -> dict[str, Any]:
    body = await body_of(request, "volume")
    cloud = cloud_of(request)
    with cloud.locked():
        volume = get_volume(cloud, who, volume_id)
        for key in ("name", "description"):
            if key in body:
                volume[key] = body[key]
        if "display_name" in body:
            volume["name"] = body["display_name"]
        if isinstance(body.get("metadata"), dict):
            volume["metadata"] = {str(k): str(v) for k, v in body["metadata"].items()}
        volume_records.touch(cloud, volume)
        cloud.changed()
        return {"volume": show(request, who, version, volume)}


@router.delete("/volumes/{volume_id}", status_code=202)
def delete_volume(volume_id: str, request: Request, who: Authenticated,
                  version: VolumeVersion) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        volume = get_volume(cloud, who, volume_id)
        force = version >= (3, 23) and truthy(request.query_params.get("force"))
        if force and not who.is_admin:
            raise forbidden("volume:force_delete")
        start_delete(cloud, volume, force=force,
                     cascade=truthy(request.query_params.get("cascade")))
    return Response(status_code=202)


# -- metadata --------------------------------------------------------------------------------

@router.get("/volumes/{volume_id}/metadata")
def show_metadata(volume_id: str, request: Request, who: Authenticated,
                  _: VolumeVersion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"metadata": dict(get_volume(cloud, who, volume_id)["metadata"])}


async def _set_metadata(volume_id: str, request: Request, who: Caller,
                        replace: bool) -> dict[str, Any]:
    try:
        payload = await request.json()
    except ValueError:
        raise cinder_error(400, "Malformed request body") from None
    metadata = payload.get("metadata") if isinstance(payload, dict) else None
    if not isinstance(metadata, dict):
        raise cinder_error(400, "Malformed request body")
    cloud = cloud_of(request)
    with cloud.locked():
        volume = get_volume(cloud, who, volume_id)
        new = {str(k): str(v) for k, v in metadata.items()}
        volume["metadata"] = new if replace else {**volume["metadata"], **new}
        volume_records.touch(cloud, volume)
        cloud.changed()
        return {"metadata": dict(volume["metadata"])}


@router.post("/volumes/{volume_id}/metadata")
async def add_metadata(volume_id: str, request: Request, who: Authenticated,
                       _: VolumeVersion) -> dict[str, Any]:
    return await _set_metadata(volume_id, request, who, replace=False)


@router.put("/volumes/{volume_id}/metadata")
async def replace_metadata(volume_id: str, request: Request, who: Authenticated,
                           _: VolumeVersion) -> dict[str, Any]:
    return await _set_metadata(volume_id, request, who, replace=True)


@router.get("/volumes/{volume_id}/metadata/{key}")
def show_metadata_item(volume_id: str, key: str, request: Request, who: Authenticated,
                       _: VolumeVersion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        metadata = get_volume(cloud, who, volume_id)["metadata"]
        if key not in metadata:
            raise cinder_error(404, "Metadata item was not found")
        return {"meta": {key: metadata[key]}}


@router.put("/volumes/{volume_id}/metadata/{key}")
async def set_metadata_item(volume_id: str, key: str, request: Request, who: Authenticated,
                            _: VolumeVersion) -> dict[str, Any]:
    payload = await request.json()
    meta = payload.get("meta") if isinstance(payload, dict) else None
    if not isinstance(meta, dict) or list(meta) != [key]:
        raise cinder_error(400, "Request body and URI mismatch")
    cloud = cloud_of(request)
    with cloud.locked():
        volume = get_volume(cloud, who, volume_id)
        volume["metadata"][key] = str(meta[key])
        volume_records.touch(cloud, volume)
        cloud.changed()
        return {"meta": {key: volume["metadata"][key]}}


@router.delete("/volumes/{volume_id}/metadata/{key}")
def delete_metadata_item(volume_id: str, key: str, request: Request, who: Authenticated,
                         _: VolumeVersion) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        volume = get_volume(cloud, who, volume_id)
        if key not in volume["metadata"]:
            raise cinder_error(404, "Metadata item was not found")
        del volume["metadata"][key]
        volume_records.touch(cloud, volume)
        cloud.changed()
    return Response(status_code=200)


@router.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                  include_in_schema=False)
def unknown(rest: str, who: Authenticated) -> None:
    """Anything else under Cinder's prefix: Cinder's 404 body, not the framework's."""
    raise cinder_error(404, "The resource could not be found.")
