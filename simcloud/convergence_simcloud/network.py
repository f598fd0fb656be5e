"""Neutron v2.0 of the simulated cloud: its version list, networks and subnets.

Callers: ``convergence_simcloud.app`` mounts :data:`router` at ``/network`` (openstacksdk
appends ``/v2.0`` itself; ``GET /network/`` still lists the version); this router includes the
ports (``network_ports``), the security groups (``network_secgroups``), tags
(``network_tags``), routers (``network_routers``), floating IPs (``network_floatingips``),
quotas (``network_quotas``, checked by every create) and the extension list
(``network_extensions``). The records' shapes and the seed's networks (``public``: shared,
``router:external``, a subnet whose allocation pool is the floating-IP range) are in
``network_records``. A subnet's allocation pools default to its
CIDR's hosts but the gateway; a subnet with DHCP gets a ``network:dhcp`` port; deleting a
network with other ports (router gateways, floating IPs) answers 409 ``NetworkInUse``.
Helpers are in ``network_common``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud import (
    network_extensions,
    network_floatingips,
    network_ports,
    network_quotas,
    network_routers,
    network_secgroups,
    network_tags,
)
from convergence_simcloud.context import Authenticated, Caller, CloudError, cloud_of
from convergence_simcloud.network_common import (
    API,
    allocate,
    bad_request,
    body_of,
    delete_faulted,
    get_owned,
    get_visible,
    list_kind,
    mac_address,
    neutron_error,
    not_found,
    project_of,
    touch,
    updated,
)
from convergence_simcloud.network_records import InvalidInput, network_record, subnet_record
from convergence_simcloud.state import Record, SimCloud, new_id

router = APIRouter()
router.include_router(network_ports.router, prefix=API)
router.include_router(network_secgroups.router, prefix=API)
router.include_router(network_tags.router, prefix=API)
router.include_router(network_routers.router, prefix=API)
router.include_router(network_floatingips.router, prefix=API)
router.include_router(network_quotas.router, prefix=API)
router.include_router(network_extensions.router, prefix=API)

NETWORK_UPDATABLE = ("name", "description", "admin_state_up", "shared", "router:external",
                     "mtu", "port_security_enabled", "tags")
SUBNET_UPDATABLE = ("name", "description", "gateway_ip", "enable_dhcp", "dns_nameservers",
                    "host_routes", "allocation_pools", "tags")


@router.get("")
@router.get("/")
def versions(request: Request) -> dict[str, Any]:
    href = str(request.base_url).rstrip("/") + "/network/v2.0/"
    return {"versions": [{"id": "v2.0", "status": "CURRENT",
                          "links": [{"href": href, "rel": "self"}]}]}


def network_not_found(network_id: str) -> CloudError:
    return not_found("NetworkNotFound", "Network", network_id)


def subnet_not_found(subnet_id: str) -> CloudError:
    return not_found("SubnetNotFound", "Subnet", subnet_id)


# -- networks ------------------------------------------------------------------------------

def show_network(cloud: SimCloud, network: Record) -> Record:
    subnets = sorted(s["id"] for s in cloud.kind("subnet").values()
                     if s["network_id"] == network["id"])
    return {**network, "tenant_id": network["project_id"], "subnets": subnets}


def make_network(cloud: SimCloud, project_id: str, body: dict[str, Any]) -> Record:
    network = network_record(new_id(), project_id, cloud.now(), body)
    cloud.kind("network")[network["id"]] = network
    return network


@router.get(API + "/networks")
def list_networks(request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return list_kind(cloud, request, who, "network", lambda n: show_network(cloud, n))


@router.post(API + "/networks", status_code=201)
async def create_network(request: Request, who: Authenticated) -> dict[str, Any]:
    body = await body_of(request, "network")
    cloud = cloud_of(request)
    with cloud.locked():
        if (body.get("shared") or body.get("router:external")) and not who.is_admin:
            raise neutron_error(403, "HTTPForbidden",
                                "Only admins may create shared or external networks.")
        network_quotas.check_quota(cloud, "network", project_of(who, body), body)
        network = make_network(cloud, project_of(who, body), body)
        shown = show_network(cloud, network)
    cloud.changed()
    return {"network": shown}


@router.get(API + "/networks/{network_id}")
def show_network_route(network_id: str, request: Request, who: Authenticated,
                       ) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        network = get_visible(cloud, who, "network", network_id,
                              network_not_found(network_id))
        return {"network": show_network(cloud, network)}


@router.put(API + "/networks/{network_id}")
async def update_network(network_id: str, request: Request, who: Authenticated,
                         ) -> dict[str, Any]:
    body = await body_of(request, "network")
    cloud = cloud_of(request)
    with cloud.locked():
        network = get_owned(cloud, who, "network", network_id, network_not_found(network_id))
        updated(network, body, NETWORK_UPDATABLE)
        touch(cloud, network)
        shown = show_network(cloud, network)
    cloud.changed()
    return {"network": shown}


@router.delete(API + "/networks/{network_id}", status_code=204)
def delete_network(network_id: str, request: Request, who: Authenticated) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        network = get_owned(cloud, who, "network", network_id, network_not_found(network_id))
        ports = [p for p in cloud.kind("port").values() if p["network_id"] == network_id]
        if any(p["device_owner"] != "network:dhcp" for p in ports):
            raise neutron_error(409, "NetworkInUse",
                                f"Unable to complete operation on network {network_id}. "
                                "There are one or more ports still in use on the network.")
        if delete_faulted(cloud, "network", network):
            return Response(status_code=204)
        for port in ports:
            del cloud.kind("port")[port["id"]]
        for subnet_id in [s["id"] for s in cloud.kind("subnet").values()
                          if s["network_id"] == network_id]:
            del cloud.kind("subnet")[subnet_id]
        del cloud.kind("network")[network_id]
    cloud.changed()
    return Response(status_code=204)


# -- subnets -------------------------------------------------------------------------------

def show_subnet(subnet: Record) -> Record:
    return {**subnet, "tenant_id": subnet["project_id"]}


def make_subnet(cloud: SimCloud, project_id: str, network: Record,
                body: dict[str, Any]) -> Record:
    """Store a subnet and, when it has DHCP, the network's DHCP port on it."""
    try:
        subnet = subnet_record(new_id(), project_id, cloud.now(), network["id"], body)
    except InvalidInput as invalid:
        raise bad_request(str(invalid)) from None
    cloud.kind("subnet")[subnet["id"]] = subnet
    if subnet["enable_dhcp"]:
        address = allocate(cloud, subnet)
        if address is not None:
            port = network_ports.make_port(
                cloud, network["project_id"], network, [
                    {"subnet_id": subnet["id"], "ip_address": address}],
                {"device_owner": "network:dhcp", "device_id": f"dhcp-{network['id']}",
                 "name": ""}, mac_address())
            port["status"] = "ACTIVE"
    return subnet


