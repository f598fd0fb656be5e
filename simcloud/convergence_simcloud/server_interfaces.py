"""Nova's interface attachments in the simulated cloud: ``/servers/{id}/os-interface`` list,
attach, show and detach, as Nova answers them from 2.1 to 2.61.

Callers: ``convergence_simcloud.app`` includes :data:`router` under ``/compute/v2.1``. The
server is read through ``convergence_simcloud.servers.visible_server`` (404 when the caller may
not see it); the ports are Neutron's (``convergence_simcloud.network_ports``). Attaching a
``port_id`` binds that port to the server (409 ``PortInUse`` when it already has a device; 400
when it belongs to another project); attaching a ``net_id`` (optionally with one fixed IP)
makes Nova create a port with ``device_owner: compute:<az>``, bind it to the server's host and
remember it in the server's ``_sim["nova_ports"]``, so that a detach, like the server's delete,
deletes it (floating IPs disassociated) while a port that was given is only unbound. With
neither, the project's only network is used (400 when there is none or more than one). The
server must be ACTIVE, PAUSED or SHUTOFF with no task (409 otherwise). An attachment is shown
as ``{net_id, port_id, mac_addr, port_state, fixed_ips}`` (``tag`` comes at 2.70, beyond this
cloud's maximum).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud.compute import Microversion, nova_error
from convergence_simcloud.compute_quotas import answer, nova_body
from convergence_simcloud.context import Authenticated, Caller, cloud_of
from convergence_simcloud.network_common import (
    allocate,
    disassociate_port,
    mac_address,
    used_addresses,
    visible,
)
from convergence_simcloud.network_ports import bind_port, make_port, unbind_port
from convergence_simcloud.network_secgroups import default_group
from convergence_simcloud.servers import check_state, visible_server
from convergence_simcloud.state import Record, SimCloud

router = APIRouter()
PATH = "/servers/{server_id}/os-interface"
READY_STATES = ("active", "paused", "stopped")


def _server(cloud: SimCloud, who: Caller, server_id: str) -> Record:
    return visible_server(cloud, who, server_id)


def view(port: Record) -> dict[str, Any]:
    """A port as Nova shows an interface attachment."""
    return {"net_id": port["network_id"], "port_id": port["id"],
            "mac_addr": port["mac_address"], "port_state": port["status"],
            "fixed_ips": [dict(ip) for ip in port.get("fixed_ips") or []]}


def _nova_ports(server: Record) -> list[str]:
    found: list[str] = server.setdefault("_sim", {}).setdefault("nova_ports", [])
    return found


def _owner(server: Record) -> str:
    return f"compute:{server.get('availability_zone') or 'nova'}"


def _host(server: Record) -> str:
    return str(server.get("host") or server.get("OS-EXT-SRV-ATTR:host") or
               f"compute-{server.get('availability_zone') or 'nova'}")


@router.get(PATH)
def list_interfaces(server_id: str, request: Request, who: Authenticated,
                    _: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        _server(cloud, who, server_id)
        ports = sorted((p for p in cloud.kind("port").values() if p["device_id"] == server_id),
                       key=lambda p: p.get("created_at", ""))
        return {"interfaceAttachments": [view(p) for p in ports]}


@router.get(PATH + "/{port_id}")
def show_interface(server_id: str, port_id: str, request: Request, who: Authenticated,
                   _: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        _server(cloud, who, server_id)
        port = cloud.kind("port").get(port_id)
        if port is None or not (who.is_admin or visible(cloud, who, "port", port)):
            raise nova_error(404, f"Port id {port_id} could not be found.")
        if port["device_id"] != server_id:
            raise nova_error(404, f"Instance {server_id} does not have a port {port_id} "
                                  "attached")
        return {"interfaceAttachment": view(port)}


def _checked(body: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """The asked ``net_id``, ``port_id`` and fixed IP (Nova's 400 for bad combinations)."""
    unknown = sorted(set(body) - {"net_id", "port_id", "fixed_ips"})
    if unknown:
        raise nova_error(400, f"Invalid input for field/attribute interfaceAttachment. Value: "
                              f"{body}. Additional properties are not allowed "
                              f"({', '.join(repr(k) for k in unknown)} "
                              f"{'was' if len(unknown) == 1 else 'were'} unexpected)")
    net_id, port_id = body.get("net_id"), body.get("port_id")
    fixed = body.get("fixed_ips")
    address = None
    if fixed is not None:
        if not isinstance(fixed, list) or len(fixed) > 1 or \
                not all(isinstance(f, dict) and "ip_address" in f for f in fixed):
            raise nova_error(400, f"Invalid input for field/attribute fixed_ips. Value: "
                                  f"{fixed}. {fixed!r} is not valid")
        if fixed:
            address = str(fixed[0]["ip_address"])
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise nova_error(400, f"Invalid input for field/attribute ip_address. Value: "
                                      f"{address}. '{address}' is not a 'ip-address'"
                                 ) from None
    if net_id and port_id:
        raise nova_error(400, "Must not input both network_id and port_id")
    if address and not net_id:
        raise nova_error(400, "Must input network_id when request IP address")
    return (None if net_id is None else str(net_id), None if port_id is None else str(port_id),
            address)


def _network_of(cloud: SimCloud, who: Caller, server: Record, net_id: str | None) -> Record:
    if net_id is not None:
        network = cloud.kind("network").get(net_id)
        if network is None or not (who.is_admin or visible(cloud, who, "network", network)):
            raise nova_error(404, f"Network {net_id} could not be found.")
        return network
    own = [n for n in cloud.kind("network").values()
           if n["project_id"] == server["project_id"] and not n.get("router:external")]
    if not own:
        own = [n for n in cloud.kind("network").values()
               if n.get("shared") and not n.get("router:external")]
    if not own:
        raise nova_error(400, "No specific network was requested and none are available "
                              f"for project '{server['project_id']}'.")
    if len(own) > 1:
        raise nova_error(400, "More than one possible network found. Specify network ID(s) "
                              "to select which one(s) to connect to.")
    return own[0]


def _fixed_ip(cloud: SimCloud, server: Record, network: Record,
              address: str | None) -> list[dict[str, str]]:
    """One fixed IP on ``network``: ``address`` if asked (409 if in use), else the first free
    one (400 when the network has none)."""
    subnets = sorted((s for s in cloud.kind("subnet").values()
                      if s["network_id"] == network["id"]), key=lambda s: s["created_at"])
    if address is not None:
        for subnet in subnets:
            if ipaddress.ip_address(address) in ipaddress.ip_network(subnet["cidr"]):
                if address in used_addresses(cloud, subnet["id"]):
                    raise nova_error(409, f"Fixed IP address {address} is already in use on "
                                          f"instance {server['id']}.")
                return [{"subnet_id": subnet["id"], "ip_address": address}]
        raise nova_error(400, f"Fixed IP address {address} is not a valid IP for network "
                              f"{network['id']}.")
    for subnet in subnets:
        free = allocate(cloud, subnet)
        if free is not None:
            return [{"subnet_id": subnet["id"], "ip_address": free}]
    if not subnets:
        return []
    raise nova_error(400, f"No fixed IP addresses available for network: {network['id']}")


def attach(cloud: SimCloud, who: Caller, server: Record, net_id: str | None,
           port_id: str | None, address: str | None) -> Record:
    """Attach a port (given, or made on a network) to ``server``. Call under the lock."""
    if port_id is not None:
        port = cloud.kind("port").get(port_id)
        if port is None or not (who.is_admin or visible(cloud, who, "port", port)):
            raise nova_error(404, f"Port id {port_id} could not be found.")
        if port["device_id"]:
            raise nova_error(409, f"Port {port_id} is still in use.")
        if port["project_id"] != server["project_id"]:
            raise nova_error(400, f"Port {port_id} not usable for instance {server['id']}.")
        bind_port(cloud, port, server["id"], _owner(server), _host(server))
        return port
    network = _network_of(cloud, who, server, net_id)
    fixed = _fixed_ip(cloud, server, network, address)
    groups = [] if not network.get("port_security_enabled", True) else \
        [default_group(cloud, server["project_id"])["id"]]
    port = make_port(cloud, server["project_id"], network, fixed,
                     {"device_id": server["id"], "device_owner": _owner(server),
                      "security_groups": groups}, mac_address())
    bind_port(cloud, port, server["id"], _owner(server), _host(server))
    _nova_ports(server).append(port["id"])
    return port


@router.post(PATH)
async def attach_interface(server_id: str, request: Request, who: Authenticated,
                           _: Microversion) -> dict[str, Any]:
    raw = await request.body()
    body: dict[str, Any] = {}
    if raw.strip():
        body = await nova_body(request, "interfaceAttachment")
    net_id, port_id, address = _checked(body)
    cloud = cloud_of(request)
    with cloud.locked():
        server = _server(cloud, who, server_id)
        check_state(server, "attach_interface", READY_STATES)
        shown = view(attach(cloud, who, server, net_id, port_id, address))
    cloud.changed()
    return {"interfaceAttachment": shown}


def detach(cloud: SimCloud, server: Record, port_id: str) -> None:
    """Detach ``port_id`` from ``server``: deleted if Nova made it, else unbound (404 if it is
    not attached). Call under the lock."""
    port = cloud.kind("port").get(port_id)
    if port is None or port["device_id"] != server["id"]:
        raise nova_error(404, f"Port {port_id} is not attached")
    made = _nova_ports(server)
    if port_id in made:
        made.remove(port_id)
        disassociate_port(cloud, port_id)
        del cloud.kind("port")[port_id]
    else:
        unbind_port(cloud, port)


@router.delete(PATH + "/{port_id}")
def detach_interface(server_id: str, port_id: str, request: Request, who: Authenticated,
                     version: Microversion) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        server = _server(cloud, who, server_id)
        check_state(server, "detach_interface", READY_STATES)
        detach(cloud, server, port_id)
    cloud.changed()
    return answer(202, version)
