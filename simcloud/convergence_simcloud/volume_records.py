"""Cinder's volume records: their stored shape, the lazy state machine, and what Nova asks of them.

Callers: ``convergence_simcloud.volume`` (Cinder's routes) and ``volume_snapshots`` create
and read volumes through :func:`new_volume` and :func:`advance`;
``convergence_simcloud.compute_volumes`` (Nova's ``os-volume_attachments``) attaches and
detaches through :func:`start_attach` and :func:`start_detach`; Nova's servers module calls
:func:`detach_all` when a server is deleted or vanishes, and :func:`attached_volumes` to show
``os-extended-volumes:volumes_attached``. Every function here is called under the cloud's lock.

A volume (kind ``"volume"``) is stored in Cinder's detail shape: ``id``, ``project_id``,
``user_id``, ``name``, ``description``, ``size``, ``status`` (creating, available, reserved,
attaching, in-use, detaching, extending, reverting, deleting, error, error_deleting),
``availability_zone``, ``created_at``/``updated_at`` (ISO strings), ``attachments``
(``[{id, attachment_id, volume_id, server_id, host_name, device, attached_at}]``),
``bootable`` (``"true"``/``"false"``),
``encrypted``, ``multiattach``, ``metadata``, ``volume_type`` (the type's name),
``volume_type_id``, ``snapshot_id``, ``source_volid``, ``volume_image_metadata`` (from an
image), ``host``; and ``_sim: {made_at, phase, phase_until, after}``: while ``phase`` (a
transient status) lasts until the clock value ``phase_until``, then the status becomes
``after`` (``None``: the volume is gone). Attachments wait in ``_sim["pending"]`` while
attaching. A volume a fault rule sends to error leaves a Cinder user message saying why
(:func:`user_message`, kind ``"volume_message"``, listed by ``volume_types``).
"""

from __future__ import annotations

import datetime
from typing import Any

from convergence_simcloud import faults
from convergence_simcloud.state import Record, SimCloud, new_id

KIND = "volume"
SERVICE = "volume"
TRANSIENT = ("creating", "attaching", "detaching", "extending", "reverting", "deleting")
BACKEND_HOST = "cinder@lvmdriver-1#lvmdriver-1"


