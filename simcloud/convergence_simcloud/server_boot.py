"""Nova's server creation (``POST /servers``) in the simulated cloud: validation, quota and the
Neutron ports a new server gets.

Callers: ``convergence_simcloud.app`` includes :data:`router` under ``/compute/v2.1``; the
route checks the request as Nova does and answers with Nova's errors (an unknown flavor or
image, key pair, network, port or availability zone: 400; a port already bound elsewhere: 409;
over the ``instances``/``cores``/``ram`` quota of ``compute_quotas.quota_of`` or under a
``quota_exceeded`` fault rule: 403), then stores a server in BUILD (``vm_state`` building,
``task_state`` spawning) that ``convergence_simcloud.servers.advance`` turns ACTIVE after the
flavor's build seconds. Networks are a list of ``{uuid}``, ``{port}`` or ``{uuid, fixed_ip}``,
or (2.37+, where they are required) ``"auto"`` and ``"none"``; Nova makes a port (device
owner ``compute:<az>``) for each network it is given and takes over each port it is given.
``min_count``/``max_count`` make several servers (``name-1``, ``name-2``...) as far as the quota
allows; ``block_device_mapping_v2`` is ``convergence_simcloud.server_bdm``'s.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
import uuid
from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud import faults, server_bdm, server_views
from convergence_simcloud.compute import Microversion, nova_error
from convergence_simcloud.compute_quotas import quota_of
from convergence_simcloud.context import Authenticated, Caller, cloud_of
from convergence_simcloud.network_common import allocate, mac_address, used_addresses
from convergence_simcloud.network_ports import make_port
from convergence_simcloud.network_secgroups import default_group
from convergence_simcloud.servers import (
    KIND,
    SERVICE,
    advance,
    bind_ports,
    set_state,
    sim,
    stamp,
)
from convergence_simcloud.state import Record, SimCloud

router = APIRouter()
Version = tuple[int, int]


def bad(message: str) -> Exception:
    return nova_error(400, message)


def invalid(field: str, value: Any, reason: str) -> Exception:
    """Nova's JSON-schema error."""
    return bad(f"Invalid input for field/attribute {field}. Value: {value}. {reason}")


async def request_body(request: Request, key: str) -> dict[str, Any]:
    try:
        payload = await request.json()
    except ValueError:
        raise bad("Malformed request body") from None
    found = payload.get(key) if isinstance(payload, dict) else None
    if not isinstance(found, dict):
        raise invalid(key, payload, f"'{key}' is a required property")
    return payload  # type: ignore[no-any-return]


def ref_id(ref: Any) -> str:
    """The id in a reference (an id or a URL ending with it)."""
    return str(ref).rstrip("/").rsplit("/", 1)[-1]


def flavor_of(cloud: SimCloud, ref: Any) -> Record:
    flavor = cloud.kind("flavor").get(ref_id(ref))
    if flavor is None:
        raise bad(f"Flavor {ref_id(ref)} could not be found.")
    return flavor


def image_of(cloud: SimCloud, who: Caller, ref: Any) -> Record:
    image = cloud.kind("image").get(ref_id(ref))
    if image is None or not (image["visibility"] in ("public", "community") or who.is_admin
                             or image["owner"] == who.project_id):
        raise bad("Can not find requested image")
    if image.get("status") != "active":
        raise bad(f"Image {image['id']} is not active.")
    return image


def check_fits(flavor: Record, image: Record) -> None:
    """Nova refuses a flavor too small for the image."""
    gib = 1024 ** 3
    if flavor["disk"] and image.get("min_disk", 0) > flavor["disk"]:
        raise bad(f"Flavor's disk is too small for requested image. Flavor disk is "
                  f"{flavor['disk'] * gib} bytes, minimum required by image is "
                  f"{image['min_disk'] * gib} bytes.")
    if flavor["disk"] and (image.get("size") or 0) > flavor["disk"] * gib:
        raise bad(f"Flavor's disk is too small for requested image. Flavor disk is "
                  f"{flavor['disk'] * gib} bytes, image is {image['size']} bytes.")
    if image.get("min_ram", 0) > flavor["ram"]:
        raise bad("Flavor's memory is too small for requested image.")


