"""Heat's implicit dependencies among Neutron and Nova resources: what a resource must come
after (and be deleted before) although its template does not refer to it.

Callers: the schemas of ``OS::Nova::Server``, ``OS::Neutron::Port``, ``OS::Neutron::FloatingIP``
and ``OS::Neutron::FloatingIPAssociation`` name these rules (``TypeSchema.implicit``); template
validation adds what they answer to the stack's graph (``convergence.template.dependencies``).
As Heat's ``add_dependencies``:

- a server, for each network it boots on, and a port, for its network, come after the subnets
  of that network made in the stack (Nova cannot boot on a network without a subnet);
- a floating IP (or an association) given a port of the stack comes after the router
  interfaces of the subnets of the port's network (Neutron cannot reach a port no router
  connects to the floating network), and after a router whose gateway is the floating
  network; being deleted first, it never holds an interface's removal up.

Properties are compared as written: two ``get_resource`` of one resource, or one literal name
or id, are the same network; a value made by another call is never matched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from convergence.template.dependencies import Peers, reference, referenced_resource

SUBNET = "OS::Neutron::Subnet"
PORT = "OS::Neutron::Port"
ROUTER = "OS::Neutron::Router"
ROUTER_INTERFACE = "OS::Neutron::RouterInterface"


def _first(props: Mapping[str, Any], *keys: str) -> Any:
    return next((props[k] for k in keys if props.get(k) is not None), None)


def subnets_of(network: Any, peers: Peers) -> set[str]:
    """The subnets of the stack on ``network`` (a property value as written)."""
    ref = reference(network)
    if ref is None:
        return set()
    by_network = peers.memo.get(SUBNET)
    if by_network is None:
        by_network = peers.memo[SUBNET] = {}
        for name, peer in peers.of_type(SUBNET):
            on = reference(_first(peer.properties, "network", "network_id"))
            by_network.setdefault(on, set()).add(name)
    return set(by_network.get(ref, ()))


def server(name: str, peers: Peers) -> Iterable[str]:
    found: set[str] = set()
    networks = peers[name].properties.get("networks")
    for entry in networks if isinstance(networks, list) else []:
        if isinstance(entry, Mapping):
            found |= subnets_of(_first(entry, "network", "uuid"), peers)
    return found


def port(name: str, peers: Peers) -> Iterable[str]:
    return subnets_of(_first(peers[name].properties, "network", "network_id"), peers)


def _port_subnets(port_value: Any, peers: Peers) -> set[str]:
    """The subnets the stack's port ``port_value`` (a ``get_resource``) is on or may be."""
    target = referenced_resource(port_value)
    if target is None or target not in peers or peers[target].type != PORT:
        return set()
    props = peers[target].properties
    found = subnets_of(_first(props, "network", "network_id"), peers)
    fixed = props.get("fixed_ips")
    for entry in fixed if isinstance(fixed, list) else []:
        subnet = referenced_resource(_first(entry, "subnet", "subnet_id")) \
            if isinstance(entry, Mapping) else None
        if subnet is not None:
            found.add(subnet)
    return found


def _reaching(subnets: set[str], floating: Any, peers: Peers) -> set[str]:
    """The router interfaces of ``subnets`` and the routers whose gateway is ``floating``."""
    found: set[str] = set()
    gateway = reference(floating)
    for name, peer in peers.of_type(ROUTER_INTERFACE, ROUTER):
        props = peer.properties
        if peer.type == ROUTER_INTERFACE:
            subnet = referenced_resource(_first(props, "subnet", "subnet_id"))
            if subnet is not None and subnet in subnets:
                found.add(name)
        elif peer.type == ROUTER and gateway is not None:
            info = props.get("external_gateway_info")
            if isinstance(info, Mapping) and reference(info.get("network")) == gateway:
                found.add(name)
    return found


def floating_ip(name: str, peers: Peers) -> Iterable[str]:
    props = peers[name].properties
    subnets = _port_subnets(props.get("port_id"), peers)
    floating = _first(props, "floating_network", "floating_network_id")
    return _reaching(subnets, floating, peers) if subnets else set()


def association(name: str, peers: Peers) -> Iterable[str]:
    subnets = _port_subnets(peers[name].properties.get("port_id"), peers)
    return _reaching(subnets, None, peers)
