"""``OS::Cinder::VolumeAttachment``: a Cinder volume attached to a Nova server, through Nova's
``os-volume_attachments``.

Callers: the registry (entry point ``OS::Cinder::VolumeAttachment``); the engine's steps call
it through the plugin port. As in Heat, every property updates in place: an update detaches
the volume from the old server and attaches the (new) volume to the (new) server, one step
after the other, the step kept in the pending progress's state. The physical id is Heat's,
the id Nova gives the attachment (the volume's id). An attach is done when Cinder shows the
volume ``in-use`` on that server, a detach when the volume no longer shows the server (or is
gone); both are polled, never waited for. A create finds an attachment of that volume to that
server already there (made by an attempt cut short) and adopts it rather than attaching twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from openstack.compute.v2 import server as nova_server

from convergence.plugins.base import (
    CREATE,
    DELETE,
    Observation,
    PluginContext,
    Progress,
    ResourceFailure,
)
from convergence.plugins.openstack.errors import Absent, translated
from convergence.plugins.openstack.resource import OpenStackResource
from convergence.template.properties import STRING, PropertySchema, TypeSchema

ATTACH, DETACH = "attach", "detach"  # the pending state's phases
WAITING = ("available", "attaching", "reserved")  # the volume on its way to in-use


def _server_of(attachment: Mapping[str, Any]) -> str | None:
    found = attachment.get("server_id") or attachment.get("instance_uuid")
    return None if found is None else str(found)


class VolumeAttachment(OpenStackResource):
    noun = "volume attachment"
    poll_delay = 1.0
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Cinder::VolumeAttachment",
        description="A Cinder volume attached to a Nova server.",
        properties={
            "instance_uuid": PropertySchema(STRING, "The server to attach the volume to.",
                                            required=True, update_allowed=True),
            "volume_id": PropertySchema(STRING, "The volume to attach.", required=True,
                                        update_allowed=True, custom_constraint="cinder.volume"),
            "mountpoint": PropertySchema(STRING, "Where the volume shows on the server (a "
                                         "hint: /dev/disk/by-id/virtio-<volume id> is "
                                         "reliable).", update_allowed=True),
        },
        attributes=frozenset({"show"}),
    )

    # -- cloud calls -----------------------------------------------------------------------------
    def attachment(self, conn: Any, server_id: str, volume_id: str) -> Any | None:
        """Nova's attachment of the volume to the server; None when there is none (or no
        such server)."""
        try:
            with translated(f"reading the attachments of server {server_id}"):
                return conn.compute.get_volume_attachment(server_id, volume_id)
        except Absent:
            return None

    def volume(self, conn: Any, volume_id: str) -> Any | None:
        try:
            with translated(f"reading volume {volume_id}"):
                return conn.block_storage.get_volume(volume_id)
        except Absent:
            return None

    def attach(self, ctx: PluginContext, conn: Any, props: Mapping[str, Any]) -> Progress:
        server_id, volume_id = str(props["instance_uuid"]), str(props["volume_id"])
        found = self.attachment(conn, server_id, volume_id)
        if found is None:
            try:
                with translated(f"attaching volume {volume_id} to server {server_id}"):
                    ctx.check_lease()
                    found = conn.compute.create_volume_attachment(
                        server_id, volume=volume_id, device=props.get("mountpoint") or None)
            except Absent as exc:
                raise ResourceFailure(f"server {server_id} or volume {volume_id} not found: "
                                      f"{exc}") from None
        return self.attaching(conn, str(found.id or volume_id), props)

    def attaching(self, conn: Any, physical_id: str, props: Mapping[str, Any]) -> Progress:
        """Done when the volume is in-use on the server."""
        server_id, volume_id = str(props["instance_uuid"]), str(props["volume_id"])
        volume = self.volume(conn, volume_id)
        if volume is None:
            raise ResourceFailure(f"volume {volume_id} vanished while it was being attached")
        status = str(volume.status or "").lower()
        on_server = any(_server_of(a) == server_id for a in volume.attachments or [])
        if status == "in-use" and on_server:
            found = self.attachment(conn, server_id, volume_id)
            show = found.to_dict(computed=False) if found is not None else {}
            return Progress.finished(physical_id, {"show": show})
        if status in WAITING or status == "in-use":
            if status == "available" and self.attachment(conn, server_id, volume_id) is None:
                # Nova reserves the volume before it answers: an available volume Nova knows
                # no attachment of means Nova rolled the attach back.
                raise ResourceFailure(f"attaching volume {volume_id} to server {server_id} "
                                      "failed: the volume is available and not attached")
            return Progress.pending(self.poll_delay, {"phase": ATTACH}, physical_id)
        raise ResourceFailure(f"attaching volume {volume_id} to server {server_id} failed: "
                              f"the volume is {status}")

    def detach(self, ctx: PluginContext, conn: Any, server_id: str, volume_id: str) -> bool:
        """Ask Nova to detach the volume, unless it is not attached or already detaching;
        whether the volume is detached already."""
        volume = self.volume(conn, volume_id)
        if volume is None:
            return True
        if str(volume.status or "").lower() == "detaching":
            return False
        if self.attachment(conn, server_id, volume_id) is None:
            return True
        try:
            with translated(f"detaching volume {volume_id} from server {server_id}"):
                ctx.check_lease()
                conn.compute.delete_volume_attachment(nova_server.Server(id=server_id),
                                                      volume_id, ignore_missing=False)
        except Absent:
            return True  # detached meanwhile, or the server is gone with its attachments
        return False

    def detached(self, conn: Any, server_id: str, volume_id: str) -> bool:
        """Whether the volume no longer shows the server (or is gone)."""
        volume = self.volume(conn, volume_id)
        if volume is None:
            return True
        status = str(volume.status or "").lower()
        if status.startswith("error"):
            raise ResourceFailure(f"detaching volume {volume_id} from server {server_id} "
                                  f"failed: the volume is {status}")
        return status != "detaching" and \
            not any(_server_of(a) == server_id for a in volume.attachments or [])

    # -- the plugin port -----------------------------------------------------------------------
    def observe(self, ctx: PluginContext, physical_id: str,
                props: Mapping[str, Any]) -> Observation | None:
        """Attached is the volume showing the server; a server gone (its attachments with
        it) or a volume detached behind the engine's back is missing."""
        conn = self.connection(ctx)
        server_id, volume_id = str(props["instance_uuid"]), str(props["volume_id"])
        with translated(f"reading volume {volume_id}"):
            volume = self.volume(conn, volume_id)
        if volume is None:
            return Observation.missing(f"volume {volume_id} not found in the cloud")
        if not any(_server_of(a) == server_id for a in volume.attachments or []):
            return Observation.missing(f"volume {volume_id} is not attached to server "
                                       f"{server_id}")
        return Observation.fine()

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        return self.attach(ctx, self.connection(ctx), props)

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        conn = self.connection(ctx)
        if physical_id is None:
            return self.attach(ctx, conn, new)
        server_id, volume_id = str(old["instance_uuid"]), str(old["volume_id"])
        self.detach(ctx, conn, server_id, volume_id)
        return self.after_detach(ctx, conn, physical_id, new, server_id, volume_id)

    def after_detach(self, ctx: PluginContext, conn: Any, physical_id: str,
                     props: Mapping[str, Any], server_id: str, volume_id: str) -> Progress:
        """An update's second step, once the old attachment is gone: the new one."""
        if not self.detached(conn, server_id, volume_id):
            return Progress.pending(self.poll_delay, {"phase": DETACH, "server": server_id,
                                                      "volume": volume_id}, physical_id)
        return self.attach(ctx, conn, props)

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
        conn = self.connection(ctx)
        if action == DELETE:
            if physical_id is None or \
                    self.detached(conn, str(props["instance_uuid"]), str(props["volume_id"])):
                return Progress.finished(physical_id)
            return Progress.pending(self.delete_delay, {"phase": DETACH}, physical_id)
        if physical_id is None:
            return self.attach(ctx, conn, props)
        if state.get("phase") == DETACH and action != CREATE:
            return self.after_detach(ctx, conn, physical_id, props, str(state["server"]),
                                     str(state["volume"]))
        return self.attaching(conn, physical_id, props)

    def delete(self, ctx: PluginContext, physical_id: str | None,
               props: Mapping[str, Any]) -> Progress:
        conn = self.connection(ctx)
        server_id, volume_id = str(props["instance_uuid"]), str(props["volume_id"])
        if physical_id is None:
            found = self.attachment(conn, server_id, volume_id)
            if found is None:
                return Progress.finished(None)
            physical_id = str(found.id or volume_id)
        if self.detach(ctx, conn, server_id, volume_id) or \
                self.detached(conn, server_id, volume_id):
            return Progress.finished(physical_id)
        return Progress.pending(self.delete_delay, {"phase": DETACH}, physical_id)

    def discard(self, ctx: PluginContext, physical_id: str) -> None:
        """An orphan attachment names its volume only (the server is in no record): Cinder
        says which server it is on. A volume attached to several servers is left alone, as
        nothing says which of its attachments is the orphan."""
        conn = self.connection(ctx)
        volume = self.volume(conn, physical_id)
        servers = {_server_of(a) for a in (volume.attachments or [])} if volume else set()
        if len(servers) == 1 and None not in servers:
            self.detach(ctx, conn, str(servers.pop()), physical_id)