def check_metadata(cloud: SimCloud, project_id: str, metadata: Any,
                   field: str = "metadata") -> dict[str, str]:
    if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise invalid(field, metadata, "The metadata must be an object of strings.")
    for key, value in metadata.items():
        if not 1 <= len(key) <= 255 or len(value) > 255:
            raise invalid(field, metadata, "Keys are 1 to 255 and values 0 to 255 "
                                           "characters long.")
    allowed = quota_of(cloud, project_id).get("metadata_items", 128)
    if 0 <= allowed < len(metadata):
        raise nova_error(403, f"Maximum number of metadata items exceeds {allowed}")
    return dict(metadata)


def check_quota(cloud: SimCloud, project_id: str, flavor: Record, record: Record,
                low: int = 1, high: int = 1) -> int:
    """How many servers of ``flavor`` (``low`` to ``high``) the project's quota lets it make;
    403 when not even ``low`` fit (or a ``quota_exceeded`` rule says so)."""
    limits = quota_of(cloud, project_id)
    servers = [s for s in cloud.kind(KIND).values() if s["project_id"] == project_id]
    used = {"instances": len(servers),
            "cores": sum(int(s["flavor"]["vcpus"]) for s in servers),
            "ram": sum(int(s["flavor"]["ram"]) for s in servers)}
    each = {"instances": 1, "cores": int(flavor["vcpus"]), "ram": int(flavor["ram"])}
    asked = {k: v * low for k, v in each.items()}
    if faults.quota_rule(cloud, SERVICE, KIND, record) is not None:
        over = "instances"
        used["instances"] = max(used["instances"], limits.get("instances", 10))
    else:
        for count in range(high, low - 1, -1):
            if all(limits.get(k, -1) < 0 or used[k] + each[k] * count <= limits[k]
                   for k in each):
                return count
        over = next(k for k in ("instances", "cores", "ram")
                    if 0 <= limits.get(k, -1) < used[k] + asked[k])
    raise nova_error(403, f"Quota exceeded for {over}: Requested {asked[over]}, but already "
                          f"used {used[over]} of {limits.get(over, 10)} {over}")


def zone_of(cloud: SimCloud, name: Any) -> str:
    name = name or "nova"
    zone = cloud.kind("availability_zone").get(str(name).split(":", 1)[0])
    if zone is None or not zone.get("available", True):
        raise bad("The requested availability zone is not available")
    return str(zone["name"])


def keypair_of(cloud: SimCloud, who: Caller, name: Any) -> Record | None:
    if name is None:
        return None
    found = cloud.kind("keypair").get(f"{who.user_id}/{name}")
    if found is None:
        raise bad("Invalid key_name provided.")
    return found


def security_groups_of(cloud: SimCloud, project_id: str, asked: Any) -> list[Record]:
    if not asked:
        return [default_group(cloud, project_id)]
    found = []
    for entry in asked:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not name:
            raise invalid("security_groups", asked, "Each group is {'name': ...}.")
        if name == "default":
            found.append(default_group(cloud, project_id))
            continue
        group = next((g for g in cloud.kind("security_group").values()
                      if g["project_id"] == project_id and name in (g["name"], g["id"])),
                     None)
        if group is None:
            raise bad(f"Security group {name} not found for project {project_id}.")
        found.append(group)
    return found


# -- networks --------------------------------------------------------------------------------

def _uuid_like(value: str) -> bool:
    try:
        return uuid.UUID(value).hex == value.replace("-", "").lower()
    except ValueError:
        return False


def _network(cloud: SimCloud, who: Caller, network_id: str) -> Record:
    if not _uuid_like(network_id):
        raise bad(f"Bad networks format: network uuid is not in proper format ({network_id})")
    network = cloud.kind("network").get(network_id)
    if network is None or not (who.is_admin or network["project_id"] == who.project_id
                               or network.get("shared")):
        raise bad(f"Network {network_id} could not be found.")
    if network.get("router:external") and not network.get("shared") and not who.is_admin:
        raise nova_error(403, f"It is not allowed to create an interface on external network "
                              f"{network_id}")
    if not any(s["network_id"] == network_id for s in cloud.kind("subnet").values()):
        raise bad(f"Network {network_id} requires a subnet in order to boot instances on.")
    return network


