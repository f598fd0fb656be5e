"""The attributes of ``OS::Nova::Server`` that ``get_attr`` reads, computed as Heat computes them.

Callers: ``convergence.plugins.openstack.nova_server`` stores :func:`attributes` when a create
or an update completes. ``networks`` is Nova's addresses by network name, each list also given
under the network's id (Heat's ``_extend_networks``); ``addresses`` is the same from Neutron's
side, each address with its ``port``, its port's ``subnets`` and its ``network``, also by name
and by id; ``first_address`` is the first fixed address of the network whose name sorts last
(Heat's ``server_to_ipaddress`` walks the names in reverse order); ``instance_name`` is Nova's
``OS-EXT-SRV-ATTR:instance_name`` (shown to admins); ``tags`` are the template's tags;
``console_urls`` and ``os_collect_config`` are empty (no console is asked for, no software
configuration agent is served).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from convergence.plugins.openstack.nova_server_tags import template_tags


def _plain(obj: Any) -> dict[str, Any]:
    found: dict[str, Any] = obj.to_dict(computed=False)
    return found


def _version(address: str) -> int | None:
    try:
        return ipaddress.ip_address(address).version
    except ValueError:
        return None


def by_network(conn: Any, server_id: str) -> tuple[dict[str, list[dict[str, Any]]],
                                                   dict[str, str]]:
    """The server's addresses from its Neutron ports, by network name (Heat's ``addresses``
    attribute before the ids are added), and each network's id by name."""
    found: dict[str, list[dict[str, Any]]] = {}
    ids: dict[str, str] = {}
    networks: dict[str, Any] = {}
    subnets: dict[str, Any] = {}
    for port in conn.network.ports(device_id=server_id):
        network = networks.get(port.network_id)
        if network is None:
            network = networks[port.network_id] = conn.network.get_network(port.network_id)
        label = str(network.name or port.network_id)
        ids[label] = str(network.id)
        rows = found.setdefault(label, [])
        for subnet_id in {str(f.get("subnet_id")) for f in port.fixed_ips or []}:
            if subnet_id not in subnets:
                subnets[subnet_id] = _plain(conn.network.get_subnet(subnet_id))
        port_subnets = [subnets[str(f.get("subnet_id"))] for f in port.fixed_ips or []]
        for fixed in port.fixed_ips or []:
            address = str(fixed.get("ip_address"))
            rows.append({"addr": address, "version": _version(address),
                         "OS-EXT-IPS-MAC:mac_addr": port.mac_address,
                         "OS-EXT-IPS:type": "fixed", "port": str(port.id),
                         "subnets": port_subnets, "network": _plain(network)})
        for fip in conn.network.ips(port_id=port.id):
            address = str(fip.floating_ip_address)
            rows.append({"addr": address, "version": _version(address),
                         "OS-EXT-IPS-MAC:mac_addr": port.mac_address,
                         "OS-EXT-IPS:type": "floating", "port": None})
    return found, ids


def _with_ids(named: Mapping[str, list[Any]], ids: Mapping[str, str]) -> dict[str, list[Any]]:
    out = dict(named)
    for label, rows in named.items():
        if label in ids:
            out[ids[label]] = rows
    return out


def first_address(addresses: Mapping[str, list[Mapping[str, Any]]]) -> str:
    for label in sorted(addresses, reverse=True):
        rows = addresses[label]
        fixed = [r for r in rows if r.get("OS-EXT-IPS:type", "fixed") == "fixed"] or rows
        if fixed:
            return str(fixed[0]["addr"])
    return ""


def attributes(conn: Any, server: Any) -> dict[str, Any]:
    """What the engine stores for ``get_attr`` on ``server``."""
    nova = {str(label): list(rows) for label, rows in (server.addresses or {}).items()}
    neutron, ids = by_network(conn, str(server.id))
    networks = {label: [str(r["addr"]) for r in rows] for label, rows in nova.items()}
    return {
        "name": server.name,
        "addresses": _with_ids(neutron, ids),
        "networks": _with_ids(networks, ids),
        "first_address": first_address(nova),
        "instance_name": server.instance_name,
        "accessIPv4": server.access_ipv4 or "",
        "accessIPv6": server.access_ipv6 or "",
        "console_urls": {},
        "tags": template_tags(server.tags or []),
        "os_collect_config": {},
        "show": _plain(server),
    }
