"""How Nova shows a server, microversion by microversion (2.1 to 2.61), in the simulated cloud.

Callers: ``convergence_simcloud.server_routes`` (list, show, update), ``server_boot`` (the
create answer) and ``server_actions`` (the rebuild answer) turn a stored server record into
Nova's JSON here. :func:`detail` is the full view: the extended attributes of 2.3, ``locked``
of 2.9, ``host_status`` of 2.16 (admins only, as the ``OS-EXT-SRV-ATTR:*`` fields),
``description`` of 2.19, ``tags`` of 2.26 and the embedded flavor of 2.47 (before it, a flavor
reference); the addresses are computed from the Neutron ports bound to the server and the
floating IPs on those ports, grouped by network name. :func:`summary` is the list entry of
``GET /servers`` (``id``, ``name``, ``links``). Keys that start with ``_`` are never shown.
"""

from __future__ import annotations

import hashlib
import ipaddress
from typing import Any

from fastapi import Request

from convergence_simcloud import server_bdm
from convergence_simcloud.network_ports import ports_of_device
from convergence_simcloud.state import Record, SimCloud

Version = tuple[int, int]
_PROGRESS = ("ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING")


def base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def links(request: Request, server_id: str) -> list[dict[str, str]]:
    base = base_url(request)
    return [{"rel": "self", "href": f"{base}/compute/v2.1/servers/{server_id}"},
            {"rel": "bookmark", "href": f"{base}/compute/servers/{server_id}"}]


def summary(request: Request, server: Record) -> dict[str, Any]:
    return {"id": server["id"], "name": server["name"], "links": links(request, server["id"])}


ByDevice = dict[str, list[Record]]


def ports_by_device(cloud: SimCloud) -> ByDevice:
    """Every port by its ``device_id``: one pass over the ports for a whole listing, where
    asking per server would make a list of N servers cost N passes. Under the lock."""
    found: ByDevice = {}
    for port in cloud.kind("port").values():
        if port["device_id"]:
            found.setdefault(port["device_id"], []).append(port)
    return found


def _ports(cloud: SimCloud, server: Record, by_device: ByDevice | None = None) -> list[Record]:
    ports = ports_of_device(cloud, server["id"]) if by_device is None \
        else by_device.get(server["id"], [])
    return sorted(ports, key=lambda p: (str(p.get("created_at")), p["id"]))


def addresses(cloud: SimCloud, server: Record,
              by_device: ByDevice | None = None) -> dict[str, list[dict[str, Any]]]:
    """The server's addresses by network name: fixed IPs of its ports, then their floating
    IPs (``by_device``: the ports already indexed, for a listing)."""
    found: dict[str, list[dict[str, Any]]] = {}
    fips = list(cloud.kind("floatingip").values())
    for port in _ports(cloud, server, by_device):
        network = cloud.kind("network").get(port["network_id"]) or {}
        rows = found.setdefault(str(network.get("name") or port["network_id"]), [])
        for fixed in port["fixed_ips"]:
            rows.append({"version": ipaddress.ip_address(fixed["ip_address"]).version,
                         "addr": fixed["ip_address"], "OS-EXT-IPS:type": "fixed",
                         "OS-EXT-IPS-MAC:mac_addr": port["mac_address"]})
        for fip in fips:
            if fip.get("port_id") == port["id"] and fip.get("floating_ip_address"):
                rows.append({"version": ipaddress.ip_address(
                                 fip["floating_ip_address"]).version,
                             "addr": fip["floating_ip_address"],
                             "OS-EXT-IPS:type": "floating",
                             "OS-EXT-IPS-MAC:mac_addr": port["mac_address"]})
    return found


