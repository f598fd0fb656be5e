"""The ``networks`` of ``OS::Nova::Server``: what a boot request plugs the server into, the ports
the server makes, freeing a port an older version holds, and the interfaces an update changes.

Callers: ``nova_server_boot`` builds a boot request's ``networks`` with :func:`boot_networks`;
``nova_server`` calls :func:`free_ports` before it boots (a replacement's port may still be
bound to the version it replaces) and :func:`remove_owned_ports` once a server is deleted;
``nova_server_update`` asks :func:`plan_networks` which interfaces to detach and which entries
to attach when ``networks`` changes, and :func:`attach_target` what one attachment names.

The rules are Heat's (``server_network_mixin``): an entry names a ``port`` to plug in, or a
``network`` (or a ``subnet``, whose network it is) that Nova makes a port on, with a
``fixed_ip`` if asked; an entry with a ``subnet`` or ``port_extra_properties`` and no port gets
a port the server makes itself (named ``<resource>-port-<index>``, tagged with the record's key
so that an interrupted create reuses it and a delete removes it); ``floating_ip`` is associated
with the entry's port; ``allocate_network`` (``auto`` or ``none``) stands alone. On update, the
entries that still match an interface keep it, and only interfaces the old entries accounted
for are detached, so an interface attached by hand stays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openstack import exceptions as sdk_exceptions

from convergence.plugins.base import PluginContext, ResourceFailure
from convergence.plugins.openstack.lookups import cached
from convergence.plugins.openstack.nova_server_tags import older_version
from convergence.plugins.openstack.resource import owner_tag

MAKES_PORT = ("subnet", "port_extra_properties")
_EXTRA_KEYS = ("admin_state_up", "mac_address", "binding:vnic_type", "port_security_enabled",
               "propagate_uplink_status")


def entries(props: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``networks`` entries without their empty keys (Heat treats ``''`` as unset), the
    hidden ``uuid`` read as ``network``."""
    found = []
    for raw in props.get("networks") or []:
        entry = {k: v for k, v in dict(raw).items() if v is not None and v != "" and v != {}}
        uuid = entry.pop("uuid", None)
        if uuid is not None:
            entry.setdefault("network", uuid)
        found.append(entry)
    return found


def allocation(found: list[dict[str, Any]]) -> str | None:
    """``auto`` or ``none`` when an entry asks for it (it then stands alone)."""
    return next((str(e["allocate_network"]) for e in found if e.get("allocate_network")), None)


def makes_port(entry: Mapping[str, Any]) -> bool:
    """Whether the server makes the entry's port itself (Heat's internal port)."""
    return not entry.get("port") and any(entry.get(k) for k in MAKES_PORT)


@dataclass(frozen=True, slots=True)
class Resolved:
    """An entry's names resolved to ids."""

    port: str | None
    network: str | None
    subnet: str | None


def resolve(conn: Any, entry: Mapping[str, Any]) -> Resolved:
    port = network = subnet = None
    if entry.get("port"):
        port = str(conn.network.find_port(entry["port"], ignore_missing=False).id)
    if entry.get("subnet"):
        found = conn.network.find_subnet(entry["subnet"], ignore_missing=False)
        subnet, network = str(found.id), str(found.network_id)
    if entry.get("network"):
        ref = entry["network"]
        network = str(cached(conn, ("network", ref), lambda: conn.network.find_network(
            ref, ignore_missing=False)).id)
    return Resolved(port, network, subnet)


# -- the ports the server makes --------------------------------------------------------------

def port_name(ctx: PluginContext, index: int) -> str:
    return f"{ctx.resource_name}-port-{index}"


def owned_ports(conn: Any, ctx: PluginContext) -> list[Any]:
    """The ports this record's server made (tagged with the record's key)."""
    return list(conn.network.ports(tags=owner_tag(ctx)))


def extra_body(conn: Any, extra: Mapping[str, Any]) -> dict[str, Any]:
    """Neutron's fields for ``port_extra_properties``."""
    body: dict[str, Any] = dict(extra.get("value_specs") or {})
    for key in _EXTRA_KEYS:
        if extra.get(key) is not None:
            body[key] = extra[key]
    if extra.get("allowed_address_pairs") is not None:
        body["allowed_address_pairs"] = [{k: v for k, v in pair.items() if v is not None}
                                         for pair in extra["allowed_address_pairs"]]
    if extra.get("qos_policy"):
        body["qos_policy_id"] = str(
            conn.network.find_qos_policy(extra["qos_policy"], ignore_missing=False).id)
    if extra.get("no_fixed_ips"):
        body["fixed_ips"] = []
    return body


def group_ids(conn: Any, groups: list[str]) -> list[str]:
    """Security groups by name or id, the project's own: an admin sees every project's
    ``default`` group, and a name must not pick another project's."""
    project = conn.current_project_id
    return [str(conn.network.find_security_group(g, ignore_missing=False, project_id=project).id)
            for g in groups]


