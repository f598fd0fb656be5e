"""The custom constraints that need no cloud: addresses, networks, DNS names, times.

Heat checks these everywhere a template is validated (``heat/engine/constraint/
common_constraints.py``); so does :func:`convergence.template.validate_stack`, by default.
Callers: ``validate.py`` (its default), ``parameters.py`` and ``properties.py`` through it,
and the plugin registry, which puts the cloud's own constraints (``nova.flavor``...) on top
(:class:`Layered`). Each check answers an error message or None.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
import zoneinfo
from collections.abc import Callable
from typing import Any

from convergence.template.constraints import CustomConstraintRegistry, CustomConstraints

_MAC = re.compile(r"[0-9a-fA-F]{2}([:-])[0-9a-fA-F]{2}(\1[0-9a-fA-F]{2}){4}")
_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
_NAME_MAX = 255


def ip_addr(value: Any) -> str | None:
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return f"{value!r} is not an IP address"
    return None


def net_cidr(value: Any) -> str | None:
    """A network (``10.0.0.0/24``); as Heat's, a bare address is one (a ``/32``)."""
    text = str(value)
    try:
        if text != text.strip():
            raise ValueError(text)
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return f"{value!r} is not a network in CIDR notation (address/prefix)"
    return None


ip_or_cidr = net_cidr


def mac_addr(value: Any) -> str | None:
    if not _MAC.fullmatch(str(value)):
        return f"{value!r} is not a MAC address"
    return None


def _labels(text: str, relative: bool) -> str | None:
    if not text or len(text) > _NAME_MAX:
        return f"a DNS name is 1 to {_NAME_MAX} characters long"
    if relative and text.endswith("."):
        return f"{text!r} must be relative: it cannot end with a dot"
    labels = text[:-1].split(".") if text.endswith(".") else text.split(".")
    for label in labels:
        if not _LABEL.fullmatch(label):
            return (f"{text!r} is not a DNS name: each label is 1 to 63 letters, digits and "
                    "hyphens, not starting or ending with a hyphen")
    if labels[-1].isdigit():
        return f"{text!r} is not a DNS name: its last label is all digits"
    return None


def dns_name(value: Any) -> str | None:
    return _labels(str(value), relative=False)


def rel_dns_name(value: Any) -> str | None:
    return _labels(str(value), relative=True)


def dns_domain(value: Any) -> str | None:
    text = str(value)
    found = _labels(text, relative=False)
    if found is None and not text.endswith("."):
        return f"{text!r} is not a DNS domain: it must end with a dot"
    return found


def iso_8601(value: Any) -> str | None:
    text = str(value)
    try:
        datetime.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return f"{value!r} is not an ISO 8601 time"
    return None


def timezone(value: Any) -> str | None:
    try:
        zoneinfo.ZoneInfo(str(value))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return f"{value!r} is not a time zone"
    return None


CHECKS: dict[str, Callable[[Any], str | None]] = {
    "ip_addr": ip_addr, "net_cidr": net_cidr, "ip_or_cidr": ip_or_cidr, "mac_addr": mac_addr,
    "dns_name": dns_name, "rel_dns_name": rel_dns_name, "dns_domain": dns_domain,
    "iso_8601": iso_8601, "timezone": timezone,
}
COMMON_CONSTRAINTS: CustomConstraints = CustomConstraintRegistry(CHECKS)


class Layered:
    """Constraints looked up in ``first`` and then in ``then``."""

    __slots__ = ("_first", "_then")

    def __init__(self, first: CustomConstraints, then: CustomConstraints) -> None:
        self._first, self._then = first, then

    def check(self, name: str, value: Any) -> str | None:
        which = self._first if self._first.known(name) else self._then
        return which.check(name, value)

    def known(self, name: str) -> bool:
        return self._first.known(name) or self._then.known(name)
