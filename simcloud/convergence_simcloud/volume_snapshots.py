"""Cinder's volume snapshots in the simulated cloud: create, list (summary and detail), show,
update, delete and metadata, with the lazy creating -> available state machine.

Callers: ``convergence_simcloud.volume`` includes :data:`router` in Cinder's router (mounted at
``/volume/v3/{project_id}``) and calls :func:`get_snapshot` when a volume is made from a
snapshot; openstacksdk's ``block_storage`` proxy (``create_snapshot``, ``snapshots``,
``get_snapshot``, ``delete_snapshot``) and ``openstack volume snapshot`` call these routes.
A snapshot is a record of kind ``"snapshot"``: ``id``, ``project_id``, ``user_id``, ``name``,
``description``, ``volume_id``, ``size``, ``status`` (creating, available, deleting, error),
``metadata``, ``created_at``, ``updated_at``, ``force``, and ``_sim: {made_at, phase,
phase_until, after}`` like a volume's.
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
    get_volume,
    listed,
    not_found,
    paginate,
    truthy,
    visible,
)
from convergence_simcloud.volume_quotas import enforce

router = APIRouter()
KIND = "snapshot"


def get_snapshot(cloud: SimCloud, who: Caller, snapshot_id: str) -> Record:
    snapshot = cloud.kind(KIND).get(snapshot_id)
    if snapshot is None or not visible(who, snapshot) or \
            copy_records.advance(cloud, KIND, snapshot) is None:
        raise not_found("Snapshot", snapshot_id)
    return snapshot


def show(request: Request, who: Caller, version: tuple[int, int], snapshot: Record) -> Record:
    shown: Record = {
        "id": snapshot["id"], "name": snapshot["name"],
        "description": snapshot["description"], "status": snapshot["status"],
        "size": snapshot["size"], "volume_id": snapshot["volume_id"],
        "metadata": dict(snapshot["metadata"]), "created_at": snapshot["created_at"],
        "updated_at": snapshot["updated_at"],
        "os-extended-snapshot-attributes:progress":
            "100%" if snapshot["status"] == "available" else "0%",
        "os-extended-snapshot-attributes:project_id": snapshot["project_id"]}
    if version >= (3, 14):
        shown["group_snapshot_id"] = None
    if version >= (3, 41):
        shown["user_id"] = snapshot["user_id"]
    return shown


def _list(request: Request, who: Caller, version: tuple[int, int]) -> dict[str, Any]:
    query = request.query_params
    cloud = cloud_of(request)
    with cloud.locked():
        rows = copy_records.live(cloud, KIND)
        rows = listed(request, who, rows)
        for key in ("name", "status", "volume_id"):
            if query.get(key) is not None:
                rows = [r for r in rows if str(r.get(key)) == query[key]]
        page, page_links = paginate(request, "snapshots", rows)
        body: dict[str, Any] = {"snapshots": [show(request, who, version, s) for s in page]}
    if page_links:
        body["snapshots_links"] = page_links
    return body


@router.get("/snapshots")
def list_snapshots(request: Request, who: Authenticated, version: VolumeVersion,
                   ) -> dict[str, Any]:
    return _list(request, who, version)


@router.get("/snapshots/detail")
def list_snapshots_detail(request: Request, who: Authenticated, version: VolumeVersion,
                          ) -> dict[str, Any]:
    return _list(request, who, version)


@router.post("/snapshots", status_code=202)
async def create_snapshot(request: Request, who: Authenticated, version: VolumeVersion,
                          ) -> dict[str, Any]:
    body = await body_of(request, "snapshot")
    cloud = cloud_of(request)
    with cloud.locked():
        if not body.get("volume_id"):
            raise cinder_error(400, "Invalid input for field/attribute snapshot. 'volume_id' "
                                    "is a required property")
        volume = get_volume(cloud, who, str(body["volume_id"]))
        force = truthy(str(body.get("force")))
        if volume["status"] != "available" and not (force and volume["status"] == "in-use"):
            raise cinder_error(400, f"Invalid volume: Volume {volume['id']} status must be "
                                    "available, but current status is: "
                                    f"{volume['status']}.")
        project_id = volume["project_id"]
        enforce(cloud, project_id, "snapshots", int(volume["size"]))
        now = cloud.now()
        metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        snapshot: Record = {
            "id": volume_records.new_id_dashed(), "project_id": project_id,
            "user_id": who.user_id, "name": body.get("name") or body.get("display_name"),
            "description": body.get("description"), "volume_id": volume["id"],
            "size": volume["size"], "status": "creating",
            "metadata": {str(k): str(v) for k, v in (metadata or {}).items()},
            "created_at": volume_records.stamp(now), "updated_at": None, "force": force,
            "_sim": {"made_at": now}}
        cloud.kind(KIND)[snapshot["id"]] = snapshot
        seconds = cloud.options.volume_phase_seconds("snapshot", int(volume["size"]))
        copy_records.start_phase(cloud, KIND, snapshot, "creating", "available", seconds)
        cloud.changed()
        return {"snapshot": show(request, who, version, snapshot)}


@router.get("/snapshots/{snapshot_id}")
def show_snapshot(snapshot_id: str, request: Request, who: Authenticated,
                  version: VolumeVersion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"snapshot": show(request, who, version, get_snapshot(cloud, who, snapshot_id))}


@router.put("/snapshots/{snapshot_id}")
async def update_snapshot(snapshot_id: str, request: Request, who: Authenticated,
                          version: VolumeVersion) -> dict[str, Any]:
    body = await body_of(request, "snapshot")
    cloud = cloud_of(request)
    with cloud.locked():
        snapshot = get_snapshot(cloud, who, snapshot_id)
        for key in ("name", "description"):
            if key in body:
                snapshot[key] = body[key]
        volume_records.touch(cloud, snapshot)
        cloud.changed()
        return {"snapshot": show(request, who, version, snapshot)}


@router.delete("/snapshots/{snapshot_id}", status_code=202)
def delete_snapshot(snapshot_id: str, request: Request, who: Authenticated,
                    _: VolumeVersion) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        snapshot = get_snapshot(cloud, who, snapshot_id)
        if snapshot["status"] not in ("available", "error", "error_deleting"):
            raise cinder_error(400, "Invalid snapshot: Volume Snapshot status must be "
                                    "available or error.")
        copy_records.start_delete(cloud, KIND, snapshot, "Snapshot")
        cloud.changed()
    return Response(status_code=202)


@router.get("/snapshots/{snapshot_id}/metadata")
def snapshot_metadata(snapshot_id: str, request: Request, who: Authenticated,
                      _: VolumeVersion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"metadata": dict(get_snapshot(cloud, who, snapshot_id)["metadata"])}


@router.post("/snapshots/{snapshot_id}/metadata")
async def add_snapshot_metadata(snapshot_id: str, request: Request, who: Authenticated,
                                _: VolumeVersion) -> dict[str, Any]:
    payload = await request.json()
    metadata = payload.get("metadata") if isinstance(payload, dict) else None
    if not isinstance(metadata, dict):
        raise cinder_error(400, "Malformed request body")
    cloud = cloud_of(request)
    with cloud.locked():
        snapshot = get_snapshot(cloud, who, snapshot_id)
        snapshot["metadata"].update({str(k): str(v) for k, v in metadata.items()})
        cloud.changed()
        return {"metadata": dict(snapshot["metadata"])}
