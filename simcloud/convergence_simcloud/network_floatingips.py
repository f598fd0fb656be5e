"""Neutron's floating IPs in the simulated cloud: addresses from an external network's pool.

Callers: ``convergence_simcloud.network`` includes :data:`router` under ``/network/v2.0``;
Nova's server views read the ``floatingip`` records (``port_id``, ``floating_ip_address``).
A floating IP takes an address from its ``floating_network_id``'s subnet (400 if the network
is not external, 409 ``IpAddressGenerationFailure`` when the pool is exhausted) held by a
``network:floatingip`` port. Associating it with a port (``port_id``, optionally
``fixed_ip_address``) needs a router with an interface on the fixed IP's subnet and its
gateway on the floating network (else 404 ``ExternalGatewayForFloatingIPNotFound``); it is then
``ACTIVE`` with ``router_id`` filled in, ``DOWN`` when not associated. Deleting it frees the
address; deleting the port it is associated with disassociates it.
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
)
from convergence_simcloud.network_ports import _fixed_ips, make_port, port_not_found
from convergence_simcloud.network_quotas import check_quota
from convergence_simcloud.network_routers import router_for
from convergence_simcloud.state import Record, SimCloud, new_id

router = APIRouter()
UPDATABLE = ("description", "port_id", "fixed_ip_address", "qos_policy_id", "tags")
OWNER = "network:floatingip"


def fip_not_found(fip_id: str) -> CloudError:
    return not_found("FloatingIPNotFound", "Floating IP", fip_id)


def bad_fip(message: str) -> CloudError:
    return neutron_error(400, "BadRequest", f"Bad floatingip request: {message}")


def show_fip(cloud: SimCloud, fip: Record) -> Record:
    port = cloud.kind("port").get(fip.get("port_id") or "")
    details = None if port is None else {
        k: port[k] for k in ("name", "network_id", "mac_address", "admin_state_up", "status",
                             "device_id", "device_owner")}
    return {**fip, "tenant_id": fip["project_id"], "port_details": details}


def _fixed_ip(port: Record, asked: Any) -> Record:
    """The port's fixed IP a floating IP maps to: ``asked``, or its only IPv4 one."""
    if not port["fixed_ips"]:
        raise bad_fip(f"Port {port['id']} does not have fixed ip.")
    if asked:
        found: Record | None = next(
            (ip for ip in port["fixed_ips"] if ip["ip_address"] == asked), None)
        if found is None:
            raise bad_fip(f"Port {port['id']} does not have fixed ip {asked}.")
        return found
    v4: list[Record] = [ip for ip in port["fixed_ips"]
                        if ipaddress.ip_address(ip["ip_address"]).version == 4]
    if len(v4) != 1:
        raise bad_fip(f"Port {port['id']} has multiple fixed IPv4 addresses.  Must provide a "
                      "specific IPv4 address when assigning a floating IP." if v4 else
                      f"Port {port['id']} does not have fixed ip.")
    return v4[0]


def _associate(cloud: SimCloud, who: Caller, fip: Record, port_id: Any,
               fixed_address: Any) -> None:
    """Map ``fip`` to the port (None: disassociate). Under the lock."""
    if not port_id:
        fip.update({"port_id": None, "fixed_ip_address": None, "router_id": None,
                    "status": "DOWN"})
        return
    port = get_owned(cloud, who, "port", str(port_id), port_not_found(str(port_id)))
    if port["device_owner"].startswith("network:"):
        raise bad_fip(f"Port {port['id']} has owner {port['device_owner']} and therefore "
                      "cannot be assigned a floating IP.")
    fixed = _fixed_ip(port, fixed_address)
    network_id = fip["floating_network_id"]
    for other in cloud.kind("floatingip").values():
        if other["id"] != fip["id"] and other.get("port_id") == port["id"] and \
                other.get("fixed_ip_address") == fixed["ip_address"]:
            raise neutron_error(409, "FloatingIPPortAlreadyAssociated",
                                f"Cannot associate floating IP {fip['floating_ip_address']} "
                                f"({fip['id']}) with port {port['id']} using fixed IP "
                                f"{fixed['ip_address']}, as that fixed IP already has a "
                                f"floating IP on external network {network_id}.")
    gateway = router_for(cloud, fixed["subnet_id"], network_id)
    if gateway is None:
        raise neutron_error(404, "ExternalGatewayForFloatingIPNotFound",
                            f"External network {network_id} is not reachable from subnet "
                            f"{fixed['subnet_id']}.  Therefore, cannot associate Port "
                            f"{port['id']} with a Floating IP.")
    fip.update({"port_id": port["id"], "fixed_ip_address": fixed["ip_address"],
                "router_id": gateway["id"], "status": "ACTIVE"})