def make_port(conn: Any, ctx: PluginContext, entry: Mapping[str, Any], index: int,
              groups: list[str]) -> str:
    """The port the server makes for ``entry`` (one left unbound by an interrupted attempt is
    reused); its id."""
    name = port_name(ctx, index)
    for port in conn.network.ports(tags=owner_tag(ctx), name=name):
        if not port.device_id:
            return str(port.id)
    where = resolve(conn, entry)
    body: dict[str, Any] = {"network_id": where.network, "name": name, "tags": [owner_tag(ctx)]}
    fixed = {k: v for k, v in (("subnet_id", where.subnet),
                               ("ip_address", entry.get("fixed_ip"))) if v}
    if fixed:
        body["fixed_ips"] = [fixed]
    if groups:
        body["security_group_ids"] = group_ids(conn, groups)
    body.update(extra_body(conn, entry.get("port_extra_properties") or {}))
    ctx.check_lease()
    return str(conn.network.create_port(**body).id)


def remove_owned_ports(conn: Any, ctx: PluginContext) -> None:
    """Delete the ports this record's server made (its server is gone: they are free)."""
    for port in owned_ports(conn, ctx):
        ctx.check_lease()
        conn.network.delete_port(port, ignore_missing=True)


def associate(conn: Any, floating_ip: str, port: str, fixed_ip: str | None) -> None:
    fields: dict[str, Any] = {"port_id": port}
    if fixed_ip:
        fields["fixed_ip_address"] = fixed_ip
    conn.network.update_ip(floating_ip, **fields)


def disassociate(conn: Any, floating_ip: str, port: str) -> None:
    """Take ``floating_ip`` off ``port`` (left alone if it has moved on)."""
    found = conn.network.find_ip(floating_ip, ignore_missing=True)
    if found is not None and found.port_id == port:
        conn.network.update_ip(found, port_id=None)


# -- the boot request ------------------------------------------------------------------------

