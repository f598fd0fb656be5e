"""Neutron's extension list in the simulated cloud: the API extensions it actually implements.

Callers: ``convergence_simcloud.network`` includes :data:`router` under ``/network/v2.0``.
Clients ask before they use an optional feature: the ``openstack`` CLI's ``router set``, for
one, looks up ``external-gateway-multihoming`` through openstacksdk's ``find_extension``,
which fetches ``/extensions/{alias}`` and then lists ``/extensions``. Only the extensions
whose behaviour the simulated Neutron has are advertised, so a client that checks sees the
truth; an unknown alias answers Neutron's 404.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from convergence_simcloud.context import Authenticated
from convergence_simcloud.network_common import listing, neutron_error

router = APIRouter()
UPDATED = "2026-01-01T00:00:00-00:00"
EXTENSIONS = {
    "external-net": ("Neutron external network", "Adds external network attribute to "
                     "network resource."),
    "router": ("Neutron L3 Router", "Router abstraction for basic L3 forwarding between L2 "
               "Neutron networks and access to external networks via a NAT gateway."),
    "ext-gw-mode": ("Neutron L3 Configurable external gateway mode", "Extension of the router "
                    "abstraction for specifying whether SNAT should occur on the external "
                    "gateway"),
    "extraroute": ("Neutron Extra Route", "Extra routes configuration for L3 router"),
    "fip-port-details": ("Floating IP Port Details Extension", "Add port_details attribute to "
                         "Floating IP resource"),
    "security-group": ("security-group", "The security groups extension."),
    "port-security": ("Port Security", "Provides port security"),
    "binding": ("Port Binding", "Expose port bindings of a virtual port to external "
                "application"),
    "allowed-address-pairs": ("Allowed Address Pairs", "Provides allowed address pairs"),
    "extra_dhcp_opt": ("Neutron Extra DHCP options", "Extra options configuration for DHCP."),
    "quotas": ("Quota management support", "Expose functions for quotas management per "
               "project"),
    "quota_details": ("Quota details management support", "Expose functions for quotas usage "
                      "statistics per project"),
    "standard-attr-tag": ("Tag support for resources with standard attribute", "Enables to "
                          "set tag on resources with standard attribute."),
    "standard-attr-description": ("standard-attr-description", "Extension to add descriptions "
                                  "to standard attributes"),
    "standard-attr-timestamp": ("Resource timestamps", "Adds created_at and updated_at fields "
                                "to all Neutron resources that have Neutron standard "
                                "attributes."),
    "standard-attr-revisions": ("Resource revision numbers", "This extension will display the "
                                "revision number of neutron resources."),
    "project-id": ("project_id field enabled", "Extension that indicates that project_id "
                   "field is enabled."),
    "pagination": ("Pagination support", "Extension that indicates that pagination is "
                   "enabled."),
}


def _shown(alias: str) -> dict[str, Any]:
    name, description = EXTENSIONS[alias]
    return {"alias": alias, "name": name, "description": description, "links": [],
            "updated": UPDATED, "id": alias}


@router.get("/extensions")
def list_extensions(request: Request, who: Authenticated) -> dict[str, Any]:
    shown = listing(request, "extensions", [_shown(a) for a in EXTENSIONS])
    for row in shown["extensions"]:
        row.pop("id", None)
    return shown


@router.get("/extensions/{alias}")
def show_extension(alias: str, who: Authenticated) -> dict[str, Any]:
    if alias not in EXTENSIONS:
        raise neutron_error(404, "HTTPNotFound", f"Extension with alias {alias} does not "
                                                 "exist")
    shown = _shown(alias)
    del shown["id"]
    return {"extension": shown}
