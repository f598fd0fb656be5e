"""Where notification webhooks may be delivered: global unicast addresses only, unless the
operator trusts a network (``Settings.webhook_allowed_networks``).

Callers: ``convergence.services.webhooks`` checks a subscription's URL when it is created
(:meth:`Destinations.host_refusal`: an IP literal that names a refused address is a 400,
nothing stored), and ``convergence.services.webhook_client`` checks every address a host name
resolves to when a delivery connects (:meth:`Destinations.refusal`), so that a name that
resolves, or later rebinds, to an inside address is refused too.

A tenant's webhook is a request the engine makes from inside the operator's network, to a URL
the tenant picked: without these checks it reaches the API's own port on loopback, the cloud's
metadata service (169.254.169.254), the database and anything else on the private networks,
and the delivery log tells open ports from closed ones. Refused, by default:

- IPv4: unspecified and "this network" (0.0.0.0/8), loopback, RFC 1918 private, shared
  (100.64.0.0/10), link-local, IETF protocol assignments, documentation, benchmarking
  (198.18.0.0/15), the 6to4 relay, multicast, reserved (240.0.0.0/4) and broadcast;
- IPv6: everything outside global unicast (2000::/3): unspecified, loopback, unique local
  (fc00::/7), link-local, site-local, multicast, discard-only; and inside it the IETF
  protocol assignments (Teredo among them), documentation and 6to4, which embed or name
  addresses that are not the destination's own;
- an IPv4-mapped (``::ffff:a.b.c.d``) or NAT64 (``64:ff9b::a.b.c.d``) IPv6 address is judged
  by the IPv4 address it carries.

The tables are this module's, not only ``ipaddress``'s ``is_global``, whose lists have changed
between Python releases (it is still asked, last, as a second opinion).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from convergence.settings import Settings

Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network

# What a refused address is, in the words an answer and a log use.
LOOPBACK = "loopback"
PRIVATE = "private"
LINK_LOCAL = "link-local"
MULTICAST = "multicast"
UNSPECIFIED = "unspecified"
RESERVED = "reserved"
SHARED = "shared (carrier-grade NAT)"
BENCHMARKING = "benchmarking"
DOCUMENTATION = "documentation"
NOT_GLOBAL = "not globally routable"

_V4_REFUSED: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(net), why) for net, why in (
        ("0.0.0.0/8", UNSPECIFIED),
        ("10.0.0.0/8", PRIVATE),
        ("100.64.0.0/10", SHARED),
        ("127.0.0.0/8", LOOPBACK),
        ("169.254.0.0/16", LINK_LOCAL),
        ("172.16.0.0/12", PRIVATE),
        ("192.0.0.0/24", RESERVED),  # IETF protocol assignments
        ("192.0.2.0/24", DOCUMENTATION),
        ("192.88.99.0/24", RESERVED),  # the 6to4 relay anycast
        ("192.168.0.0/16", PRIVATE),
        ("198.18.0.0/15", BENCHMARKING),
        ("198.51.100.0/24", DOCUMENTATION),
        ("203.0.113.0/24", DOCUMENTATION),
        ("224.0.0.0/4", MULTICAST),
        ("240.0.0.0/4", RESERVED),  # and 255.255.255.255, the broadcast
    ))

_V6_REFUSED: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(net), why) for net, why in (
        ("::/128", UNSPECIFIED),
        ("::1/128", LOOPBACK),
        ("fc00::/7", PRIVATE),  # unique local addresses
        ("fec0::/10", PRIVATE),  # site-local, deprecated
        ("fe80::/10", LINK_LOCAL),
        ("ff00::/8", MULTICAST),
        ("2001::/23", RESERVED),  # IETF protocol assignments: Teredo, benchmarking, ORCHID
        ("2001:db8::/32", DOCUMENTATION),
        ("3fff::/20", DOCUMENTATION),
        ("2002::/16", RESERVED),  # 6to4: an IPv4 address inside
    ))

_GLOBAL_UNICAST = IPv6Network("2000::/3")
_NAT64 = IPv6Network("64:ff9b::/96")  # the well-known prefix: the last 32 bits are IPv4
# What a resolver reads as an IPv4 address although ``ipaddress`` does not: 127.1, 0x7f.1,
# 2130706433 (inet_aton's forms).
_LEGACY_IPV4 = re.compile(r"[0-9a-fA-FxX.]+")


def embedded_ipv4(address: Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (IPv4-mapped, NAT64), None if none."""
    if isinstance(address, IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def refusal(address: Address) -> str | None:
    """Why webhooks may not reach ``address`` (None: they may): the kind of address it is."""
    inner = embedded_ipv4(address)
    if inner is not None:
        return refusal(inner)
    if isinstance(address, IPv4Address):
        for v4, why in _V4_REFUSED:
            if address in v4:
                return why
    else:
        for v6, why in _V6_REFUSED:
            if address in v6:
                return why
        if address not in _GLOBAL_UNICAST:
            return RESERVED
    return None if address.is_global else NOT_GLOBAL


def literal(host: str) -> Address | None:
    """The address ``host`` names when it is an IP literal (as a URL's host: IPv6 without
    its brackets), including the numeric forms a resolver takes for IPv4; None for a name."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if _LEGACY_IPV4.fullmatch(bare):
        try:
            return IPv4Address(socket.inet_aton(bare))
        except OSError:
            return None
    return None


def networks(values: Iterable[str]) -> tuple[Network, ...]:
    """CIDRs (host bits allowed: 10.1.2.3/8 is 10.0.0.0/8); ValueError names a bad one."""
    return tuple(ipaddress.ip_network(v.strip(), strict=False) for v in values if v.strip())


@dataclass(frozen=True, slots=True)
class Destinations:
    """The policy: refused kinds of addresses, minus the networks the operator trusts."""

    allowed: tuple[Network, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> Destinations:
        return cls(networks(settings.webhook_allowed_networks))

    def trusted(self, address: Address) -> bool:
        """Whether an allowed network holds ``address`` (or the IPv4 address it carries)."""
        inner = embedded_ipv4(address)
        forms = (address,) if inner is None else (address, inner)
        return any(form in net for form in forms for net in self.allowed
                   if form.version == net.version)

    def refusal(self, address: Address) -> str | None:
        """Why a delivery may not connect to ``address`` (None: it may)."""
        return None if self.trusted(address) else refusal(address)

    def host_refusal(self, host: str) -> tuple[Address, str] | None:
        """For a URL's host that is an IP literal: the address and why it is refused. A name
        is not resolved here (what it resolves to is checked at each connection)."""
        address = literal(host)
        if address is None:
            return None
        why = self.refusal(address)
        return None if why is None else (address, why)