def _available(cloud: SimCloud, project_id: str) -> list[Record]:
    """The networks a server gets without naming one: the project's and the shared private
    networks."""
    return sorted((n for n in cloud.kind("network").values()
                   if (n["project_id"] == project_id or n.get("shared"))
                   and not n.get("router:external")), key=lambda n: str(n["created_at"]))


def requested_networks(cloud: SimCloud, who: Caller, project_id: str, body: dict[str, Any],
                       version: Version) -> list[dict[str, Any]]:
    """What to plug the server into: ``[{"network": record, "fixed_ip"?} | {"port": record}]``
    (checked; nothing is made yet)."""
    if "networks" not in body:
        if version >= (2, 37):
            raise invalid("server", body, "'networks' is a required property")
        asked: Any = "auto"
    else:
        asked = body["networks"]
    if isinstance(asked, str):
        if ("networks" in body and version < (2, 37)) or asked not in ("auto", "none"):
            raise invalid("networks", asked, "'networks' must be a list or 'auto' or 'none'.")
        if asked == "none":
            return []
        networks = _available(cloud, project_id)
        if len(networks) > 1:
            raise nova_error(409, "More than one possible network found. Specify network "
                                  "ID(s) to select which one(s) to connect to.")
        if not networks:
            if "networks" not in body:
                return []
            raise bad(f"Unable to automatically allocate a network for project {project_id}")
        return [{"network": _network(cloud, who, networks[0]["id"])}]
    if not isinstance(asked, list):
        raise invalid("networks", asked, "'networks' must be a list.")
    found: list[dict[str, Any]] = []
    for entry in asked:
        if not isinstance(entry, dict):
            raise invalid("networks", asked, "Each network is an object.")
        if entry.get("port"):
            found.append({"port": _given_port(cloud, who, str(entry["port"]))})
        elif entry.get("uuid"):
            network = _network(cloud, who, str(entry["uuid"]))
            fixed = entry.get("fixed_ip")
            if fixed:
                found.append({"network": network, "fixed_ip": _fixed(cloud, network, fixed)})
            else:
                found.append({"network": network})
        else:
            raise bad("Bad networks format: network uuid is not in proper format ()")
    return found


def _given_port(cloud: SimCloud, who: Caller, port_id: str) -> Record:
    port = cloud.kind("port").get(port_id)
    if port is None or not (who.is_admin or port["project_id"] == who.project_id):
        raise bad(f"Port {port_id} could not be found.")
    if port.get("device_id"):
        raise nova_error(409, f"Port {port_id} is still in use.")
    return port


def _fixed(cloud: SimCloud, network: Record, address: Any) -> dict[str, str]:
    try:
        ip = ipaddress.ip_address(str(address))
    except ValueError:
        raise invalid("fixed_ip", address, "It is not a valid IP address.") from None
    for subnet in cloud.kind("subnet").values():
        if subnet["network_id"] == network["id"] and ip in ipaddress.ip_network(subnet["cidr"]):
            if str(ip) in used_addresses(cloud, subnet["id"]):
                holder = next((p.get("device_id") for p in cloud.kind("port").values()
                               if any(f["ip_address"] == str(ip) for f in p["fixed_ips"])), "")
                raise bad(f"Fixed IP address {ip} is already in use on instance {holder}.")
            return {"subnet_id": subnet["id"], "ip_address": str(ip)}
    raise bad(f"Fixed IP not found for address {ip}.")