@router.get("/floatingips")
def list_fips(request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return list_kind(cloud, request, who, "floatingip", lambda f: show_fip(cloud, f))


@router.post("/floatingips", status_code=201)
async def create_fip(request: Request, who: Authenticated) -> dict[str, Any]:
    body = await body_of(request, "floatingip")
    cloud = cloud_of(request)
    with cloud.locked():
        network_id = str(body.get("floating_network_id") or "")
        if not network_id:
            raise bad_request("Invalid input for floating_network_id: a network id is "
                              "required.")
        network = get_visible(cloud, who, "network", network_id,
                              not_found("NetworkNotFound", "Network", network_id))
        if not network.get("router:external"):
            raise bad_fip(f"Network {network_id} is not a valid external network.")
        project_id = project_of(who, body)
        check_quota(cloud, "floatingip", project_id, {"tags": body.get("tags") or []})
        asked: list[dict[str, str]] | None = None
        if body.get("floating_ip_address") or body.get("subnet_id"):
            entry = {"subnet_id": body.get("subnet_id"),
                     "ip_address": body.get("floating_ip_address")}
            asked = [{k: str(v) for k, v in entry.items() if v}]
        fixed = _fixed_ips(cloud, network, asked)
        if not fixed:
            raise neutron_error(409, "IpAddressGenerationFailure",
                                f"No more IP addresses available on network {network_id}.")
        fip = new_record(cloud, project_id, id=new_id(),
                         floating_ip_address=fixed[0]["ip_address"],
                         floating_network_id=network_id, subnet_id=None, port_id=None,
                         fixed_ip_address=None, router_id=None, status="DOWN",
                         dns_domain="", dns_name="", qos_policy_id=None,
                         port_forwardings=[])
        fip["description"] = body.get("description", "")
        fip["tags"] = list(body.get("tags") or [])
        _associate(cloud, who, fip, body.get("port_id"), body.get("fixed_ip_address"))
        port = make_port(cloud, "", network, fixed,
                         {"device_owner": OWNER, "device_id": fip["id"], "name": ""},
                         mac_address())
        port["status"] = "N/A"
        cloud.kind("floatingip")[fip["id"]] = fip
        shown = show_fip(cloud, fip)
    cloud.changed()
    return {"floatingip": shown}


@router.get("/floatingips/{fip_id}")
def show_fip_route(fip_id: str, request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"floatingip": show_fip(cloud, get_visible(cloud, who, "floatingip", fip_id,
                                                          fip_not_found(fip_id)))}


@router.put("/floatingips/{fip_id}")
async def update_fip(fip_id: str, request: Request, who: Authenticated) -> dict[str, Any]:
    body = await body_of(request, "floatingip")
    cloud = cloud_of(request)
    with cloud.locked():
        fip = get_owned(cloud, who, "floatingip", fip_id, fip_not_found(fip_id))
        updated(dict(fip), body, UPDATABLE)
        if "port_id" in body or "fixed_ip_address" in body:
            _associate(cloud, who, fip, body.pop("port_id", fip.get("port_id")),
                       body.pop("fixed_ip_address", None))
        body.pop("fixed_ip_address", None)
        fip.update(body)
        touch(cloud, fip)
        shown = show_fip(cloud, fip)
    cloud.changed()
    return {"floatingip": shown}


@router.delete("/floatingips/{fip_id}", status_code=204)
def delete_fip(fip_id: str, request: Request, who: Authenticated) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        fip = get_owned(cloud, who, "floatingip", fip_id, fip_not_found(fip_id))
        if not delete_faulted(cloud, "floatingip", fip):
            for port in [p for p in cloud.kind("port").values()
                         if p["device_id"] == fip_id and p["device_owner"] == OWNER]:
                del cloud.kind("port")[port["id"]]
            del cloud.kind("floatingip")[fip_id]
    cloud.changed()
    return Response(status_code=204)
