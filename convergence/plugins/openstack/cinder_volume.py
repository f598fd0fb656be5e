"""``OS::Cinder::Volume``: a Cinder volume, made empty, from an image, a snapshot, another volume
or a backup, updated in place, and backed up before it goes under ``deletion_policy: Snapshot``.

Callers: the registry (entry point ``OS::Cinder::Volume``); the engine's steps call it through
the plugin port. Properties, defaults, what updates in place and the attributes are Heat's
(``heat/engine/resources/openstack/cinder/volume.py``): a changed name, description, metadata,
size (growing only: a smaller size fails the update, nothing is replaced), volume type (a
retype), read-only flag or backup (a restore onto the volume) is done to the same volume.

The record's key rides in the volume's metadata (:data:`OWNER_KEY`); Cinder lists volumes by
metadata, which is how a create cut short is found again rather than made twice. A volume
made from a backup is made empty first, with that key, and the backup is restored onto it, so
that it too can be found again. Work that must wait for the volume (a restore, an extension)
is a list of steps kept in the pending progress's state and taken one at a time as the volume
becomes available again: no thread waits. Why a volume went to error is read from Cinder's
user messages. A volume whose delete failed in Cinder (``error_deleting``) is deleted again
with a force delete, the only delete Cinder takes for it. The backup taken for the Snapshot
policy is in :mod:`convergence.plugins.openstack.cinder_backup`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from openstack.block_storage.v3 import message as cinder_message

from convergence.plugins.base import PluginContext, Progress, ResourceFailure, RetryLater
from convergence.plugins.openstack import cinder_backup
from convergence.plugins.openstack.errors import Absent, translated
from convergence.plugins.openstack.names import physical_name
from convergence.plugins.openstack.resource import (
    BUILDING,
    FAILED,
    READY,
    OpenStackResource,
    State,
)
from convergence.template.properties import (
    BOOLEAN,
    INTEGER,
    MAP,
    STRING,
    PropertySchema,
    TypeSchema,
)

OWNER_KEY = "convergence_owner"  # the metadata key carrying the record's key
READ_ONLY_KEY = "readonly"  # Cinder shows its read-only flag among the metadata
RESTORE, EXTEND, READ_ONLY = "restore", "extend", "read_only"  # steps that wait for the volume
MESSAGES_VERSION = "3.5"  # Cinder's user messages (3.3), filtered by resource (3.5)

SCHEMA = TypeSchema(
    name="OS::Cinder::Volume",
    description="A Cinder volume.",
    snapshot=True,
    properties={
        "availability_zone": PropertySchema(STRING, "The zone to make the volume in."),
        "size": PropertySchema(INTEGER, "The size in GB; an update may only grow it. Needed "
                               "unless backup_id, source_volid or snapshot_id is given.",
                               update_allowed=True, min=1),
        "snapshot_id": PropertySchema(STRING, "A snapshot to make the volume from.",
                                      custom_constraint="cinder.snapshot"),
        "backup_id": PropertySchema(STRING, "A backup to make the volume from; a new one "
                                    "is restored onto the volume.", update_allowed=True,
                                    custom_constraint="cinder.backup"),
        "name": PropertySchema(STRING, "The volume's name.", update_allowed=True),
        "description": PropertySchema(STRING, "The volume's description.",
                                      update_allowed=True),
        "volume_type": PropertySchema(STRING, "The volume type (a backend); a new one "
                                      "retypes the volume.", update_allowed=True,
                                      custom_constraint="cinder.vtype"),
        "metadata": PropertySchema(MAP, "Key/value pairs on the volume.", default={},
                                   update_allowed=True),
        "imageRef": PropertySchema(STRING, "Deprecated: use image. An image id."),
        "image": PropertySchema(STRING, "The name or id of an image to make the volume "
                                "from.", custom_constraint="glance.image"),
        "source_volid": PropertySchema(STRING, "A volume to copy.",
                                       custom_constraint="cinder.volume"),
        "scheduler_hints": PropertySchema(MAP, "Hints for Cinder's scheduler."),
        "read_only": PropertySchema(BOOLEAN, "Whether the volume is attached read-only.",
                                    update_allowed=True),
        "multiattach": PropertySchema(BOOLEAN, "Whether the volume may be attached to more "
                                      "than one server.", default=False),
    },
    attributes=frozenset({
        "availability_zone", "size", "snapshot_id", "display_name", "display_description",
        "volume_type", "metadata", "metadata_values", "source_volid", "status", "created_at",
        "bootable", "encrypted", "attachments", "attachments_list", "multiattach", "show"}),
)


def check_sources(props: Mapping[str, Any]) -> None:
    """Heat's rules on what a volume is made from (Heat checks them when it validates)."""
    if props.get("image") and props.get("imageRef"):
        raise ResourceFailure("Cannot define the following properties at the same time: "
                              "image, imageRef")
    if props.get("backup_id"):
        return
    given = [k for k in ("snapshot_id", "source_volid", "image", "imageRef") if props.get(k)]
    sized = [k for k in given if k in ("snapshot_id", "source_volid")]
    if props.get("size") is None and (len(sized) != 1 or len(given) != 1):
        raise ResourceFailure('If neither "backup_id" nor "size" is provided, one and only one '
                              'of "source_volid", "snapshot_id" must be specified, but '
                              f"currently specified options: {given}.")
    if props.get("size") is not None and len(given) > 1:
        raise ResourceFailure('If "size" is provided, only one of "image", "imageRef", '
                              '"source_volid", "snapshot_id" can be specified, but currently '
                              f"specified options: {given}.")


