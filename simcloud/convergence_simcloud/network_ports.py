"""Neutron's ports in the simulated cloud: fixed IPs allocated from the subnets' pools.

Callers: ``convergence_simcloud.network`` includes :data:`router` under ``/network/v2.0`` and
calls :func:`make_port` for the DHCP port of a subnet; the compute service may call it for the
ports Nova creates. A new port is ``DOWN``, in its project's ``default`` security group (unless
it names its groups or disables port security), with a ``fa:16:3e`` MAC address and one fixed
IP from the first subnet of its network that has a free address (or the ``fixed_ips`` it asks
for). An exhausted pool answers 409 ``IpAddressGenerationFailure``; an address in use 409
``IpAddressAlreadyAllocated``; an address outside the subnet 400 ``InvalidIpForSubnet``.
A router's or floating IP's port cannot be deleted directly (409 ``L3PortInUse``); deleting a
port disassociates its floating IPs.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud.context import Authenticated, Caller, CloudError, cloud_of
from convergence_simcloud.network_common import (
    allocate,
    bad_request,
    body_of,
    delete_faulted,
    disassociate_port,
    exhausted,
    get_owned,
    get_visible,
    list_kind,
    mac_address,
    neutron_error,
    new_record,
    not_found,
    project_of,
    touch,
    updated,
    used_addresses,
)
from convergence_simcloud.network_quotas import check_quota
from convergence_simcloud.network_secgroups import default_group
from convergence_simcloud.state import Record, SimCloud, new_id

router = APIRouter()
UPDATABLE = ("name", "description", "admin_state_up", "device_id", "device_owner",
             "security_groups", "binding:host_id", "binding:profile", "binding:vnic_type",
             "allowed_address_pairs", "port_security_enabled", "tags", "fixed_ips",
             "extra_dhcp_opts", "dns_name")
L3_OWNERS = ("network:router_interface", "network:router_gateway", "network:floatingip")


def port_not_found(port_id: str) -> CloudError:
    return not_found("PortNotFound", "Port", port_id)


def show_port(port: Record) -> Record:
    return {**port, "tenant_id": port["project_id"]}


def make_port(cloud: SimCloud, project_id: str, network: Record,
              fixed_ips: list[dict[str, str]], body: dict[str, Any], mac: str) -> Record:
    """Store a port with these (already allocated) fixed IPs. Call under the lock."""
    port = new_record(
        cloud, project_id, id=new_id(), name=body.get("name", ""), network_id=network["id"],
        fixed_ips=fixed_ips, mac_address=mac, device_id=body.get("device_id", ""),
        device_owner=body.get("device_owner", ""), status="DOWN",
        admin_state_up=bool(body.get("admin_state_up", True)),
        security_groups=list(body.get("security_groups") or []),
        port_security_enabled=bool(body.get("port_security_enabled",
                                            network.get("port_security_enabled", True))),
        allowed_address_pairs=list(body.get("allowed_address_pairs") or []),
        extra_dhcp_opts=list(body.get("extra_dhcp_opts") or []),
        dns_name=body.get("dns_name", ""), qos_policy_id=None,
        propagate_uplink_status=False,
        **{"binding:host_id": body.get("binding:host_id", ""),
           "binding:vnic_type": body.get("binding:vnic_type", "normal"),
           "binding:vif_type": "unbound", "binding:vif_details": {},
           "binding:profile": body.get("binding:profile") or {}})
    port["description"] = body.get("description", "")
    port["tags"] = list(body.get("tags") or [])
    cloud.kind("port")[port["id"]] = port
    return port


def bind_port(cloud: SimCloud, port: Record, device_id: str, device_owner: str,
              host: str) -> None:
    """Bind ``port`` to a device (Nova's server): ``ACTIVE``, bound to ``host``. Under the
    lock."""
    port.update({"device_id": device_id, "device_owner": device_owner, "status": "ACTIVE",
                 "binding:host_id": host, "binding:vif_type": "ovs",
                 "binding:vif_details": {"port_filter": True}})
    touch(cloud, port)


def unbind_port(cloud: SimCloud, port: Record) -> None:
    """Free a pre-created port from its device: ``DOWN``, no device, no host. Under the lock."""
    port.update({"device_id": "", "device_owner": "", "status": "DOWN", "binding:host_id": "",
                 "binding:vif_type": "unbound", "binding:vif_details": {}})
    touch(cloud, port)


def ports_of_device(cloud: SimCloud, device_id: str) -> list[Record]:
    return [p for p in cloud.kind("port").values() if p["device_id"] == device_id]


def _subnets_of(cloud: SimCloud, network_id: str) -> list[Record]:
    return sorted((s for s in cloud.kind("subnet").values() if s["network_id"] == network_id),
                  key=lambda s: s["created_at"])


def _fixed_ips(cloud: SimCloud, network: Record, asked: Any,
               port_id: str | None = None) -> list[dict[str, str]]:
    """The fixed IPs a port asks for, allocated (one from the first free subnet if none)."""
    subnets = _subnets_of(cloud, network["id"])
    if asked is None:
        if not subnets:
            return []
        for subnet in subnets:
            address = allocate(cloud, subnet)
            if address is not None:
                return [{"subnet_id": subnet["id"], "ip_address": address}]
        raise exhausted(network["id"])
    if not isinstance(asked, list):
        raise bad_request("Invalid input for fixed_ips: it must be a list.")
    chosen: list[dict[str, str]] = []
    by_id = {s["id"]: s for s in subnets}
    for entry in asked:
        subnet_id, address = entry.get("subnet_id"), entry.get("ip_address")
        if subnet_id is None and address is not None:
            subnet_id = next((s["id"] for s in subnets
                              if ipaddress.ip_address(address) in
                              ipaddress.ip_network(s["cidr"])), None)
        found = by_id.get(str(subnet_id))
        if found is None:
            raise bad_request(f"Invalid input for fixed_ips: no subnet {subnet_id} on "
                              f"network {network['id']}.")
        subnet = found
        taken = used_addresses(cloud, subnet["id"]) | {c["ip_address"] for c in chosen}
        if port_id is not None:
            port = cloud.kind("port")[port_id]
            taken -= {ip["ip_address"] for ip in port["fixed_ips"]}
        if address is None:
            free = allocate(cloud, subnet)
            if free is None or free in taken:
                raise exhausted(network["id"])
            address = free
        elif ipaddress.ip_address(address) not in ipaddress.ip_network(subnet["cidr"]):
            raise neutron_error(400, "InvalidIpForSubnet",
                                f"IP address {address} is not a valid IP for the "
                                "specified subnet.")
        elif address in taken:
            raise neutron_error(409, "IpAddressAlreadyAllocated",
                                f"IP address {address} already allocated in subnet "
                                f"{subnet['id']}.")
        chosen.append({"subnet_id": subnet["id"], "ip_address": str(address)})
    return chosen


def _groups(cloud: SimCloud, who: Caller, project_id: str, body: dict[str, Any],
            network: Record) -> list[str]:
    if "security_groups" in body:
        ids = list(body["security_groups"] or [])
        for group_id in ids:
            get_visible(cloud, who, "security_group", group_id,
                        not_found("SecurityGroupNotFound", "Security group", group_id))
        return ids
    owner = str(body.get("device_owner") or "")
    if owner.startswith("network:") or not body.get("port_security_enabled",
                                                    network.get("port_security_enabled",
                                                                True)):
        return []
    return [default_group(cloud, project_id)["id"]]


@router.get("/ports")
def list_ports(request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        cloud.settle()  # Nova's builds bind ports, vanishing servers free them
        return list_kind(cloud, request, who, "port", show_port)


@router.post("/ports", status_code=201)
async def create_port(request: Request, who: Authenticated) -> dict[str, Any]:
    body = await body_of(request, "port")
    cloud = cloud_of(request)
    with cloud.locked():
        network_id = str(body.get("network_id") or "")
        if not network_id:
            raise bad_request("Invalid input for network_id: a network id is required.")
        network = get_visible(cloud, who, "network", network_id,
                              not_found("NetworkNotFound", "Network", network_id))
        project_id = project_of(who, body)
        check_quota(cloud, "port", project_id, body)
        fixed = _fixed_ips(cloud, network, body.get("fixed_ips"))
        groups = _groups(cloud, who, project_id, body, network)
        port = make_port(cloud, project_id, network, fixed, body,
                         str(body.get("mac_address") or mac_address()))
        port["security_groups"] = groups
        shown = show_port(port)
    cloud.changed()
    return {"port": shown}


@router.get("/ports/{port_id}")
def show_port_route(port_id: str, request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        cloud.settle()  # Nova's builds bind ports, vanishing servers free them
        return {"port": show_port(get_visible(cloud, who, "port", port_id,
                                              port_not_found(port_id)))}


@router.put("/ports/{port_id}")
async def update_port(port_id: str, request: Request, who: Authenticated) -> dict[str, Any]:
    body = await body_of(request, "port")
    cloud = cloud_of(request)
    with cloud.locked():
        port = get_owned(cloud, who, "port", port_id, port_not_found(port_id))
        network = cloud.kind("network")[port["network_id"]]
        if "fixed_ips" in body:
            body["fixed_ips"] = _fixed_ips(cloud, network, body["fixed_ips"], port_id)
        if "security_groups" in body:
            body["security_groups"] = _groups(cloud, who, port["project_id"], body, network)
        updated(port, body, UPDATABLE)
        touch(cloud, port)
        shown = show_port(port)
    cloud.changed()
    return {"port": shown}


@router.delete("/ports/{port_id}", status_code=204)
def delete_port(port_id: str, request: Request, who: Authenticated) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        port = get_owned(cloud, who, "port", port_id, port_not_found(port_id))
        if port["device_owner"] in L3_OWNERS:
            raise neutron_error(409, "L3PortInUse",
                                f"Port {port_id} cannot be deleted directly via the port API: "
                                f"has device owner {port['device_owner']}.")
        if not delete_faulted(cloud, "port", port):
            disassociate_port(cloud, port_id)
            del cloud.kind("port")[port_id]
    cloud.changed()
    return Response(status_code=204)
