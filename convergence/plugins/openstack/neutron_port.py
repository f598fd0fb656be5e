"""``OS::Neutron::Port``: a Neutron port, and the lookups the other Neutron types share.

Callers: the registry (entry point ``OS::Neutron::Port``); the engine's steps call it through
the plugin port. The router, floating IP and security group types
(``neutron_router``, ``neutron_floatingip``, ``neutron_secgroup``) use :func:`resolve` to turn
a name or an id into an id, and :func:`neutron_type` / :func:`refused` to read Neutron's error
type where the base's translation would mean the wrong thing.

The schema is Heat's: what updates in place (fixed IPs, security groups, address pairs, the
name, the admin state...) and what replaces (the network); ``replacement_policy:
REPLACE_ALWAYS`` replaces the port on any change, as Heat's deprecated option did. A port the
template names not is named as Heat names it (``convergence.plugins.openstack.names``). Security
groups are given by name or id and sent as ids; an update that drops them puts the port back in
the project's ``default`` group, and an update that drops ``fixed_ips`` leaves the addresses
Neutron gave, as Heat does. A port is ready as soon as it exists: ``DOWN`` until something binds
it is normal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

from openstack import exceptions as sdk_exceptions

from convergence.plugins.base import PluginContext, ResourceFailure
from convergence.plugins.openstack import implicit
from convergence.plugins.openstack.lookups import cached
from convergence.plugins.openstack.names import physical_name
from convergence.plugins.openstack.neutron_net import (
    TAGS,
    VALUE_SPECS,
    neutron_tags,
    tagged,
    with_tags,
)
from convergence.plugins.openstack.resource import OpenStackResource, owner_tag
from convergence.template.properties import (
    BOOLEAN,
    LIST,
    MAP,
    STRING,
    PropertySchema,
    TypeSchema,
)


def resolve(find: Callable[..., Any], what: str, ref: str) -> str:
    """The id of the object ``ref`` names (its name or its id), looked up with an SDK
    ``find_*`` call; a name nothing or several things carry fails the resource."""
    try:
        found = find(ref, ignore_missing=True)
    except sdk_exceptions.DuplicateResource:
        raise ResourceFailure(f"more than one {what} is named {ref!r}: give its id") from None
    except sdk_exceptions.NotFoundException:
        found = None  # a service without the extension answers the listing itself with 404
    if found is None:
        raise ResourceFailure(f"{what} {ref!r} not found")
    return str(found.id)


def neutron_type(exc: BaseException) -> str:
    """The ``type`` of Neutron's error body (``IpAddressAlreadyAllocated``...), or ''."""
    response = getattr(exc, "response", None)
    try:
        return str(response.json()["NeutronError"]["type"])  # type: ignore[union-attr]
    except (AttributeError, KeyError, TypeError, ValueError):
        return ""


def cloud_message(exc: BaseException) -> str:
    return str(getattr(exc, "details", None) or getattr(exc, "message", None) or exc)


@contextlib.contextmanager
def refused(doing: str, *types: str) -> Iterator[None]:
    """Neutron errors of these ``types`` fail the resource with the cloud's message, whatever
    their status: a 409 the base would retry although nothing will change (an address taken
    by another port), or a 404 about another object than the resource's own."""
    try:
        yield
    except sdk_exceptions.HttpException as exc:
        if neutron_type(exc) in types:
            raise ResourceFailure(f"{doing}: {cloud_message(exc)}") from exc
        raise


FIXED_IP = PropertySchema(MAP, schema={
    "subnet": PropertySchema(STRING, "The subnet (name or id) to take the address from.",
                             custom_constraint="neutron.subnet"),
    "subnet_id": PropertySchema(STRING, "Deprecated: use subnet.",
                                custom_constraint="neutron.subnet"),
    "ip_address": PropertySchema(STRING, "The address wanted in the subnet.",
                                 custom_constraint="ip_addr")})
ADDRESS_PAIR = PropertySchema(MAP, schema={
    "mac_address": PropertySchema(STRING, "A MAC address let through the port.",
                                  custom_constraint="mac_addr"),
    "ip_address": PropertySchema(STRING, "An address or CIDR let through the port.",
                                 required=True, custom_constraint="net_cidr")})
# Properties sent to Neutron under the same name, as they are.
PLAIN = ("name", "admin_state_up", "device_id", "device_owner", "mac_address",
         "port_security_enabled", "binding:vnic_type", "dns_name")
