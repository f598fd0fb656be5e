"""Neutron's routers in the simulated cloud: gateways on external networks and interfaces.

Callers: ``convergence_simcloud.network`` includes :data:`router` under ``/network/v2.0``;
``convergence_simcloud.network_floatingips`` asks :func:`router_for` which router carries a
fixed IP's subnet to an external network. A router is ``ACTIVE`` at once. Its
``external_gateway_info`` (``network_id``, ``enable_snat``, ``external_fixed_ips``) makes a
``network:router_gateway`` port on that external network (400 if it is not external);
clearing it deletes the port (409 while floating IPs need it). ``add_router_interface`` by
``subnet_id`` makes a ``network:router_interface`` port on the subnet's gateway IP, by
``port_id`` takes an existing port; ``remove_router_interface`` deletes that port (the fault
rules of kind ``router_interface`` apply to it as to a delete). Deleting a router with
interfaces answers 409 ``RouterInUse``; its gateway port goes with it.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud.context import Authenticated, Caller, CloudError, cloud_of
from convergence_simcloud.network_common import (
    bad_request,
    body_of,
    delete_faulted,
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
from convergence_simcloud.network_ports import _fixed_ips, make_port, port_not_found
from convergence_simcloud.network_quotas import check_quota
from convergence_simcloud.state import Record, SimCloud, new_id

router = APIRouter()
UPDATABLE = ("name", "description", "admin_state_up", "external_gateway_info", "routes",
             "tags")
GATEWAY = "network:router_gateway"
INTERFACE = "network:router_interface"


def router_not_found(router_id: str) -> CloudError:
    return not_found("RouterNotFound", "Router", router_id)


def bad_router(message: str) -> CloudError:
    return neutron_error(400, "BadRequest", f"Bad router request: {message}")


def show_router(router: Record) -> Record:
    return {k: v for k, v in router.items() if not k.startswith("_")} | {
        "tenant_id": router["project_id"]}


def interfaces(cloud: SimCloud, router_id: str) -> list[Record]:
    return [p for p in cloud.kind("port").values()
            if p["device_id"] == router_id and p["device_owner"] == INTERFACE]


def router_for(cloud: SimCloud, subnet_id: str, network_id: str) -> Record | None:
    """The router with an interface on ``subnet_id`` and its gateway on ``network_id``."""
    for found in sorted(cloud.kind("router").values(), key=lambda r: r["created_at"]):
        gateway = found.get("external_gateway_info") or {}
        if gateway.get("network_id") == network_id and any(
                ip["subnet_id"] == subnet_id for p in interfaces(cloud, found["id"])
                for ip in p["fixed_ips"]):
            return found
    return None


# -- the gateway ---------------------------------------------------------------------------

def _clear_gateway(cloud: SimCloud, router: Record) -> None:
    gateway = router.get("external_gateway_info")
    if not gateway:
        return
    if any(f.get("router_id") == router["id"] and f["floating_network_id"] ==
           gateway["network_id"] for f in cloud.kind("floatingip").values()):
        raise neutron_error(409, "RouterExternalGatewayInUseByFloatingIp",
                            f"Gateway cannot be updated for router {router['id']}, since a "
                            f"gateway to external network {gateway['network_id']} is "
                            "required by one or more floating IPs.")
    for port in [p for p in cloud.kind("port").values()
                 if p["device_id"] == router["id"] and p["device_owner"] == GATEWAY]:
        del cloud.kind("port")[port["id"]]
    router["external_gateway_info"] = None


def _set_gateway(cloud: SimCloud, who: Caller, router: Record, info: Any) -> None:
    """Give ``router`` the gateway ``info`` asks for (None or {}: no gateway)."""
    if not info:
        _clear_gateway(cloud, router)
        return
    if not isinstance(info, dict) or not info.get("network_id"):
        raise bad_request("Invalid input for external_gateway_info: a network_id is required.")
    network_id = str(info["network_id"])
    network = get_visible(cloud, who, "network", network_id,
                          not_found("NetworkNotFound", "Network", network_id))
    if not network.get("router:external"):
        raise bad_router(f"Network {network_id} is not a valid external network.")
    snat = bool(info.get("enable_snat", True))
    current = router.get("external_gateway_info") or {}
    asked = info.get("external_fixed_ips")
    if current.get("network_id") == network_id and not asked:
        current["enable_snat"] = snat
        return
    _clear_gateway(cloud, router)
    fixed = _fixed_ips(cloud, network, asked or None)
    port = make_port(cloud, "", network, fixed, {
        "device_owner": GATEWAY, "device_id": router["id"], "name": ""}, mac_address())
    port["status"] = "ACTIVE"
    router["external_gateway_info"] = {"network_id": network_id, "enable_snat": snat,
                                       "external_fixed_ips": [dict(ip) for ip in fixed]}


def _check_routes(cloud: SimCloud, found: Record, routes: Any) -> None:
    """400 unless every route is a ``destination``/``nexthop`` pair whose next hop is on a
    subnet the router is connected to (an interface or its gateway)."""
    if not isinstance(routes, list) or not all(
            isinstance(r, dict) and set(r) == {"destination", "nexthop"} for r in routes):
        raise bad_request(f"Invalid input for routes: {routes!r} is not a list of "
                          "destination/nexthop pairs.")
    connected = _attached_subnets(cloud, found["id"]) | {
        ip["subnet_id"] for ip in (found.get("external_gateway_info") or {}).get(
            "external_fixed_ips", [])}
    cidrs = [ipaddress.ip_network(cloud.kind("subnet")[s]["cidr"]) for s in connected
             if s in cloud.kind("subnet")]
    for route in routes:
        try:
            ipaddress.ip_network(route["destination"], strict=False)
            hop = ipaddress.ip_address(route["nexthop"])
        except ValueError:
            raise bad_request(f"Invalid input for routes: {route!r}.") from None
        if not any(hop in cidr for cidr in cidrs):
            raise neutron_error(400, "InvalidRoutes",
                                f"Invalid format for routes: {routes}, the nexthop is not "
                                "connected with router")


# -- the API -------------------------------------------------------------------------------

@router.get("/routers")
def list_routers(request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return list_kind(cloud, request, who, "router", show_router)


@router.post("/routers", status_code=201)
async def create_router(request: Request, who: Authenticated) -> dict[str, Any]:
    body = await body_of(request, "router")
    cloud = cloud_of(request)
    with cloud.locked():
        project_id = project_of(who, body)
        check_quota(cloud, "router", project_id,
                    {"name": body.get("name", ""), "tags": body.get("tags") or []})
        made = new_record(
            cloud, project_id, id=new_id(), name=body.get("name", ""), status="ACTIVE",
            admin_state_up=bool(body.get("admin_state_up", True)),
            external_gateway_info=None, routes=[],
            distributed=False, ha=False, flavor_id=None, availability_zones=["nova"],
            availability_zone_hints=list(body.get("availability_zone_hints") or []),
            enable_ndp_proxy=False)
        made["description"] = body.get("description", "")
        made["tags"] = list(body.get("tags") or [])
        _set_gateway(cloud, who, made, body.get("external_gateway_info"))
        cloud.kind("router")[made["id"]] = made
        shown = show_router(made)
    cloud.changed()
    return {"router": shown}


@router.get("/routers/{router_id}")
def show_router_route(router_id: str, request: Request, who: Authenticated,
                      ) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"router": show_router(get_visible(cloud, who, "router", router_id,
                                                  router_not_found(router_id)))}


@router.put("/routers/{router_id}")
async def update_router(router_id: str, request: Request, who: Authenticated,
                        ) -> dict[str, Any]:
    body = await body_of(request, "router")
    cloud = cloud_of(request)
    with cloud.locked():
        found = get_owned(cloud, who, "router", router_id, router_not_found(router_id))
        if "routes" in body:
            _check_routes(cloud, found, body["routes"])
        if "external_gateway_info" in body:
            _set_gateway(cloud, who, found, body.pop("external_gateway_info"))
        updated(found, body, UPDATABLE)
        touch(cloud, found)
        shown = show_router(found)
    cloud.changed()
    return {"router": shown}


@router.delete("/routers/{router_id}", status_code=204)
def delete_router(router_id: str, request: Request, who: Authenticated) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        found = get_owned(cloud, who, "router", router_id, router_not_found(router_id))
        if interfaces(cloud, router_id):
            raise neutron_error(409, "RouterInUse", f"Router {router_id} still has ports")
        if not delete_faulted(cloud, "router", found):
            _clear_gateway(cloud, found)
            del cloud.kind("router")[router_id]
    cloud.changed()
    return Response(status_code=204)


# -- interfaces ----------------------------------------------------------------------------

def _interface_answer(found: Record, port: Record) -> dict[str, Any]:
    subnet_ids = [ip["subnet_id"] for ip in port["fixed_ips"]]
    return {"id": found["id"], "tenant_id": found["project_id"],
            "project_id": found["project_id"], "port_id": port["id"],
            "network_id": port["network_id"], "subnet_id": subnet_ids[0] if subnet_ids else None,
            "subnet_ids": subnet_ids}


def _attached_subnets(cloud: SimCloud, router_id: str) -> set[str]:
    return {ip["subnet_id"] for p in interfaces(cloud, router_id) for ip in p["fixed_ips"]}


def _by_subnet(cloud: SimCloud, who: Caller, found: Record, subnet_id: str) -> Record:
    subnet = get_visible(cloud, who, "subnet", subnet_id,
                         not_found("SubnetNotFound", "Subnet", subnet_id))
    if not subnet.get("gateway_ip"):
        raise bad_router("Subnet for router interface must have a gateway IP.")
    if subnet_id in _attached_subnets(cloud, found["id"]):
        raise bad_router(f"Router already has a port on subnet {subnet_id}.")
    gateway_ip = subnet["gateway_ip"]
    if gateway_ip in used_addresses(cloud, subnet_id):
        raise neutron_error(409, "IpAddressInUse",
                            f"Unable to complete operation for network "
                            f"{subnet['network_id']}. The IP address {gateway_ip} is in use.")
    network = cloud.kind("network")[subnet["network_id"]]
    port = make_port(cloud, subnet["project_id"], network,
                     [{"subnet_id": subnet_id, "ip_address": gateway_ip}],
                     {"device_owner": INTERFACE, "device_id": found["id"], "name": ""},
                     mac_address())
    port["status"] = "ACTIVE"
    return port


def _by_port(cloud: SimCloud, who: Caller, found: Record, port_id: str) -> Record:
    port = get_owned(cloud, who, "port", port_id, port_not_found(port_id))
    if port["device_id"] or port["device_owner"]:
        raise neutron_error(409, "PortInUse",
                            f"Unable to complete operation on port {port_id} for network "
                            f"{port['network_id']}. Port already has an attached device "
                            f"{port['device_id']}.")
    if not port["fixed_ips"]:
        raise bad_router("Router port must have at least one fixed IP.")
    attached = _attached_subnets(cloud, found["id"])
    for ip in port["fixed_ips"]:
        if ip["subnet_id"] in attached:
            raise bad_router(f"Router already has a port on subnet {ip['subnet_id']}.")
    port.update({"device_owner": INTERFACE, "device_id": found["id"], "status": "ACTIVE"})
    touch(cloud, port)
    return port


async def _interface_body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise bad_request("Malformed request body.") from None
    if not isinstance(body, dict):
        raise bad_request("Malformed request body.")
    if body.get("subnet_id") and body.get("port_id"):
        raise bad_router("Cannot specify both subnet-id and port-id")
    if not body.get("subnet_id") and not body.get("port_id"):
        raise bad_router("Either subnet_id or port_id must be specified")
    return body


@router.put("/routers/{router_id}/add_router_interface")
async def add_interface(router_id: str, request: Request, who: Authenticated,
                        ) -> dict[str, Any]:
    body = await _interface_body(request)
    cloud = cloud_of(request)
    with cloud.locked():
        found = get_owned(cloud, who, "router", router_id, router_not_found(router_id))
        port = (_by_port(cloud, who, found, str(body["port_id"])) if body.get("port_id")
                else _by_subnet(cloud, who, found, str(body["subnet_id"])))
        touch(cloud, found)
        answer = _interface_answer(found, port)
    cloud.changed()
    return answer


def _in_use(cloud: SimCloud, found: Record, port: Record) -> None:
    """409 when floating IPs or routes of the router need the interface ``port``."""
    subnets = {ip["subnet_id"] for ip in port["fixed_ips"]}
    for subnet_id in subnets:
        subnet = cloud.kind("subnet").get(subnet_id)
        if subnet and any(ipaddress.ip_address(r["nexthop"]) in
                          ipaddress.ip_network(subnet["cidr"]) for r in found["routes"]):
            raise neutron_error(409, "RouterInterfaceInUseByRoute",
                                f"Router interface for subnet {subnet_id} on router "
                                f"{found['id']} cannot be deleted, as it is required by one "
                                "or more routes.")
    for fip in cloud.kind("floatingip").values():
        if fip.get("router_id") != found["id"] or not fip.get("fixed_ip_address"):
            continue
        for subnet_id in subnets:
            subnet = cloud.kind("subnet").get(subnet_id)
            if subnet and ipaddress.ip_address(fip["fixed_ip_address"]) in \
                    ipaddress.ip_network(subnet["cidr"]):
                raise neutron_error(409, "RouterInterfaceInUseByFloatingIP",
                                    f"Router interface for subnet {subnet_id} on router "
                                    f"{found['id']} cannot be deleted, as it is required "
                                    "by one or more floating IPs.")


@router.put("/routers/{router_id}/remove_router_interface")
async def remove_interface(router_id: str, request: Request, who: Authenticated,
                           ) -> dict[str, Any]:
    body = await _interface_body(request)
    cloud = cloud_of(request)
    with cloud.locked():
        found = get_owned(cloud, who, "router", router_id, router_not_found(router_id))
        ports = interfaces(cloud, router_id)
        if body.get("port_id"):
            port_id = str(body["port_id"])
            port = next((p for p in ports if p["id"] == port_id), None)
            if port is None:
                raise neutron_error(404, "RouterInterfaceNotFound",
                                    f"Router {router_id} does not have an interface with "
                                    f"id {port_id}")
        else:
            subnet_id = str(body["subnet_id"])
            port = next((p for p in ports
                         if any(ip["subnet_id"] == subnet_id for ip in p["fixed_ips"])), None)
            if port is None:
                raise neutron_error(404, "RouterInterfaceNotFoundForSubnet",
                                    f"Router {router_id} has no interface on subnet "
                                    f"{subnet_id}")
        _in_use(cloud, found, port)
        # The fault rules see the interface as kind ``router_interface`` (its port's record).
        if not delete_faulted(cloud, "router_interface", port):
            del cloud.kind("port")[port["id"]]
        touch(cloud, found)
        answer = _interface_answer(found, port)
    cloud.changed()
    return answer