def boot_networks(conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> Any:
    """Nova's ``networks`` for the boot request (making the ports the server makes and
    associating floating IPs with the entries' ports first, as Heat does)."""
    found = entries(props)
    if not found:
        return "auto"
    alloc = allocation(found)
    if alloc is not None:
        return alloc
    nics = []
    for index, entry in enumerate(found):
        nic: dict[str, Any] = {}
        if makes_port(entry):
            nic["port"] = make_port(conn, ctx, entry, index, props.get("security_groups") or [])
        else:
            where = resolve(conn, entry)
            if where.port:
                nic["port"] = where.port
            elif where.network:
                nic["uuid"] = where.network
                if entry.get("fixed_ip"):
                    nic["fixed_ip"] = entry["fixed_ip"]
            else:
                raise ResourceFailure(f"networks[{index}] names no network, port or subnet")
        if entry.get("tag"):
            nic["tag"] = entry["tag"]
        if entry.get("floating_ip") and "port" in nic:
            associate(conn, entry["floating_ip"], nic["port"], entry.get("fixed_ip"))
        nics.append(nic)
    return nics


def free_ports(conn: Any, ctx: PluginContext, props: Mapping[str, Any],
               asked: frozenset[str]) -> list[str]:
    """The given ports an older version of this resource still holds (a replacement boots
    before the version it replaces is deleted, and Nova will not boot on a bound port): each
    is detached from it, once (``asked``: the ports already detached), and those still bound
    are answered. A port bound to anything else fails the resource with why."""
    busy = []
    for entry in entries(props):
        if not entry.get("port") or makes_port(entry):
            continue
        port = conn.network.find_port(entry["port"], ignore_missing=False)
        if not port.device_id:
            continue
        if not str(port.device_owner or "").startswith("compute:"):
            raise ResourceFailure(f"port {port.id} is in use by {port.device_owner or 'device'}"
                                  f" {port.device_id}")
        holder = _server(conn, str(port.device_id))
        if holder is None:  # a server that is going away: the port comes free with it
            busy.append(str(port.id))
            continue
        if not older_version(ctx, holder.tags or []):
            raise ResourceFailure(f"port {port.id} is in use by server {holder.id}, which is "
                                  f"not a version of {ctx.resource_name}")
        if holder.status == "ERROR":
            # Nova detaches nothing from a server in ERROR: the binding is cleared in Neutron,
            # as the failed server's own delete would.
            ctx.check_lease()
            conn.network.update_port(port, device_id="", device_owner="",
                                     binding_host_id="")
            continue
        busy.append(str(port.id))
        if str(port.id) not in asked:
            ctx.check_lease()
            conn.compute.delete_server_interface(port.id, server=holder.id, ignore_missing=True)
    return busy


def _server(conn: Any, server_id: str) -> Any | None:
    try:
        return conn.compute.get_server(server_id)
    except sdk_exceptions.NotFoundException:
        return None


# -- an update -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Interface:
    port: str
    network: str
    addresses: frozenset[str]
    subnets: frozenset[str]


def interfaces(conn: Any, server_id: str) -> list[Interface]:
    return [Interface(str(i.port_id), str(i.net_id),
                      frozenset(str(f.get("ip_address")) for f in i.fixed_ips or []),
                      frozenset(str(f.get("subnet_id")) for f in i.fixed_ips or []))
            for i in conn.compute.server_interfaces(server_id)]


def _rank(entry: Mapping[str, Any]) -> int:
    """The most particular entries claim their interface first."""
    if entry.get("port"):
        return 0
    if entry.get("fixed_ip"):
        return 1
    return 2 if makes_port(entry) else 3


def _fits(entry: Mapping[str, Any], where: Resolved, iface: Interface, owned: set[str],
          named: set[str]) -> bool:
    if where.port:
        return iface.port == where.port
    if where.network and iface.network != where.network:
        return False
    if entry.get("fixed_ip") and entry["fixed_ip"] not in iface.addresses:
        return False
    if makes_port(entry):
        return iface.port in owned and (where.subnet is None or where.subnet in iface.subnets)
    return iface.port not in owned and iface.port not in named


def claim(found: list[dict[str, Any]], wheres: list[Resolved], ifaces: list[Interface],
          owned: set[str], named: set[str]) -> dict[int, str]:
    """Which interface (port id) each entry accounts for, by entry index."""
    claims: dict[int, str] = {}
    taken: set[str] = set()
    for index in sorted(range(len(found)), key=lambda i: _rank(found[i])):
        match = next((f for f in ifaces if f.port not in taken and
                      _fits(found[index], wheres[index], f, owned, named)), None)
        if match is not None:
            claims[index] = match.port
            taken.add(match.port)
    return claims


@dataclass(frozen=True, slots=True)
class NetworkPlan:
    """The interfaces to detach (port ids, whether the server made the port) and the new
    entries to attach (their index in the new ``networks``; None: any network Nova picks)."""

    detach: list[tuple[str, bool]]
    attach: list[int | None]


def plan_networks(conn: Any, ctx: PluginContext, server_id: str, old: Mapping[str, Any],
                  new: Mapping[str, Any]) -> NetworkPlan:
    """What a change of ``networks`` detaches and attaches, from the server's interfaces. The
    changes that need neither (a floating IP, the settings of a port the server made) are
    made here, in place."""
    before, after = entries(old), entries(new)
    ifaces = interfaces(conn, server_id)
    owned = {str(p.id) for p in owned_ports(conn, ctx)}
    alloc = allocation(after)
    if alloc is not None:  # auto or none: what was there goes, Nova's choice comes
        return NetworkPlan([(f.port, f.port in owned) for f in ifaces],
                           [None] if alloc == "auto" else [])
    new_where = [resolve(conn, e) for e in after]
    old_where = [resolve(conn, e) for e in before] if allocation(before) is None else []
    named = {w.port for w in (*new_where, *old_where) if w.port}
    kept = claim(after, new_where, ifaces, owned, named)
    if not old_where:  # there was Nova's choice: all of it goes but what the entries keep
        held = {f.port: -1 for f in ifaces}
    else:
        held = {port: index for index, port in claim(before, old_where, ifaces, owned,
                                                     named).items()}
    for index, port in kept.items():
        previous = before[held[port]] if held.get(port, -1) >= 0 else {}
        _in_place(conn, ctx, previous, after[index], port, port in owned)
    detach = [(port, port in owned) for port, index in held.items()
              if port not in kept.values()]
    for port, _ in detach:
        index = held[port]
        if index >= 0 and before[index].get("floating_ip"):
            disassociate(conn, before[index]["floating_ip"], port)
    attach: list[int | None] = [i for i in range(len(after)) if i not in kept]
    if not after:
        attach = [None]  # no entries: the server gets the first network free, as on boot
    return NetworkPlan(detach, attach)


def _in_place(conn: Any, ctx: PluginContext, old: Mapping[str, Any], new: Mapping[str, Any],
              port: str, owned: bool) -> None:
    """An entry that keeps its interface: its floating IP and, for a port the server made,
    the port's settings follow the template."""
    ctx.check_lease()
    if owned and old.get("port_extra_properties") != new.get("port_extra_properties"):
        body = extra_body(conn, new.get("port_extra_properties") or {})
        if body:
            conn.network.update_port(port, **body)
    if old.get("floating_ip") and old.get("floating_ip") != new.get("floating_ip"):
        disassociate(conn, old["floating_ip"], port)
    if new.get("floating_ip") and old.get("floating_ip") != new.get("floating_ip"):
        associate(conn, new["floating_ip"], port, new.get("fixed_ip"))


def attach_target(conn: Any, ctx: PluginContext, props: Mapping[str, Any],
                  index: int | None) -> dict[str, Any]:
    """What attaching entry ``index`` of ``networks`` asks Nova for (``port_id``, or
    ``net_id`` and ``fixed_ips``), making the entry's port if the server makes it."""
    if index is None:
        return {}
    entry = entries(props)[index]
    if makes_port(entry):
        return {"port_id": make_port(conn, ctx, entry, index,
                                     props.get("security_groups") or [])}
    where = resolve(conn, entry)
    if where.port:
        return {"port_id": where.port}
    target: dict[str, Any] = {"net_id": where.network}
    if entry.get("fixed_ip"):
        target["fixed_ips"] = [{"ip_address": entry["fixed_ip"]}]
    return target