def plug(cloud: SimCloud, server: Record, wanted: list[dict[str, Any]],
         groups: list[Record]) -> None:
    """Make the ports Nova makes and take over the ones it was given. Under the lock."""
    owner = f"compute:{server['availability_zone']}"
    made: list[str] = []
    for entry in wanted:
        if "port" in entry:
            port = entry["port"]
            port.update(device_id=server["id"], device_owner=owner)
            continue
        network = entry["network"]
        if "fixed_ip" in entry:
            fixed = [entry["fixed_ip"]]
        else:
            fixed = []
            subnets = sorted((s for s in cloud.kind("subnet").values()
                              if s["network_id"] == network["id"]),
                             key=lambda s: str(s["created_at"]))
            for subnet in subnets:
                address = allocate(cloud, subnet)
                if address is not None:
                    fixed = [{"subnet_id": subnet["id"], "ip_address": address}]
                    break
            if not fixed:
                raise nova_error(409, f"No more IP addresses available on network "
                                      f"{network['id']}.")
        port = make_port(cloud, server["project_id"], network, fixed,
                         {"device_id": server["id"], "device_owner": owner}, mac_address())
        port["security_groups"] = ([g["id"] for g in groups]
                                   if port["port_security_enabled"] else [])
        made.append(port["id"])
    sim(server)["nova_ports"] = made


# -- the route -------------------------------------------------------------------------------

def _hostname(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:63] or "server"


def new_server(cloud: SimCloud, who: Caller, body: dict[str, Any], version: Version,
               hints: dict[str, Any]) -> tuple[list[Record], str]:
    """Check the request and store the new servers (BUILD: one, or ``min_count`` to
    ``max_count``); the servers and their password."""
    name = body.get("name")
    if "name" not in body:
        raise invalid("server", body, "'name' is a required property")
    if not isinstance(name, str) or not 1 <= len(name.strip()) <= 255:
        raise invalid("name", name, "The name must be 1 to 255 characters long.")
    if "flavorRef" not in body:
        raise invalid("server", body, "'flavorRef' is a required property")
    project_id = str(who.project_id or "")
    flavor = flavor_of(cloud, body["flavorRef"])
    mappings: list[dict[str, Any]] = []
    local_image = None
    if body.get("block_device_mapping_v2"):
        mappings, local_image = server_bdm.parse(cloud, who, body["block_device_mapping_v2"])
    image: Record | None = None
    if body.get("imageRef") or local_image:
        image = image_of(cloud, who, body.get("imageRef") or local_image)
        check_fits(flavor, image)
    elif not any(m["boot"] for m in mappings):
        raise bad("Missing imageRef attribute")
    keypair = keypair_of(cloud, who, body.get("key_name"))
    zone = zone_of(cloud, body.get("availability_zone"))
    metadata = check_metadata(cloud, project_id, body.get("metadata") or {})
    description = body.get("description")
    if description is not None and version < (2, 19):
        raise invalid("server", body, "Additional properties are not allowed "
                                      "('description' was unexpected)")
    tags = body.get("tags") or []
    if tags and version < (2, 52):
        raise invalid("server", body, "Additional properties are not allowed "
                                      "('tags' was unexpected)")
    group = None
    if hints.get("group"):
        group = cloud.kind("server_group").get(str(hints["group"]))
        if group is None or group["project_id"] != project_id:
            raise bad(f"Instance group {hints['group']} could not be found.")
    groups = security_groups_of(cloud, project_id, body.get("security_groups"))
    wanted = requested_networks(cloud, who, project_id, body, version)
    low, high = _counts(body, wanted)
    if high > 1 and any(m["source"] == "volume" for m in mappings):
        raise bad("Cannot attach one or more volumes to multiple instances")
    reservation = f"r-{secrets.token_hex(4)}"
    template: Record = {
        "name": name, "project_id": project_id, "user_id": who.user_id, "metadata": metadata,
        "tags": [str(t) for t in tags], "description": description,
        "key_name": None if keypair is None else keypair["name"],
        "availability_zone": zone, "host": f"compute-{zone}",
        "flavor": {k: v for k, v in flavor.items() if k != "project_id"},
        "image": None if image is None else {"id": image["id"]},
        "accessIPv4": body.get("accessIPv4") or "", "accessIPv6": body.get("accessIPv6") or "",
        "OS-DCF:diskConfig": body.get("OS-DCF:diskConfig") or "MANUAL",
        "config_drive": "True" if body.get("config_drive") else "",
        "user_data": body.get("user_data"), "locked": False, "reservation_id": reservation,
        "OS-SRV-USG:launched_at": None}
    made = check_quota(cloud, project_id, flavor, template, low, high)
    servers = []
    for index in range(1, made + 1):
        server = _store(cloud, template, flavor, f"{name}-{index}" if made > 1 else name)
        sim(server)["security_groups"] = [g["id"] for g in groups]
        plug(cloud, server, wanted, groups)
        bind_ports(cloud, server)
        if mappings:
            server_bdm.attach(cloud, server, mappings)
        if group is not None:
            group["members"] = [*(group.get("members") or []), server["id"]]
        advance(cloud, server)
        servers.append(server)
    password = str(body.get("adminPass") or secrets.token_urlsafe(9))
    return servers, password


