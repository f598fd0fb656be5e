"""``OS::Nova::Flavor`` and ``OS::Nova::ServerGroup``: a Nova flavor (admin only, as Nova's
default policy has it) and a Nova server group.

Callers: the registry (entry points ``OS::Nova::Flavor`` and ``OS::Nova::ServerGroup``); the
engine's steps call them through the plugin port. Properties and attributes are Heat's
(``heat/engine/resources/openstack/nova/flavor.py`` and ``server_group.py``), with the flavor's
``description`` (Nova API 2.55) and the group's ``policy`` and ``rules`` (2.64) besides. A
flavor updates its extra specs, the projects a private flavor is shared with, and its
description in place; a change of anything else makes a new flavor. Nothing of a server group
updates in place.

Neither object takes tags or metadata. What finds again an object an interrupted create made
is its name: when the template names none, the name is derived from the record
(:func:`~convergence.plugins.openstack.names.physical_name`), and only such a name is searched
for; a name the template gives may be someone else's object, which is never taken over (a
flavor's name is unique, and Nova's 409 fails the resource). A flavor's extra specs and
access are set after the flavor is made, and set again on an adopted one, so a create cut
short between the two calls ends with both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from openstack import exceptions as sdk_exceptions

from convergence.plugins.base import PluginContext, Progress, ResourceFailure
from convergence.plugins.openstack.errors import translated
from convergence.plugins.openstack.names import physical_name
from convergence.plugins.openstack.resource import OpenStackResource
from convergence.template.properties import (
    BOOLEAN,
    INTEGER,
    LIST,
    MAP,
    NUMBER,
    STRING,
    PropertySchema,
    TypeSchema,
)

POLICIES = ("anti-affinity", "affinity", "soft-anti-affinity", "soft-affinity")


def _refused(doing: str, exc: sdk_exceptions.HttpException) -> ResourceFailure:
    """A 409 that waiting would not cure (a name taken): the resource fails, with Nova's
    words."""
    return ResourceFailure(f"{doing}: {exc.details or exc.message}")


class Flavor(OpenStackResource):
    noun = "flavor"
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Nova::Flavor",
        description="A Nova flavor: the virtual hardware of servers.",
        properties={
            "tenants": PropertySchema(LIST, "The projects a private flavor is shared with.",
                                      default=[], update_allowed=True,
                                      item=PropertySchema(STRING,
                                                          custom_constraint="keystone.project")),
            "flavorid": PropertySchema(STRING, "The flavor's id (Nova makes a UUID without)."),
            "name": PropertySchema(STRING, "The flavor's name (one is derived from the stack "
                                   "without)."),
            "ram": PropertySchema(INTEGER, "Memory in MB.", required=True),
            "vcpus": PropertySchema(INTEGER, "Number of virtual CPUs.", required=True),
            "disk": PropertySchema(INTEGER, "Root disk size in GB (0: the image's size).",
                                   default=0),
            "swap": PropertySchema(INTEGER, "Swap space in MB.", default=0),
            "ephemeral": PropertySchema(INTEGER, "Ephemeral disk size in GB.", default=0),
            "rxtx_factor": PropertySchema(NUMBER, "RX/TX factor.", default=1.0),
            "extra_specs": PropertySchema(MAP, "Key/value pairs extending the flavor.",
                                          update_allowed=True),
            "is_public": PropertySchema(BOOLEAN, "Whether every project may use the flavor.",
                                        default=True),
            "description": PropertySchema(STRING, "The flavor's description (Nova API 2.55).",
                                          update_allowed=True),
        },
        attributes=frozenset({"is_public", "extra_specs", "name", "show"}),
    )

    def name_of(self, ctx: PluginContext, props: Mapping[str, Any]) -> str:
        return str(props.get("name") or physical_name(ctx))

    def find(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any | None:
        if props.get("name"):
            return None  # the template's own name may be another's flavor
        name = self.name_of(ctx, props)
        return next((f for f in conn.compute.flavors() if f.name == name), None)

    def make(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any:
        body: dict[str, Any] = {
            "name": self.name_of(ctx, props), "ram": props["ram"], "vcpus": props["vcpus"],
            "disk": props["disk"], "swap": props["swap"], "ephemeral": props["ephemeral"],
            "rxtx_factor": props["rxtx_factor"], "is_public": props["is_public"]}
        if props.get("flavorid"):
            body["id"] = props["flavorid"]
        if props.get("description") is not None:
            body["description"] = props["description"]
        try:
            return conn.compute.create_flavor(**body)
        except sdk_exceptions.ConflictException as exc:
            raise _refused(f"creating flavor {body['name']}", exc) from None

    def fetch(self, conn: Any, physical_id: str) -> Any:
        return conn.compute.get_flavor(physical_id, get_extra_specs=True)

    def remove(self, conn: Any, physical_id: str) -> None:
        conn.compute.delete_flavor(physical_id, ignore_missing=False)

    def attributes(self, conn: Any, obj: Any, props: Mapping[str, Any]) -> dict[str, Any]:
        return {"is_public": obj.is_public, "extra_specs": dict(obj.extra_specs or {}),
                "name": obj.name, "show": obj.to_dict(computed=False)}

    # -- what is set after the flavor is made ----------------------------------------------------
    def set_specs(self, conn: Any, flavor_id: str, old: Mapping[str, Any] | None,
                  new: Mapping[str, Any] | None) -> None:
        """Make the flavor's extra specs ``new``: those of ``old`` not in ``new`` unset."""
        current = dict(conn.compute.fetch_flavor_extra_specs(flavor_id).extra_specs or {})
        wanted = {str(k): str(v) for k, v in (new or {}).items()}
        for key in set(old or {}) - set(wanted):
            if key in current:
                conn.compute.delete_flavor_extra_specs_property(flavor_id, key,
                                                                ignore_missing=True)
        changed = {k: v for k, v in wanted.items() if current.get(k) != v}
        if changed:
            conn.compute.create_flavor_extra_specs(flavor_id, changed)

    def set_access(self, conn: Any, flavor_id: str, props: Mapping[str, Any]) -> None:
        """Share a private flavor with the projects named (the stack's own without any, as
        Heat does), and with no other."""
        if props.get("is_public", True):
            return
        wanted = set(props.get("tenants") or [conn.current_project_id])
        current = {str(a["tenant_id"]) for a in conn.compute.get_flavor_access(flavor_id)}
        for project in sorted(current - wanted):
            conn.compute.flavor_remove_tenant_access(flavor_id, project)
        for project in sorted(wanted - current):
            try:
                conn.compute.flavor_add_tenant_access(flavor_id, project)
            except sdk_exceptions.ConflictException:
                continue  # shared meanwhile: what was wanted

    # -- the plugin port -----------------------------------------------------------------------
    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        conn = self.connection(ctx)
        with translated(f"creating flavor {ctx.resource_name}"):
            flavor = self.find(conn, ctx, props)
            if flavor is None:
                ctx.check_lease()
                flavor = self.make(conn, ctx, props)
            flavor_id = str(flavor.id)
            ctx.check_lease()
            self.set_specs(conn, flavor_id, None, props.get("extra_specs"))
            self.set_access(conn, flavor_id, props)
            return Progress.finished(flavor_id,
                                     self.attributes(conn, self.fetch(conn, flavor_id), props))

    def change(self, conn: Any, ctx: PluginContext, physical_id: str,
               old: Mapping[str, Any], new: Mapping[str, Any]) -> Any:
        if new.get("extra_specs") != old.get("extra_specs"):
            self.set_specs(conn, physical_id, old.get("extra_specs"), new.get("extra_specs"))
        if new.get("tenants") != old.get("tenants"):
            self.set_access(conn, physical_id, new)
        if new.get("description") != old.get("description"):
            conn.compute.update_flavor(physical_id, description=new.get("description"))
        return self.fetch(conn, physical_id)


