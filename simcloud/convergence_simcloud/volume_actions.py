"""Cinder's volume actions (``POST /volumes/{id}/action``) in the simulated cloud: extend,
reset status, force delete, bootable and read-only flags, retype, and the legacy attach flow
(``os-reserve``, ``os-attach``, ``os-begin_detaching``, ``os-detach``...) and revert to
the latest snapshot (3.40).

Callers: ``convergence_simcloud.volume`` includes :data:`router` in Cinder's router (mounted at
``/volume/v3/{project_id}``); openstacksdk's ``block_storage`` proxy (``extend_volume``,
``reset_volume_status``, ``delete_volume(force=True)``, ``set_volume_bootable_status``,
``retype_volume``, ``attach_volume``, ``detach_volume``...) calls it. Each action changes the
volume record of ``convergence_simcloud.volume_records`` under the cloud's lock and answers
202 (an unknown action 400, an admin action by a non-admin 403, as Cinder does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud import volume_records
from convergence_simcloud.context import Authenticated, Caller, cloud_of
from convergence_simcloud.state import Record, SimCloud
from convergence_simcloud.volume_common import (
    VolumeVersion,
    cinder_error,
    find_type,
    forbidden,
    get_volume,
    parse_size,
    truthy,
)
from convergence_simcloud.volume_delete import start_delete
from convergence_simcloud.volume_quotas import enforce

router = APIRouter()
ADMIN_ACTIONS = {"os-reset_status": "reset_status", "os-force_delete": "force_delete",
                 "os-force_detach": "force_detach"}


@router.post("/volumes/{volume_id}/action", status_code=202)
async def volume_action(volume_id: str, request: Request, who: Authenticated,
                        version: VolumeVersion) -> Response:
    try:
        payload = await request.json()
    except ValueError:
        raise cinder_error(400, "Malformed request body") from None
    if not isinstance(payload, dict) or len(payload) != 1:
        raise cinder_error(400, "Malformed request body")
    action, args = next(iter(payload.items()))
    args = args if isinstance(args, dict) else {}
    if action in ADMIN_ACTIONS and not who.is_admin:
        raise forbidden(f"volume_extension:volume_admin_actions:{ADMIN_ACTIONS[action]}")
    handler = ACTIONS.get(action)
    if handler is None:
        raise cinder_error(400, f"There is no such action: {action}")
    cloud = cloud_of(request)
    with cloud.locked():
        volume = get_volume(cloud, who, volume_id)
        handler(cloud, who, version, volume, args)
        volume_records.touch(cloud, volume)
        cloud.changed()
    return Response(status_code=202)


def _status_must_be(volume: Record, allowed: tuple[str, ...], doing: str) -> None:
    if volume["status"] not in allowed:
        raise cinder_error(400, f"Invalid volume: Volume {volume['id']} status must be "
                                f"{' or '.join(allowed)} to {doing}, but current status is: "
                                f"{volume['status']}.")


def _extend(cloud: SimCloud, who: Caller, version: tuple[int, int], volume: Record,
            args: dict[str, Any]) -> None:
    _status_must_be(volume, ("available", "in-use") if version >= (3, 42) else ("available",),
                    "extend")
    new_size = parse_size(args.get("new_size"))
    if new_size <= int(volume["size"]):
        raise cinder_error(400, "Invalid input received: New size for extend must be greater "
                                f"than current size. (current: {volume['size']}, "
                                f"extended: {new_size}).")
    enforce(cloud, volume["project_id"], None, new_size - int(volume["size"]))
    after = volume["status"]
    volume["size"] = new_size
    volume_records.start_phase(cloud, volume, "extending", after,
                               cloud.options.volume_phase_seconds("create", new_size))


def _reset_status(cloud: SimCloud, who: Caller, version: tuple[int, int], volume: Record,
                  args: dict[str, Any]) -> None:
    if args.get("status"):
        volume_records.sim(volume).pop("phase", None)
        volume["status"] = str(args["status"])
    if args.get("migration_status"):
        volume["migration_status"] = str(args["migration_status"])
    if args.get("attach_status") == "detached":
        volume["attachments"] = []
        volume_records.drop_attachments(cloud, volume["id"], None)


def _force_delete(cloud: SimCloud, who: Caller, version: tuple[int, int], volume: Record,
                  args: dict[str, Any]) -> None:
    start_delete(cloud, volume, force=True, cascade=False)


def _set_bootable(cloud: SimCloud, who: Caller, version: tuple[int, int], volume: Record,
                  args: dict[str, Any]) -> None:
    volume["bootable"] = "true" if truthy(str(args.get("bootable"))) else "false"


def _readonly(cloud: SimCloud, who: Caller, version: tuple[int, int], volume: Record,
              args: dict[str, Any]) -> None:
    volume["metadata"]["readonly"] = "True" if truthy(str(args.get("readonly"))) else "False"


def _retype(cloud: SimCloud, who: Caller, version: tuple[int, int], volume: Record,
            args: dict[str, Any]) -> None:
    _status_must_be(volume, ("available", "in-use"), "retype")
    new_type = find_type(cloud, str(args.get("new_type") or ""))
    if new_type["id"] == volume.get("volume_type_id"):
        raise cinder_error(400, "Invalid input received: New volume type must be different "
                                "from the original volume type.")
    volume["volume_type"] = new_type["name"]
    volume["volume_type_id"] = new_type["id"]


def _reserve(cloud: SimCloud, who: Caller, version: tuple[int, int], volume: Record,
             args: dict[str, Any]) -> None:
    _status_must_be(volume, ("available",), "reserve")
    volume["status"] = "attaching"


def _unreserve(cloud: SimCloud, who: Caller, version: tuple[int, int], volume: Record,
               args: dict[str, Any]) -> None:
    if volume["status"] == "attaching":
        volume["status"] = "in-use" if volume["attachments"] else "available"


def _attach(cloud: SimCloud, who: Caller, version: tuple[int, int], volume: Record,
            args: dict[str, Any]) -> None:
    """Legacy ``os-attach``: the volume is in-use at once, attached to the instance (or a
    host) at ``mountpoint``."""
    _status_must_be(volume, ("available", "attaching"), "attach")
    instance = args.get("instance_uuid")
    if not instance and not args.get("host_name"):
        raise cinder_error(400, "Invalid request to attach volume to an invalid target")
    entry = volume_records.attachment_of(cloud, volume, str(instance or ""),
                                         str(args.get("mountpoint") or ""), status="attached")
    entry["server_id"] = instance
    entry["host_name"] = args.get("host_name")
    volume["attachments"].append(entry)
    volume_records.sim(volume).pop("phase", None)
    volume["status"] = "in-use"


def _begin_detaching(cloud: SimCloud, who: Caller, version: tuple[int, int], volume: Record,
                     args: dict[str, Any]) -> None:
    _status_must_be(volume, ("in-use",), "begin detaching")
    volume["status"] = "detaching"


def _roll_detaching(cloud: SimCloud, who: Caller, version: tuple[int, int], volume: Record,
                    args: dict[str, Any]) -> None:
    if volume["status"] == "detaching":
        volume["status"] = "in-use" if volume["attachments"] else "available"


def _detach(cloud: SimCloud, who: Caller, version: tuple[int, int], volume: Record,
            args: dict[str, Any]) -> None:
    """``os-detach`` / ``os-force_detach``: the attachment ``attachment_id`` (or, without
    one, the only attachment) is gone; the volume is available when none remain."""
    wanted = args.get("attachment_id")
    found = [a for a in volume["attachments"] if wanted in (None, a["attachment_id"])]
    if not found or (wanted is None and len(volume["attachments"]) > 1):
        raise cinder_error(400, f"Invalid volume: Volume {volume['id']} is not attached "
                                "with that attachment id." if wanted else
                                "Invalid input received: Detach volume from instance with "
                                "multiple attachments requires an attachment_id.")
    gone = {a["attachment_id"] for a in found}
    volume["attachments"] = [a for a in volume["attachments"] if a["attachment_id"] not in gone]
    for attachment_id in gone:
        cloud.kind("volume_attachment").pop(attachment_id, None)
    volume_records.sim(volume).pop("phase", None)
    volume["status"] = "in-use" if volume["attachments"] else "available"


def _revert(cloud: SimCloud, who: Caller, version: tuple[int, int], volume: Record,
            args: dict[str, Any]) -> None:
    """3.40's revert to the volume's latest snapshot (``reverting``, then as it was)."""
    if version < (3, 40):
        raise cinder_error(400, "There is no such action: revert")
    _status_must_be(volume, ("available",), "revert")
    snapshots = sorted((s for s in cloud.kind("snapshot").values()
                        if s["volume_id"] == volume["id"]),
                       key=lambda s: (str(s["created_at"]), s["id"]))
    wanted = args.get("snapshot_id")
    if not snapshots or snapshots[-1]["id"] != wanted:
        raise cinder_error(400, f"Invalid snapshot: Snapshot {wanted} is not the latest one "
                                f"of volume {volume['id']}.")
    if snapshots[-1]["status"] != "available":
        raise cinder_error(400, "Invalid snapshot: Snapshot status must be available.")
    if int(snapshots[-1]["size"]) != int(volume["size"]):
        raise cinder_error(400, "Invalid volume: Volume and snapshot sizes must match.")
    volume_records.start_phase(cloud, volume, "reverting", "available",
                               cloud.options.volume_phase_seconds("create",
                                                                  int(volume["size"])))


Action = Callable[[SimCloud, Caller, tuple[int, int], Record, dict[str, Any]], None]
ACTIONS: dict[str, Action] = {
    "os-extend": _extend, "os-reset_status": _reset_status, "os-force_delete": _force_delete,
    "os-set_bootable": _set_bootable, "os-update_readonly_flag": _readonly,
    "os-retype": _retype, "os-reserve": _reserve, "os-unreserve": _unreserve,
    "os-attach": _attach, "os-begin_detaching": _begin_detaching,
    "os-roll_detaching": _roll_detaching, "os-detach": _detach, "os-force_detach": _detach,
    "revert": _revert}