def _plain(found: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Addresses without the ``OS-EXT-IPS`` extensions (the update and rebuild answers)."""
    return {name: [{"addr": a["addr"], "version": a["version"]} for a in rows]
            for name, rows in found.items()}


def _security_groups(cloud: SimCloud, server: Record,
                     by_device: ByDevice | None = None) -> list[dict[str, str]]:
    names: list[str] = []
    for port in _ports(cloud, server, by_device):
        for group_id in port.get("security_groups") or []:
            group = cloud.kind("security_group").get(group_id)
            name = str(group["name"]) if group else group_id
            if name not in names:
                names.append(name)
    return [{"name": n} for n in names]


def host_id(server: Record) -> str:
    """Nova's ``hostId``: a hash of the project and the host ("" without a host)."""
    if not server.get("host"):
        return ""
    return hashlib.sha224((server["project_id"] + server["host"]).encode()).hexdigest()


def flavor_view(request: Request, server: Record, version: Version) -> dict[str, Any]:
    flavor = server["flavor"]
    if version >= (2, 47):
        return {"vcpus": flavor["vcpus"], "ram": flavor["ram"], "disk": flavor["disk"],
                "ephemeral": flavor.get("ephemeral", 0), "swap": flavor.get("swap", 0),
                "original_name": flavor["name"],
                "extra_specs": dict(flavor.get("extra_specs") or {})}
    return {"id": flavor["id"],
            "links": [{"rel": "bookmark",
                       "href": f"{base_url(request)}/compute/flavors/{flavor['id']}"}]}


def image_view(request: Request, server: Record) -> Any:
    image = server.get("image")
    if not image:
        return ""
    return {"id": image["id"],
            "links": [{"rel": "bookmark",
                       "href": f"{base_url(request)}/compute/images/{image['id']}"}]}


def _volumes(cloud: SimCloud, server: Record, version: Version) -> list[dict[str, Any]]:
    from convergence_simcloud import volume_records  # Cinder's records, beside this module

    found = []
    for volume in volume_records.attached_volumes(cloud, server["id"]):
        row: dict[str, Any] = {"id": volume["id"]}
        if version >= (2, 3):
            row["delete_on_termination"] = server_bdm.deletes_with(server, volume["id"])
        found.append(row)
    return found


def _fault(server: Record, is_admin: bool) -> dict[str, Any] | None:
    fault = server.get("fault")
    if not fault or server["status"] not in ("ERROR", "DELETED"):
        return None
    shown = {k: v for k, v in fault.items() if k != "details"}
    if is_admin or fault.get("code") != 500:
        shown["details"] = fault.get("details", "")
    return shown


def detail(cloud: SimCloud, request: Request, server: Record, version: Version,
           is_admin: bool, extended: bool = True,
           by_device: ByDevice | None = None) -> dict[str, Any]:
    """The server's full view at ``version``; ``extended=False``: without the extension
    attributes and with plain addresses (the answer of an update or a rebuild before 2.75);
    ``by_device``: the ports indexed once for a listing (:func:`ports_by_device`)."""
    if by_device is None:
        by_device = {server["id"]: ports_of_device(cloud, server["id"])}
    body: dict[str, Any] = {
        "id": server["id"], "name": server["name"], "status": server["status"],
        "tenant_id": server["project_id"], "user_id": server["user_id"],
        "metadata": dict(server.get("metadata") or {}), "hostId": host_id(server),
        "image": image_view(request, server), "flavor": flavor_view(request, server, version),
        "created": server["created"], "updated": server["updated"],
        "addresses": addresses(cloud, server, by_device) if extended
        else _plain(addresses(cloud, server, by_device)),
        "accessIPv4": server.get("accessIPv4", ""), "accessIPv6": server.get("accessIPv6", ""),
        "links": links(request, server["id"]), "OS-DCF:diskConfig": server["OS-DCF:diskConfig"]}
    if server["status"] in _PROGRESS:
        body["progress"] = 0
    fault = _fault(server, is_admin)
    if fault is not None:
        body["fault"] = fault
    if version >= (2, 9):
        body["locked"] = bool(server.get("locked", False))
    if version >= (2, 19):
        body["description"] = server.get("description")
    if version >= (2, 26):
        body["tags"] = list(server.get("tags") or [])
    if not extended:
        return body
    body.update({
        "OS-EXT-AZ:availability_zone": server["availability_zone"],
        "config_drive": server.get("config_drive", ""), "key_name": server.get("key_name"),
        "OS-SRV-USG:launched_at": server.get("OS-SRV-USG:launched_at"),
        "OS-SRV-USG:terminated_at": None,
        "OS-EXT-STS:task_state": server["OS-EXT-STS:task_state"],
        "OS-EXT-STS:vm_state": server["OS-EXT-STS:vm_state"],
        "OS-EXT-STS:power_state": server["OS-EXT-STS:power_state"],
        "os-extended-volumes:volumes_attached": _volumes(cloud, server, version)})
    groups = _security_groups(cloud, server, by_device)
    if groups:
        body["security_groups"] = groups
    if is_admin:
        body.update({"OS-EXT-SRV-ATTR:host": server.get("host"),
                     "OS-EXT-SRV-ATTR:instance_name": server["instance_name"],
                     "OS-EXT-SRV-ATTR:hypervisor_hostname": server.get("host")})
        if version >= (2, 3):
            body.update({"OS-EXT-SRV-ATTR:reservation_id": server["reservation_id"],
                         "OS-EXT-SRV-ATTR:launch_index": 0,
                         "OS-EXT-SRV-ATTR:hostname": server["hostname"],
                         "OS-EXT-SRV-ATTR:kernel_id": "", "OS-EXT-SRV-ATTR:ramdisk_id": "",
                         "OS-EXT-SRV-ATTR:root_device_name": "/dev/vda",
                         "OS-EXT-SRV-ATTR:user_data": server.get("user_data")})
        if version >= (2, 16):
            body["host_status"] = "UP" if server.get("host") else ""
    return body