class ServerGroup(OpenStackResource):
    noun = "server group"
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Nova::ServerGroup",
        description="A Nova server group: where its servers go, together or apart.",
        properties={
            "name": PropertySchema(STRING, "The group's name (one is derived from the stack "
                                   "without)."),
            "policies": PropertySchema(LIST, "The group's policy, as a list of one (Heat's "
                                       "form).", default=["anti-affinity"],
                                       item=PropertySchema(STRING, allowed_values=POLICIES)),
            "policy": PropertySchema(STRING, "The group's policy (Nova API 2.64's form; "
                                     "over policies when given).", allowed_values=POLICIES),
            "rules": PropertySchema(MAP, "Rules of the policy, such as max_server_per_host "
                                    "(Nova API 2.64)."),
        },
        attributes=frozenset({"show"}),
    )

    def find(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any | None:
        if props.get("name"):
            return None  # names are not unique in Nova: the template's may be another's
        name = physical_name(ctx)
        return next((g for g in conn.compute.server_groups() if g.name == name), None)

    def make(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any:
        body: dict[str, Any] = {"name": props.get("name") or physical_name(ctx)}
        if props.get("policy"):
            body["policy"] = props["policy"]
        else:
            body["policies"] = list(props.get("policies") or ["anti-affinity"])
        if props.get("rules"):
            body["rules"] = dict(props["rules"])
        try:
            return conn.compute.create_server_group(**body)
        except sdk_exceptions.NotSupported as exc:
            # The SDK refuses rules a cloud older than 2.64 cannot take: no retry cures it.
            raise ResourceFailure(f"creating server group {body['name']}: {exc}") from None

    def fetch(self, conn: Any, physical_id: str) -> Any:
        return conn.compute.get_server_group(physical_id)

    def remove(self, conn: Any, physical_id: str) -> None:
        conn.compute.delete_server_group(physical_id, ignore_missing=False)