def user_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The volume's metadata as the template sees it: the engine's key left out."""
    return {k: v for k, v in (metadata or {}).items() if k != OWNER_KEY}


def last_message(conn: Any, volume_id: str) -> str:
    """Cinder's latest user message about ``volume_id`` (why it went to error), or ''."""
    try:
        with translated(f"reading Cinder's messages about volume {volume_id}"):
            found = [m for m in cinder_message.Message.list(
                conn.block_storage, microversion=MESSAGES_VERSION, resource_uuid=volume_id)
                if m.resource_uuid == volume_id]
    except (Absent, RetryLater, ResourceFailure):
        return ""  # a cloud without user messages: the status is all there is to say
    found.sort(key=lambda m: str(m.created_at or ""))
    return str(found[-1].user_message) if found else ""


class Volume(OpenStackResource):
    noun = "volume"
    poll_delay = 2.0
    schema: ClassVar[TypeSchema] = SCHEMA

    # -- what the base asks for ----------------------------------------------------------------
    def find(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any | None:
        # Filtered by Cinder, and again here: a cloud that ignores the filter must not make
        # someone else's volume ours.
        wanted = json.dumps({OWNER_KEY: ctx.owner})
        for volume in conn.block_storage.volumes(properties=wanted):
            if (volume.metadata or {}).get(OWNER_KEY) == ctx.owner and \
                    volume.status not in ("deleting", "error_deleting"):
                return volume
        return None

    def make(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any:
        check_sources(props)
        metadata = {str(k): str(v) for k, v in (props.get("metadata") or {}).items()}
        body: dict[str, Any] = {"name": props.get("name") or physical_name(ctx),
                                "metadata": {**metadata, OWNER_KEY: ctx.owner}}
        for key in ("size", "description", "availability_zone", "volume_type", "snapshot_id"):
            if props.get(key) is not None:
                body[key] = props[key]
        if props.get("source_volid"):
            body["source_volume_id"] = props["source_volid"]
        if props.get("image"):
            image = conn.image.find_image(props["image"])
            if image is None:
                raise ResourceFailure(f"creating volume: image {props['image']} not found")
            body["image_id"] = image.id
        elif props.get("imageRef"):
            body["image_id"] = props["imageRef"]
        if props.get("scheduler_hints"):
            body["scheduler_hints"] = dict(props["scheduler_hints"])
        if props.get("multiattach"):
            body["is_multiattach"] = True
        if props.get("backup_id") and props.get("size") is None:
            body["size"] = conn.block_storage.get_backup(props["backup_id"]).size
        return conn.block_storage.create_volume(**body)

    def fetch(self, conn: Any, physical_id: str) -> Any:
        return conn.block_storage.get_volume(physical_id)

    def remove(self, conn: Any, physical_id: str) -> None:
        # Cinder refuses a plain delete of a volume whose delete failed (error_deleting):
        # only a force delete (an administrator's) asks for it again.
        force = conn.block_storage.get_volume(physical_id).status == "error_deleting"
        conn.block_storage.delete_volume(physical_id, ignore_missing=False, force=force)

    def state(self, obj: Any) -> State:
        status = str(obj.status or "").lower()
        if status in ("available", "in-use"):
            return State(READY)
        if status.startswith("error"):
            return State(FAILED, status)
        return State(BUILDING)  # creating, downloading, restoring-backup, extending...

    def attributes(self, conn: Any, obj: Any, props: Mapping[str, Any]) -> dict[str, Any]:
        # Heat's attribute types: strings where Heat's schema says string.
        metadata = user_metadata(obj.metadata)
        attachments = [dict(a) for a in (obj.attachments or [])]
        bootable = obj.is_bootable

        def text(value: Any) -> str | None:
            return None if value is None else str(value)

        return {
            "availability_zone": obj.availability_zone, "size": text(obj.size),
            "snapshot_id": obj.snapshot_id, "display_name": obj.name,
            "display_description": obj.description, "volume_type": obj.volume_type,
            "metadata": json.dumps(metadata), "metadata_values": metadata,
            "source_volid": obj.source_volume_id, "status": obj.status,
            "created_at": obj.created_at,
            "bootable": None if bootable is None else str(bool(bootable)).lower(),
            "encrypted": text(obj.is_encrypted), "attachments": json.dumps(attachments),
            "attachments_list": attachments, "multiattach": obj.is_multiattach,
            "show": obj.to_dict(computed=False)}

    # -- the plugin port -----------------------------------------------------------------------
    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        conn = self.connection(ctx)
        try:
            with translated(f"creating volume {ctx.resource_name}"):
                volume = self.find(conn, ctx, props)
                if volume is None:
                    ctx.check_lease()
                    volume = self.make(conn, ctx, props)
        except Absent as exc:  # a backup, snapshot or image named that is not there
            raise ResourceFailure(str(exc)) from None
        steps = ([RESTORE] if props.get("backup_id") else []) + \
            ([READ_ONLY] if props.get("read_only") is not None else [])
        return self.advance(conn, ctx, str(volume.id), props, steps, volume)

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        if physical_id is None:
            return self.create(ctx, new)
        conn = self.connection(ctx)
        try:
            with translated(f"updating volume {physical_id}"):
                volume = self.fetch(conn, physical_id)
                steps = self.change_now(conn, ctx, volume, old, new)
        except Absent:
            raise ResourceFailure(f"volume {physical_id} no longer exists") from None
        return self.advance(conn, ctx, physical_id, new, steps)

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
        if action == "DELETE" and state.get("phase") == cinder_backup.PHASE and physical_id:
            return cinder_backup.backing_up(self, ctx, self.connection(ctx), physical_id,
                                            props, state)
        if action == "DELETE" or physical_id is None:
            return super().poll(ctx, action, physical_id, props, state)
        return self.advance(self.connection(ctx), ctx, physical_id, props,
                            list(state.get("steps", [])))

    def snapshot_delete(self, ctx: PluginContext, physical_id: str | None,
                        props: Mapping[str, Any]) -> Progress:
        conn = self.connection(ctx)
        if physical_id is None:
            with translated(f"looking for volume {ctx.resource_name}"):
                found = self.find(conn, ctx, props)
            if found is None:
                return Progress.finished(None)
            physical_id = str(found.id)
        return cinder_backup.backing_up(self, ctx, conn, physical_id, props, {})

    # -- steps -----------------------------------------------------------------------------------
    def change_now(self, conn: Any, ctx: PluginContext, volume: Any, old: Mapping[str, Any],
                   new: Mapping[str, Any]) -> list[str]:
        """Make the changes Cinder makes at once; answer the steps that wait for the volume."""
        size = new.get("size")
        if size is not None and int(size) < int(volume.size):
            raise ResourceFailure(f"Shrinking volume is not supported: volume {volume.id} is "
                                  f"{volume.size} GB and cannot become {size} GB")
        if (new.get("name"), new.get("description")) != (old.get("name"),
                                                          old.get("description")):
            ctx.check_lease()
            conn.block_storage.update_volume(volume.id,
                                             name=new.get("name") or physical_name(ctx),
                                             description=new.get("description"))
        if new.get("metadata") != old.get("metadata"):
            kept = {k: v for k, v in (volume.metadata or {}).items()
                    if k in (OWNER_KEY, READ_ONLY_KEY)}
            wanted = {str(k): str(v) for k, v in (new.get("metadata") or {}).items()}
            ctx.check_lease()
            volume.replace_metadata(conn.block_storage, metadata={**wanted, **kept})
        kind = new.get("volume_type")
        if kind and kind != old.get("volume_type") and \
                kind not in (volume.volume_type, getattr(volume, "volume_type_id", None)):
            ctx.check_lease()
            conn.block_storage.retype_volume(volume, kind, "never")  # as Heat: no migration
        steps = []
        if new.get("backup_id") and new.get("backup_id") != old.get("backup_id"):
            steps.append(RESTORE)
        if size is not None and int(size) > int(volume.size):
            steps.append(EXTEND)
        if new.get("read_only") != old.get("read_only"):
            steps.append(READ_ONLY)
        return steps

    def advance(self, conn: Any, ctx: PluginContext, physical_id: str,
                props: Mapping[str, Any], steps: list[str], volume: Any = None) -> Progress:
        """Take the next steps as far as the volume lets: pending while it is busy, finished
        with its attributes when no step is left, failed when it went to error."""
        while True:
            if volume is None:
                try:
                    with translated(f"reading volume {physical_id}"):
                        volume = self.fetch(conn, physical_id)
                except Absent:
                    raise ResourceFailure(f"volume {physical_id} vanished while it was being "
                                          "made") from None
            found = self.state(volume)
            if found.phase == FAILED:
                why = last_message(conn, physical_id)
                raise ResourceFailure(f"volume {physical_id} went to {found.message}"
                                      + (f": {why}" if why else ""), physical_id=physical_id)
            size = props.get("size")
            growing = size is not None and int(volume.size) < int(size) and EXTEND not in steps
            if found.phase == BUILDING or growing:
                return Progress.pending(self.poll_delay, {"steps": steps}, physical_id)
            if not steps:
                with translated(f"reading volume {physical_id}"):
                    return Progress.finished(physical_id, self.attributes(conn, volume, props))
            step, steps = steps[0], steps[1:]
            try:
                with translated(f"volume {physical_id}: {step.replace('_', ' ')}"):
                    ctx.check_lease()
                    waits = self.take(conn, volume, step, props)
            except Absent as exc:
                raise ResourceFailure(str(exc), physical_id=physical_id) from None
            volume = None  # what the step changed is read again
            if waits:
                return Progress.pending(self.poll_delay, {"steps": steps}, physical_id)

    def take(self, conn: Any, volume: Any, step: str, props: Mapping[str, Any]) -> bool:
        """Take one step on ``volume`` (available); whether the volume is busy after it."""
        if step == RESTORE:
            conn.block_storage.restore_backup(props["backup_id"], volume=volume.id)
            return True
        if step == EXTEND:
            size = props.get("size")
            # A step taken before an interruption is not taken twice: Cinder refuses an
            # extension to the size a volume already has.
            if size is not None and int(size) > int(volume.size):
                conn.block_storage.extend_volume(volume, int(size))
                return True
            return False
        if step == READ_ONLY and props.get("read_only") is not None:
            conn.block_storage.set_volume_readonly(volume, bool(props["read_only"]))
        return False