def _subnet_network(cloud: SimCloud, who: Caller, network_id: Any) -> Record:
    if not network_id:
        raise bad_request("Invalid input for network_id: a network id is required.")
    network = get_visible(cloud, who, "network", str(network_id),
                          network_not_found(str(network_id)))
    if not who.is_admin and network["project_id"] != who.project_id:
        raise neutron_error(403, "HTTPForbidden",
                            "Only the network's owner may add subnets to it.")
    return network


@router.get(API + "/subnets")
def list_subnets(request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return list_kind(cloud, request, who, "subnet", show_subnet)


@router.post(API + "/subnets", status_code=201)
async def create_subnet(request: Request, who: Authenticated) -> dict[str, Any]:
    body = await body_of(request, "subnet")
    cloud = cloud_of(request)
    with cloud.locked():
        network = _subnet_network(cloud, who, body.get("network_id"))
        network_quotas.check_quota(cloud, "subnet", project_of(who, body), body)
        subnet = make_subnet(cloud, project_of(who, body), network, body)
    cloud.changed()
    return {"subnet": show_subnet(subnet)}


@router.get(API + "/subnets/{subnet_id}")
def show_subnet_route(subnet_id: str, request: Request, who: Authenticated,
                      ) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"subnet": show_subnet(get_visible(cloud, who, "subnet", subnet_id,
                                                  subnet_not_found(subnet_id)))}


@router.put(API + "/subnets/{subnet_id}")
async def update_subnet(subnet_id: str, request: Request, who: Authenticated,
                        ) -> dict[str, Any]:
    body = await body_of(request, "subnet")
    cloud = cloud_of(request)
    with cloud.locked():
        subnet = get_owned(cloud, who, "subnet", subnet_id, subnet_not_found(subnet_id))
        updated(subnet, body, SUBNET_UPDATABLE)
        touch(cloud, subnet)
        shown = show_subnet(subnet)
    cloud.changed()
    return {"subnet": shown}


@router.delete(API + "/subnets/{subnet_id}", status_code=204)
def delete_subnet(subnet_id: str, request: Request, who: Authenticated) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        subnet = get_owned(cloud, who, "subnet", subnet_id, subnet_not_found(subnet_id))
        users = [p for p in cloud.kind("port").values()
                 if any(ip["subnet_id"] == subnet_id for ip in p["fixed_ips"])]
        if any(p["device_owner"] != "network:dhcp" for p in users):
            raise neutron_error(409, "SubnetInUse",
                                f"Unable to complete operation on subnet {subnet_id}: "
                                "one or more ports have an IP allocation from this subnet.")
        if delete_faulted(cloud, "subnet", subnet):
            return Response(status_code=204)
        for port in users:
            del cloud.kind("port")[port["id"]]
        del cloud.kind("subnet")[subnet_id]
    cloud.changed()
    return Response(status_code=204)