def stamp(when: float) -> str:
    """Cinder's timestamp: ``2018-04-04T10:26:16.000000``."""
    moment = datetime.datetime.fromtimestamp(when, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")


def touch(cloud: SimCloud, record: Record) -> None:
    record["updated_at"] = stamp(cloud.now())


def sim(record: Record) -> dict[str, Any]:
    found: dict[str, Any] = record.setdefault("_sim", {})
    return found


def start_phase(cloud: SimCloud, record: Record, phase: str, after: str | None,
                seconds: float) -> None:
    """Put ``record`` in the transient status ``phase`` for ``seconds``, then ``after``."""
    record["status"] = phase
    state = sim(record)
    state.update(phase=phase, phase_until=cloud.now() + seconds, after=after)
    touch(cloud, record)
    if seconds <= 0:
        advance(cloud, record)


def new_volume(cloud: SimCloud, project_id: str, user_id: str, size: int, *,
               name: str | None = None, description: str | None = None,
               volume_type: Record | None = None, availability_zone: str = "nova",
               metadata: dict[str, str] | None = None, bootable: bool = False,
               snapshot_id: str | None = None, source_volid: str | None = None,
               image_metadata: dict[str, str] | None = None) -> Record:
    """A new volume in ``creating``, stored; ``available`` after the create phase."""
    now = cloud.now()
    record: Record = {
        "id": new_id_dashed(), "project_id": project_id, "user_id": user_id, "name": name,
        "description": description, "size": int(size), "status": "creating",
        "availability_zone": availability_zone, "created_at": stamp(now),
        "updated_at": None, "attachments": [], "bootable": "true" if bootable else "false",
        "encrypted": False, "multiattach": False, "metadata": dict(metadata or {}),
        "volume_type": None if volume_type is None else volume_type["name"],
        "volume_type_id": None if volume_type is None else volume_type["id"],
        "snapshot_id": snapshot_id, "source_volid": source_volid,
        "replication_status": None, "consistencygroup_id": None, "group_id": None,
        "migration_status": None, "host": BACKEND_HOST,
        "_sim": {"made_at": now}}
    if image_metadata is not None:
        record["volume_image_metadata"] = dict(image_metadata)
    cloud.kind(KIND)[record["id"]] = record
    start_phase(cloud, record, "creating", "available",
                cloud.options.volume_phase_seconds("create", int(size)))
    return record


def new_id_dashed() -> str:
    """A UUID with dashes, as Cinder's ids are."""
    raw = new_id()
    return f"{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}"


def advance(cloud: SimCloud, record: Record) -> Record | None:
    """Bring ``record`` up to the clock; None when it is gone (deleted or vanished)."""
    state = sim(record)
    now = cloud.now()
    fate = faults.fate(cloud, SERVICE, KIND, record, float(state.get("made_at", now)))
    if fate.vanish_at is not None and now >= fate.vanish_at:
        _forget(cloud, record)
        return None
    phase = state.get("phase")
    if phase is not None and record["status"] == phase:
        if phase == "creating" and fate.stays_building:
            return record
        if phase == "deleting" and state.get("hangs"):
            return record
        if now >= float(state.get("phase_until", now)):
            after = state.get("after")
            state.pop("phase", None)
            if after is None:
                _forget(cloud, record)
                return None
            if phase == "attaching":
                for done in state.pop("pending", []):
                    record["attachments"].append(done)
                    _set_attachment_status(cloud, done["attachment_id"], "attached")
            record["status"] = after
            touch(cloud, record)
    if fate.error_at is not None and now >= fate.error_at and not state.get("errored"):
        state["errored"] = True
        if record["status"] in ("creating", "available", "extending", "attaching"):
            action = "extend volume" if record["status"] == "extending" else \
                "attach volume" if record["status"] == "attaching" else "create volume"
            state.pop("phase", None)
            record["status"] = "error"
            touch(cloud, record)
            user_message(cloud, record, f"{action}: {fate.message}")
    return record


def user_message(cloud: SimCloud, volume: Record, text: str) -> Record:
    """Record one of Cinder's user messages (3.3, kind ``"volume_message"``) about ``volume``:
    how Cinder tells its users why a volume went to error."""
    now = cloud.now()
    message: Record = {
        "id": new_id_dashed(), "project_id": volume["project_id"], "resource_type": "VOLUME",
        "resource_uuid": volume["id"], "event_id": "VOLUME_VOLUME_001_002",
        "message_level": "ERROR", "user_message": text, "request_id": f"req-{new_id()}",
        "created_at": stamp(now), "guaranteed_until": stamp(now + 30 * 24 * 3600.0)}
    cloud.kind("volume_message")[message["id"]] = message
    return message


def _set_attachment_status(cloud: SimCloud, attachment_id: str, status: str) -> None:
    found = cloud.kind("volume_attachment").get(attachment_id)
    if found is not None:
        found["status"] = status


def drop_attachments(cloud: SimCloud, volume_id: str, server_id: str | None) -> None:
    """Forget the Cinder attachments of ``volume_id`` (to ``server_id``, or all)."""
    table = cloud.kind("volume_attachment")
    for attachment in list(table.values()):
        if attachment.get("volume_id") == volume_id and \
                server_id in (None, attachment.get("instance")):
            table.pop(attachment["id"], None)


def _forget(cloud: SimCloud, record: Record) -> None:
    cloud.kind(KIND).pop(record["id"], None)
    drop_attachments(cloud, record["id"], None)


def live_volumes(cloud: SimCloud) -> list[Record]:
    """Every volume, advanced (the gone ones dropped)."""
    found = []
    for record in list(cloud.kind(KIND).values()):
        if advance(cloud, record) is not None:
            found.append(record)
    return found


def attachment_of(cloud: SimCloud, volume: Record, server_id: str, device: str,
                  status: str = "attaching", attachment_id: str | None = None) -> Record:
    """One entry of a volume's ``attachments`` (Cinder's shape), and its Cinder attachment
    (kind ``"volume_attachment"``, shown by ``convergence_simcloud.volume_attachments``)."""
    now = cloud.now()
    attachment_id = attachment_id or new_id_dashed()
    cloud.kind("volume_attachment").setdefault(attachment_id, {
        "id": attachment_id, "project_id": volume["project_id"], "volume_id": volume["id"],
        "instance": server_id, "status": status, "attach_mode": "rw",
        "attached_at": stamp(now), "detached_at": None, "connector": None})
    return {"id": volume["id"], "attachment_id": attachment_id, "volume_id": volume["id"],
            "server_id": server_id, "host_name": None, "device": device,
            "attached_at": stamp(now)}


def start_attach(cloud: SimCloud, volume: Record, server_id: str, device: str) -> Record:
    """Begin attaching ``volume`` (available) to ``server_id``: attaching, then in-use."""
    attachment = attachment_of(cloud, volume, server_id, device)
    sim(volume)["pending"] = [attachment]
    start_phase(cloud, volume, "attaching", "in-use",
                cloud.options.volume_phase_seconds("attach", int(volume["size"])))
    return attachment


def start_detach(cloud: SimCloud, volume: Record, server_id: str) -> None:
    """Begin detaching ``volume`` from ``server_id``: detaching, then available (or in-use
    while other attachments remain)."""
    volume["attachments"] = [a for a in volume["attachments"] if a["server_id"] != server_id]
    sim(volume).pop("pending", None)
    drop_attachments(cloud, volume["id"], server_id)
    after = "in-use" if volume["attachments"] else "available"
    start_phase(cloud, volume, "detaching", after,
                cloud.options.volume_phase_seconds("detach", int(volume["size"])))


def device_of(volume: Record, server_id: str) -> str | None:
    for attachment in volume.get("attachments", []) + sim(volume).get("pending", []):
        if attachment["server_id"] == server_id:
            return str(attachment.get("device") or "")
    return None


def attached_volumes(cloud: SimCloud, server_id: str) -> list[Record]:
    """The volumes attached (or attaching) to ``server_id``, advanced, oldest first."""
    found = [v for v in live_volumes(cloud) if device_of(v, server_id) is not None]
    return sorted(found, key=lambda v: str(v.get("created_at")))


def detach_all(cloud: SimCloud, server_id: str) -> None:
    """Detach at once every volume attached to ``server_id`` (the server is gone)."""
    for volume in attached_volumes(cloud, server_id):
        volume["attachments"] = [a for a in volume["attachments"]
                                 if a["server_id"] != server_id]
        state = sim(volume)
        state.pop("pending", None)
        if volume["status"] in ("attaching", "detaching", "in-use"):
            state.pop("phase", None)
            volume["status"] = "in-use" if volume["attachments"] else "available"
        drop_attachments(cloud, volume["id"], server_id)
        touch(cloud, volume)
    for attachment in list(cloud.kind("volume_attachment").values()):  # reserved ones
        if attachment.get("instance") == server_id:
            cloud.kind("volume_attachment").pop(attachment["id"], None)
            held = cloud.kind(KIND).get(str(attachment["volume_id"]))
            if held is not None and held["status"] in ("reserved", "attaching") \
                    and not held["attachments"]:
                held["status"] = "available"
    cloud.changed()
