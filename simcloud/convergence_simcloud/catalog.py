"""The services the simulated cloud offers and where each is mounted: the token's catalog.

Callers: ``convergence_simcloud.identity`` puts :func:`catalog` in every project-scoped token;
``convergence_simcloud.app`` mounts each service's router at its :data:`SERVICES` prefix. The
URLs are built from the address the client reached (``base``), so a server on an ephemeral port
or behind another host name hands out endpoints the client can reach. Cinder's endpoint carries
the project id, as devstack's does (openstacksdk pops it for version discovery); Neutron's has
no version (the SDK appends ``/v2.0``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Service:
    type: str
    name: str
    path: str  # the endpoint's path; ``{project_id}`` is filled in per token


SERVICES = (
    Service("identity", "keystone", "/v3"),
    Service("compute", "nova", "/compute/v2.1"),
    Service("network", "neutron", "/network"),
    Service("block-storage", "cinder", "/volume/v3/{project_id}"),
    Service("volumev3", "cinderv3", "/volume/v3/{project_id}"),
    Service("image", "glance", "/image"),
)

# Where each service's routes are mounted (Cinder's take the project id after the prefix).
PREFIXES = {"identity": "/v3", "compute": "/compute/v2.1", "network": "/network",
            "volume": "/volume/v3", "image": "/image"}


def _stable_id(*parts: str) -> str:
    return hashlib.sha1("/".join(parts).encode(), usedforsecurity=False).hexdigest()[:32]


def catalog(base: str, project_id: str, region: str) -> list[dict[str, Any]]:
    """Keystone's v3 catalog: each service with a public, an internal and an admin endpoint."""
    base = base.rstrip("/")
    entries = []
    for service in SERVICES:
        url = base + service.path.format(project_id=project_id)
        entries.append({
            "id": _stable_id("service", service.type), "type": service.type,
            "name": service.name,
            "endpoints": [{"id": _stable_id("endpoint", service.type, interface),
                           "interface": interface, "region_id": region, "region": region,
                           "url": url}
                          for interface in ("public", "internal", "admin")],
        })
    return entries
