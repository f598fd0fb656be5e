"""``OS::Nova::Server``: a Nova server, made, updated in place or replaced, snapshotted and deleted.

Callers: the registry (entry point ``OS::Nova::Server``); the engine's steps call it through
the plugin port. The schema is Heat's (``nova_server_schema``); the boot request is built by
``nova_server_boot``, the networks by ``nova_server_networks``, an update's tasks by
``nova_server_update`` and the attributes by ``nova_server_attributes``. This module ties them
to the base of every OpenStack type (``resource.OpenStackResource``):

- create: the record's key rides on the server as a Nova tag (``nova_server_tags``), so an
  interrupted create finds its server again (one that went to ERROR is deleted and made anew:
  the record's new attempt must not adopt a failure). A port the template names that an older
  version of this resource still holds (a replacement boots before the version it replaces
  is deleted) is detached from it first, and the boot waits, polled, until it is free.
  BUILD is building, ACTIVE ready, ERROR failed with the server's fault message.
- update: what Heat updates in place is updated in place; ``flavor_update_policy``,
  ``image_update_policy`` and ``user_data_update_policy`` of ``REPLACE`` make
  :meth:`Server.needs_replace` ask for a replacement. The tasks that take time (resize and
  confirm, rebuild, interface detach and attach) go on in the poll, their stage in the
  operation's state.
- delete: done when Nova answers 404; then the ports the server made are deleted.
  ``deletion_policy: Snapshot`` takes an image of the server (named after it) and waits for
  Glance to show it active before deleting the server; the image is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from convergence.plugins.base import (
    CREATE,
    DELETE,
    UPDATE,
    BackendFactory,
    PluginContext,
    Progress,
    ResourceFailure,
)
from convergence.plugins.openstack.errors import Absent, translated
from convergence.plugins.openstack.lookups import cached
from convergence.plugins.openstack.nova_server_attributes import attributes
from convergence.plugins.openstack.nova_server_boot import boot_request
from convergence.plugins.openstack.nova_server_networks import free_ports, remove_owned_ports
from convergence.plugins.openstack.nova_server_schema import REPLACE, SCHEMA
from convergence.plugins.openstack.nova_server_update import apply_now, drive, plan
from convergence.plugins.openstack.resource import (
    BUILDING,
    FAILED,
    READY,
    OpenStackResource,
    State,
    owner_tag,
)
from convergence.plugins.software_port import software_backend
from convergence.template.properties import TypeSchema

FREEING, UPDATING, SNAPSHOT = "freeing ports", "updating", "snapshot"
GONE = ("DELETED", "SOFT_DELETED")
FREE_DELAY = 1.0  # how long until a port asked off an older version is looked at again
BROKEN_IMAGE = ("killed", "deleted", "pending_delete", "deactivated", "error")


def _fault(server: Any) -> str:
    fault = getattr(server, "fault", None)
    return str(fault.get("message") or "") if isinstance(fault, dict) else ""


class Server(OpenStackResource):
    noun = "server"
    poll_delay = 2.0
    delete_delay = 1.0
    schema: ClassVar[TypeSchema] = SCHEMA
    # The engine's software configuration: a SOFTWARE_CONFIG server's agent polls its URL.
    backends: ClassVar[Mapping[str, BackendFactory]] = {
        **OpenStackResource.backends, "software": software_backend}

    # -- what the base asks of a type ----------------------------------------------------------
    def find(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any | None:
        tag = owner_tag(ctx)
        found = [s for s in conn.compute.servers(tags=tag) if tag in (s.tags or [])]
        usable = next((s for s in found if s.status not in ("ERROR", *GONE)
                       and s.task_state != "deleting"), None)
        for failed in (s for s in found if s.status == "ERROR"):
            # An earlier attempt of this record that failed: a new attempt makes a new server.
            ctx.check_lease()
            conn.compute.delete_server(failed, ignore_missing=True)
        return usable

    def make(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any:
        return conn.compute.create_server(**boot_request(conn, ctx, props))

    def fetch(self, conn: Any, physical_id: str) -> Any:
        return conn.compute.get_server(physical_id)

    def remove(self, conn: Any, physical_id: str) -> None:
        conn.compute.delete_server(physical_id, ignore_missing=False)

    def state(self, obj: Any) -> State:
        status = str(obj.status or "BUILD").split("(")[0]
        if status == "ACTIVE":
            return State(READY)
        if status == "ERROR":
            return State(FAILED, _fault(obj))
        if status in (*GONE, "UNKNOWN"):
            return State(FAILED, f"the server's status is {status}")
        return State(BUILDING)

    def attributes(self, conn: Any, obj: Any, props: Mapping[str, Any]) -> dict[str, Any]:
        if obj.addresses is None or obj.status is None:  # the create answer: read it whole
            obj = self.fetch(conn, str(obj.id))
        return attributes(conn, obj)

    def change(self, conn: Any, ctx: PluginContext, physical_id: str,
               old: Mapping[str, Any], new: Mapping[str, Any]) -> Any:
        server = self.fetch(conn, physical_id)
        if server.status == "ERROR":
            raise ResourceFailure(f"server {physical_id} is in ERROR"
                                  + (f": {_fault(server)}" if _fault(server) else ""))
        apply_now(conn, ctx, server, old, new)
        return server

    def needs_replace(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        """Heat's rule: what cannot change in place, and the changes a policy of REPLACE (the
        new properties' policy, else the old's) sends to a new server; a change between
        booting from an image and booting from a volume is no rebuild either."""
        if super().needs_replace(old, new):
            return True

        def replaces(key: str, policy: str) -> bool:
            return old.get(key) != new.get(key) and \
                (new.get(policy) or old.get(policy)) == REPLACE

        if replaces("flavor", "flavor_update_policy") or \
                replaces("image", "image_update_policy") or \
                replaces("user_data", "user_data_update_policy"):
            return True
        return bool(old.get("image")) != bool(new.get("image"))

    # -- create: free the ports an older version holds, then boot ------------------------------
    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        return self._create(ctx, props, frozenset())

    def _create(self, ctx: PluginContext, props: Mapping[str, Any],
                asked: frozenset[str]) -> Progress:
        conn = self.connection(ctx)
        with translated(f"creating server {ctx.resource_name}"):
            # A record's first claim: no earlier attempt can have made a server to find.
            obj = None if ctx.first_attempt and not asked else self.find(conn, ctx, props)
            if obj is None:
                busy = free_ports(conn, ctx, props, asked)
                if busy:
                    return Progress.pending(FREE_DELAY, {"phase": FREEING,
                                                         "ports": sorted(asked | set(busy))})
                ctx.check_lease()
                obj = self.make(conn, ctx, props)
        return self.progress(conn, obj, props, CREATE)

    # -- update: the changes made at once, then the tasks, polled ------------------------------
    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        if physical_id is None:
            return self.create(ctx, new)
        conn = self.connection(ctx)
        try:
            with translated(f"updating server {physical_id}"):
                ctx.check_lease()
                server = self.change(conn, ctx, physical_id, old, new)
                tasks = plan(conn, ctx, server, old, new)
        except Absent:
            raise ResourceFailure(f"server {physical_id} no longer exists") from None
        return self._drive(ctx, physical_id, new, tasks)

    def _drive(self, ctx: PluginContext, physical_id: str, props: Mapping[str, Any],
               tasks: list[dict[str, Any]]) -> Progress:
        conn = self.connection(ctx)
        try:
            with translated(f"updating server {physical_id}"):
                left, delay = drive(conn, ctx, physical_id, props, tasks)
                if left:
                    return Progress.pending(delay, {"phase": UPDATING, "tasks": left},
                                            physical_id)
                found = attributes(conn, self.fetch(conn, physical_id))
        except Absent:
            raise ResourceFailure(f"server {physical_id} no longer exists") from None
        return Progress.finished(physical_id, found)

    def _building(self, ctx: PluginContext) -> frozenset[str]:
        """The ids of the project's servers in BUILD, listed at most once a poll interval per
        process (as plain JSON: no SDK objects to build for a status)."""
        conn = self.connection(ctx)

        def listing() -> frozenset[str]:
            ids: set[str] = set()
            with translated("listing the building servers"):
                page = conn.compute.get("/servers/detail",
                                        params={"status": "BUILD", "limit": 1000}).json()
                while True:
                    ids.update(str(s["id"]) for s in page.get("servers", []))
                    nxt = [link["href"] for link in page.get("servers_links", [])
                           if link.get("rel") == "next"]
                    if not nxt:
                        return frozenset(ids)
                    page = conn.compute.get(nxt[0]).json()

        return cached(conn, ("servers building",), listing, ttl=self.poll_delay)

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
        phase = state.get("phase")
        if action == CREATE and physical_id is None:
            return self._create(ctx, props, frozenset(state.get("ports") or ()))
        if action == UPDATE and phase == UPDATING and physical_id is not None:
            return self._drive(ctx, physical_id, props, list(state.get("tasks") or []))
        if action == DELETE and phase == SNAPSHOT and physical_id is not None:
            return self._snapshotting(ctx, physical_id, props, str(state["image"]))
        if action == CREATE and physical_id is not None and phase == BUILDING and \
                physical_id in self._building(ctx):
            # Still building, as one listing of the building servers says: a thousand
            # servers building at once are polled by a call a second, not a thousand.
            return Progress.pending(self.poll_delay, {"phase": BUILDING}, physical_id)
        progress = super().poll(ctx, action, physical_id, props, state)
        if action == DELETE and progress.done:
            self._remove_ports(ctx)
        return progress

    # -- delete: the server, then the ports it made --------------------------------------------
    def delete(self, ctx: PluginContext, physical_id: str | None,
               props: Mapping[str, Any]) -> Progress:
        progress = super().delete(ctx, physical_id, props)
        if progress.done:
            self._remove_ports(ctx)
        return progress

    def _remove_ports(self, ctx: PluginContext) -> None:
        conn = self.connection(ctx)
        with translated(f"deleting the ports of server {ctx.resource_name}"):
            remove_owned_ports(conn, ctx)

    def snapshot_delete(self, ctx: PluginContext, physical_id: str | None,
                        props: Mapping[str, Any]) -> Progress:
        """Heat's ``handle_snapshot_delete``: an image of the server (named after it), then
        the delete; a server in ERROR (or gone) has nothing worth an image and is deleted."""
        if physical_id is None:
            return self.delete(ctx, physical_id, props)
        conn = self.connection(ctx)
        try:
            with translated(f"taking a snapshot of server {physical_id}"):
                server = self.fetch(conn, physical_id)
                if server.status == "ERROR":
                    return self.delete(ctx, physical_id, props)
                image_id = self._snapshot(conn, ctx, server)
        except Absent:
            return self.delete(ctx, physical_id, props)
        return self._snapshotting(ctx, physical_id, props, image_id)

    @staticmethod
    def _snapshot(conn: Any, ctx: PluginContext, server: Any) -> str:
        """The image of ``server``: the one an interrupted attempt asked for, else a new one."""
        for image in conn.image.images(name=server.name):
            if getattr(image, "instance_uuid", None) == server.id:
                return str(image.id)
        ctx.check_lease()
        return str(server.create_image(conn.compute, server.name))

    def _snapshotting(self, ctx: PluginContext, physical_id: str, props: Mapping[str, Any],
                      image_id: str) -> Progress:
        conn = self.connection(ctx)
        try:
            with translated(f"reading the snapshot image {image_id}"):
                status = str(conn.image.get_image(image_id).status or "").lower()
        except Absent:
            raise ResourceFailure(f"the snapshot image {image_id} of server {physical_id} "
                                  f"vanished: the server is kept") from None
        if status == "active":
            return self.delete(ctx, physical_id, props)
        if status in BROKEN_IMAGE:
            raise ResourceFailure(f"the snapshot image {image_id} of server {physical_id} is "
                                  f"{status}: the server is kept")
        return Progress.pending(self.poll_delay, {"phase": SNAPSHOT, "image": image_id},
                                physical_id)
