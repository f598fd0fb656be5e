"""The shapes of Neutron's networks and subnets as plain records, and the seeded networks.

Callers: ``convergence_simcloud.network`` builds the networks and subnets it creates with
:func:`network_record` and :func:`subnet_record`; ``convergence_simcloud.state.SimCloud``
calls :func:`seed_objects` when it applies a seed (the seed's networks, ``public`` by default,
each with one subnet, their ids derived from their names so a saved state keeps them). It
imports nothing of the cloud's state, so ``state`` may import it without a cycle. A bad
``cidr``, ``ip_version``, gateway or pool raises :class:`InvalidInput` (the routes answer 400).
"""

from __future__ import annotations

import datetime
import ipaddress
import uuid
from collections.abc import Callable
from typing import Any

from convergence_simcloud.seed import Seed

Record = dict[str, Any]
Net = ipaddress.IPv4Network | ipaddress.IPv6Network


class InvalidInput(ValueError):
    """Input Neutron refuses with 400."""


def stamp(when: float) -> str:
    return datetime.datetime.fromtimestamp(when, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def base_record(project_id: str, now: float, **fields: Any) -> Record:
    """The fields every Neutron object has, then ``fields``."""
    when = stamp(now)
    return {"project_id": project_id, "description": "", "tags": [], "created_at": when,
            "updated_at": when, "revision_number": 0, **fields}


def network_record(object_id: str, project_id: str, now: float,
                   body: dict[str, Any]) -> Record:
    return base_record(
        project_id, now, id=object_id, name=body.get("name", ""), status="ACTIVE",
        admin_state_up=bool(body.get("admin_state_up", True)),
        shared=bool(body.get("shared", False)),
        **{"router:external": bool(body.get("router:external", False))},
        mtu=int(body.get("mtu", 1500)),
        port_security_enabled=bool(body.get("port_security_enabled", True)),
        availability_zone_hints=list(body.get("availability_zone_hints") or []),
        availability_zones=["nova"], is_default=False, ipv4_address_scope=None,
        ipv6_address_scope=None) | {"description": body.get("description", ""),
                                    "tags": list(body.get("tags") or [])}


def _pools(cidr: Net, gateway: str | None, given: Any) -> list[dict[str, str]]:
    """The allocation pools asked for, or the CIDR's hosts but the gateway."""
    if given:
        pools = [{"start": str(p["start"]), "end": str(p["end"])} for p in given]
        for pool in pools:
            try:
                inside = all(ipaddress.ip_address(pool[k]) in cidr for k in ("start", "end"))
            except ValueError:
                inside = False
            if not inside:
                raise InvalidInput(f"The allocation pool {pool} spans beyond the subnet "
                                   f"cidr {cidr}.")
        return pools
    if cidr.num_addresses <= 2:
        return []
    first = cidr.network_address + 1
    last = cidr.broadcast_address - (1 if cidr.version == 4 else 0)
    if gateway is None:
        return [{"start": str(first), "end": str(last)}]
    gw = ipaddress.ip_address(gateway)
    pools = []
    if int(first) < int(gw):
        pools.append({"start": str(first), "end": str(gw - 1)})
    if int(gw) < int(last):
        pools.append({"start": str(gw + 1), "end": str(last)})
    return pools


def subnet_record(object_id: str, project_id: str, now: float, network_id: str,
                  body: dict[str, Any]) -> Record:
    try:
        cidr = ipaddress.ip_network(str(body.get("cidr")), strict=False)
    except ValueError:
        raise InvalidInput(f"Invalid input for cidr. Reason: '{body.get('cidr')}' is not a "
                           "valid IP subnet.") from None
    try:
        version = int(body.get("ip_version", cidr.version))
    except (TypeError, ValueError):
        raise InvalidInput(f"Invalid ip_version {body.get('ip_version')!r}.") from None
    if version != cidr.version:
        raise InvalidInput("Cidr and ip version are not compatible.")
    if "gateway_ip" in body:
        gateway = body["gateway_ip"]
        try:
            outside = gateway is not None and ipaddress.ip_address(gateway) not in cidr
        except ValueError:
            outside = True
        if outside:
            raise InvalidInput(f"Gateway IP {gateway} is outside the subnet {cidr}.")
    else:
        gateway = str(cidr.network_address + 1) if cidr.num_addresses > 2 else None
    return base_record(
        project_id, now, id=object_id, name=body.get("name", ""), network_id=network_id,
        cidr=str(cidr), ip_version=version, gateway_ip=gateway,
        allocation_pools=_pools(cidr, gateway, body.get("allocation_pools")),
        enable_dhcp=bool(body.get("enable_dhcp", True)),
        dns_nameservers=list(body.get("dns_nameservers") or []),
        host_routes=list(body.get("host_routes") or []),
        ipv6_ra_mode=body.get("ipv6_ra_mode"), ipv6_address_mode=body.get("ipv6_address_mode"),
        subnetpool_id=None, service_types=[], segment_id=None,
    ) | {"description": body.get("description", "")}


def seed_objects(seed: Seed, project_id: Callable[[str], str], now: float,
                 ) -> list[tuple[str, Record]]:
    """The (kind, object) pairs of the seed's networks and their subnets (no DHCP port)."""
    found: list[tuple[str, Record]] = []
    for wanted in seed.networks:
        owner = project_id(wanted.project)
        network_id = uuid.uuid5(uuid.NAMESPACE_URL, f"simcloud/network/{wanted.name}").hex
        found.append(("network", network_record(network_id, owner, now, {
            "name": wanted.name, "shared": wanted.shared,
            "router:external": wanted.external})))
        subnet_id = uuid.uuid5(uuid.NAMESPACE_URL, f"simcloud/subnet/{wanted.name}").hex
        pools = [{"start": wanted.pool_start, "end": wanted.pool_end}] \
            if wanted.pool_start and wanted.pool_end else None
        found.append(("subnet", subnet_record(subnet_id, owner, now, network_id, {
            "name": wanted.subnet_name or f"{wanted.name}-subnet", "cidr": wanted.cidr,
            "gateway_ip": wanted.gateway_ip, "enable_dhcp": wanted.enable_dhcp,
            "allocation_pools": pools})))
    return found