def _counts(body: dict[str, Any], wanted: list[dict[str, Any]]) -> tuple[int, int]:
    """``min_count`` and ``max_count`` (Nova's multiple create), checked."""
    counts = []
    for key in ("min_count", "max_count"):
        raw = body.get(key, 1)
        try:
            value = int(raw)
        except (TypeError, ValueError):
            raise invalid(key, raw, f"'{raw}' is not of type 'integer', 'string'") from None
        if value < 1:
            raise invalid(key, raw, f"{value} is less than the minimum of 1")
        counts.append(value)
    low, high = counts[0], max(counts[1], 1 if "max_count" in body else counts[0])
    if low > high:
        raise bad("min_count must be <= max_count")
    if high > 1 and any("port" in w for w in wanted):
        raise bad("Unable to launch multiple instances with a single configured port ID. "
                  "Please launch your instance one by one with different ports.")
    if high > 1 and any("fixed_ip" in w for w in wanted):
        raise bad("max_count cannot be greater than 1 if an fixed_ip is specified.")
    return low, high


def _store(cloud: SimCloud, template: Record, flavor: Record, name: str) -> Record:
    """Store one new server (BUILD) made from the request's ``template``."""
    now = cloud.now()
    seq = max((int(sim(s).get("seq", 0)) for s in cloud.kind(KIND).values()), default=0) + 1
    server: Record = {
        **template, "id": str(uuid.uuid4()), "name": name, "created": stamp(now),
        "updated": stamp(now), "metadata": dict(template["metadata"]),
        "tags": list(template["tags"]), "instance_name": f"instance-{seq:08x}",
        "hostname": _hostname(name), "status": "BUILD",
        "OS-EXT-STS:vm_state": "building", "OS-EXT-STS:task_state": "spawning",
        "OS-EXT-STS:power_state": 0,
        "_sim": {"made_at": now, "seq": seq, "flavor_id": flavor["id"],
                 "build_until": now + cloud.options.server_build_seconds(flavor),
                 "nova_ports": []}}
    set_state(cloud, server, "building", "spawning", 0)
    cloud.kind(KIND)[server["id"]] = server
    return server


@router.post("/servers", status_code=202)
async def create_server(request: Request, response: Response, who: Authenticated,
                        version: Microversion) -> dict[str, Any]:
    payload = await request_body(request, "server")
    hints = payload.get("OS-SCH-HNT:scheduler_hints") or payload.get("os:scheduler_hints") or {}
    cloud = cloud_of(request)
    with cloud.locked():
        servers, password = new_server(cloud, who, payload["server"], version, hints)
        server = servers[0]
        groups = [{"name": cloud.kind("security_group")[g]["name"]}
                  for g in sim(server)["security_groups"]
                  if g in cloud.kind("security_group")]
    cloud.changed()
    links = server_views.links(request, server["id"])
    body = {"id": server["id"], "links": links,
            "OS-DCF:diskConfig": server["OS-DCF:diskConfig"], "security_groups": groups,
            "adminPass": password}
    response.headers["Location"] = links[0]["href"]
    if payload["server"].get("return_reservation_id"):
        return {"reservation_id": server["reservation_id"]}
    return {"server": body}