# Text properties a template dropped are cleared; the others are left as Neutron has them.
CLEARED = ("device_id", "device_owner", "dns_name")
# Properties a check reads back to see a port changed behind the engine's back: not its device
# (Nova binds the port to its server) nor its DNS name (Nova's DNS integration sets it).
OBSERVED = ("name", "admin_state_up", "port_security_enabled", "binding:vnic_type")
# The SDK's names of Neutron's fields, where they differ.
ATTRIBUTE = {"admin_state_up": "is_admin_state_up",
             "port_security_enabled": "is_port_security_enabled",
             "binding:vnic_type": "binding_vnic_type"}
# Neutron refuses these for good: retrying would never make the address or MAC free.
TAKEN = ("IpAddressAlreadyAllocated", "IpAddressInUse", "IpAddressGenerationFailure",
         "MacAddressInUse", "InvalidIpForSubnet", "SubnetNotFound", "NetworkNotFound",
         "SecurityGroupNotFound")


class Port(OpenStackResource):
    noun = "port"
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Neutron::Port",
        description="A Neutron port.",
        implicit=implicit.port,
        properties={
            "network": PropertySchema(STRING, "The network (name or id); another one replaces "
                                      "the port.", custom_constraint="neutron.network"),
            "network_id": PropertySchema(STRING, "Deprecated: use network.",
                                         custom_constraint="neutron.network"),
            "name": PropertySchema(STRING, "The port's name.", update_allowed=True),
            "fixed_ips": PropertySchema(LIST, "The addresses wanted.", update_allowed=True,
                                        item=FIXED_IP),
            "security_groups": PropertySchema(LIST, "Security groups (names or ids).",
                                              update_allowed=True,
                                              item=PropertySchema(STRING)),
            "mac_address": PropertySchema(STRING, "The MAC address to give the port.",
                                          update_allowed=True, custom_constraint="mac_addr"),
            "device_id": PropertySchema(STRING, "The device using the port.", default="",
                                        update_allowed=True),
            "device_owner": PropertySchema(STRING, "What owns the port (network:dhcp...).",
                                           default="", update_allowed=True),
            "allowed_address_pairs": PropertySchema(
                LIST, "Extra MAC/IP pairs the port lets through.", update_allowed=True,
                item=ADDRESS_PAIR),
            "admin_state_up": PropertySchema(BOOLEAN, "Whether the port is up.", default=True,
                                             update_allowed=True),
            "value_specs": VALUE_SPECS,
            "port_security_enabled": PropertySchema(
                BOOLEAN, "Whether packets are filtered (security groups, address pairs).",
                update_allowed=True),
            "binding:vnic_type": PropertySchema(
                STRING, "How the port is bound.", default="normal", update_allowed=True,
                allowed_values=("normal", "direct", "macvtap", "direct-physical",
                                "baremetal")),
            "qos_policy": PropertySchema(STRING, "A QoS policy's name or id.",
                                         update_allowed=True,
                                         custom_constraint="neutron.qos_policy"),
            "dns_name": PropertySchema(STRING, "The port's DNS name.", update_allowed=True,
                                       custom_constraint="dns_name"),
            "tags": TAGS,
            "replacement_policy": PropertySchema(
                STRING, "Deprecated: REPLACE_ALWAYS replaces the port on any change.",
                default="AUTO", update_allowed=True,
                allowed_values=("REPLACE_ALWAYS", "AUTO")),
        },
        attributes=frozenset({"admin_state_up", "device_id", "device_owner", "fixed_ips",
                              "mac_address", "name", "network_id", "security_groups",
                              "status", "tenant_id", "allowed_address_pairs", "subnets",
                              "port_security_enabled", "qos_policy_id", "dns_assignment",
                              "network", "show"}),
    )

    def needs_replace(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        if new.get("replacement_policy") == "REPLACE_ALWAYS" and dict(old) != dict(new):
            return True
        return super().needs_replace(old, new)

    # -- the request body ----------------------------------------------------------------------
    def _fields(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any],
                names: set[str], updating: bool) -> dict[str, Any]:
        """Neutron's body for the properties ``names``, references resolved to ids."""
        body: dict[str, Any] = dict(props.get("value_specs") or {}) \
            if "value_specs" in names else {}
        for key in PLAIN:
            if key not in names:
                continue
            if props.get(key) is not None:
                body[key] = props[key]
            elif updating and key in CLEARED:
                body[key] = ""
        if "name" in names and props.get("name") is None:
            body["name"] = physical_name(ctx)  # Heat's name for what the template names not
        if "fixed_ips" in names and props.get("fixed_ips"):
            # An empty list is left out: Neutron would free the addresses on an update and
            # give none on a create, where Heat lets Neutron choose and keeps what it chose.
            body["fixed_ips"] = [self._fixed_ip(conn, entry) for entry in props["fixed_ips"]]
        if "allowed_address_pairs" in names:
            body["allowed_address_pairs"] = [
                {k: v for k, v in pair.items() if v is not None}
                for pair in props.get("allowed_address_pairs") or []]
        if "security_groups" in names:
            groups = props.get("security_groups")
            if groups is not None:
                body["security_groups"] = [resolve(conn.network.find_security_group,
                                                   "security group", g) for g in groups]
            elif updating:
                body["security_groups"] = [resolve(conn.network.find_security_group,
                                                   "security group", "default")]
        if "qos_policy" in names:
            ref = props.get("qos_policy")
            if ref:
                body["qos_policy_id"] = resolve(conn.network.find_qos_policy, "QoS policy", ref)
            elif updating:
                body["qos_policy_id"] = None
        return body

    @staticmethod
    def _fixed_ip(conn: Any, entry: Mapping[str, Any]) -> dict[str, str]:
        fixed: dict[str, str] = {}
        subnet = entry.get("subnet") or entry.get("subnet_id")
        if subnet:
            fixed["subnet_id"] = resolve(conn.network.find_subnet, "subnet", subnet)
        if entry.get("ip_address"):
            fixed["ip_address"] = entry["ip_address"]
        return fixed

    # -- what the base calls -------------------------------------------------------------------
    def find(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any | None:
        return tagged(conn.network.ports, owner_tag(ctx))

    def make(self, conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any:
        ref = props.get("network") or props.get("network_id")
        if not ref:
            raise ResourceFailure("a port needs its network: give the property 'network'")
        body = self._fields(conn, ctx, props, set(self.schema.properties or {}),
                            updating=False)
        body["network_id"] = cached(conn, ("network id", ref), lambda: resolve(
            conn.network.find_network, "network", ref))
        with refused(f"creating port {ctx.resource_name}", *TAKEN):
            return conn.network.create_port(**body, tags=with_tags(ctx, props))

    def fetch(self, conn: Any, physical_id: str) -> Any:
        return conn.network.get_port(physical_id)

    def remove(self, conn: Any, physical_id: str) -> None:
        conn.network.delete_port(physical_id, ignore_missing=False)

    def change(self, conn: Any, ctx: PluginContext, physical_id: str,
               old: Mapping[str, Any], new: Mapping[str, Any]) -> Any:
        changed = {k for k in set(old) | set(new) if old.get(k) != new.get(k)}
        # What value_specs set before and no longer sets is left as Neutron has it, as Heat
        # leaves it: only the keys still given are sent.
        body = self._fields(conn, ctx, new, changed - {"tags", "replacement_policy"},
                            updating=True)
        with refused(f"updating port {physical_id}", *TAKEN):
            obj = conn.network.update_port(physical_id, **body) if body \
                else self.fetch(conn, physical_id)
        if "tags" in changed:
            neutron_tags(conn, obj, ctx, new)
        return obj

    def actual(self, obj: Any) -> dict[str, Any]:
        return {key: getattr(obj, ATTRIBUTE.get(key, key)) for key in OBSERVED}

    def attributes(self, conn: Any, obj: Any, props: Mapping[str, Any]) -> dict[str, Any]:
        def subnet(subnet_id: str) -> Any:
            return cached(conn, ("subnet", subnet_id),
                          lambda: conn.network.find_subnet(subnet_id, ignore_missing=True))

        subnets = []
        for fixed in obj.fixed_ips or []:
            found = subnet(fixed["subnet_id"])
            if found is not None:
                subnets.append(found.to_dict(computed=False))
        network = cached(conn, ("network", obj.network_id),
                         lambda: conn.network.find_network(obj.network_id,
                                                           ignore_missing=True))
        return {"admin_state_up": obj.is_admin_state_up, "device_id": obj.device_id,
                "device_owner": obj.device_owner, "fixed_ips": list(obj.fixed_ips or []),
                "mac_address": obj.mac_address, "name": obj.name,
                "network_id": obj.network_id,
                "security_groups": list(obj.security_group_ids or []),
                "status": obj.status, "tenant_id": obj.project_id,
                "allowed_address_pairs": list(obj.allowed_address_pairs or []),
                "subnets": subnets, "port_security_enabled": obj.is_port_security_enabled,
                "qos_policy_id": obj.qos_policy_id,
                "dns_assignment": obj.dns_assignment,
                "network": None if network is None else network.to_dict(computed=False),
                "show": obj.to_dict(computed=False)}
