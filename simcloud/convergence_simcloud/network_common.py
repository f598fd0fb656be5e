"""Neutron's shared machinery: its error bodies, who sees what, list queries and IP allocation.

Callers: the Neutron route modules (``convergence_simcloud.network`` for networks and subnets,
``network_ports`` for ports, ``network_secgroups`` for security groups and rules) build their
answers with these helpers; ``convergence_simcloud.app`` renders a :func:`neutron_error` (a
:class:`~convergence_simcloud.context.CloudError` whose service is ``"network"``) as
``{"NeutronError": {"type", "message", "detail"}}``. A project sees its own objects, plus the
shared and external networks (and their subnets); an admin sees the others' only when it asks
with ``all_projects``/``all_tenants`` (or names a ``project_id``), and may read any object by id.
Lists filter on any attribute, paginate with ``limit``/``marker`` and a ``<kind>s_links`` next
link sorted by id, as Neutron does, and keep only the ``fields`` asked for. Every Neutron
delete asks :func:`delete_faulted` what the fault rules make of it.
"""

from __future__ import annotations

import ipaddress
import random
import socket
from collections.abc import Callable, Iterable
from typing import Any

from fastapi import Request

from convergence_simcloud import faults
from convergence_simcloud.context import Caller, CloudError
from convergence_simcloud.network_records import base_record, stamp
from convergence_simcloud.state import Record, SimCloud

API = "/v2.0"
# Query parameters that are not attribute filters.
CONTROL = {"limit", "marker", "fields", "sort_key", "sort_dir", "page_reverse", "all_projects",
           "all_tenants", "tags", "tags-any", "not-tags", "not-tags-any"}


def neutron_error(status: int, type_: str, message: str) -> CloudError:
    return CloudError(status, type_, message, service="network")


def bad_request(message: str) -> CloudError:
    return neutron_error(400, "HTTPBadRequest", message)


def not_found(type_: str, what: str, object_id: str) -> CloudError:
    return neutron_error(404, type_, f"{what} {object_id} could not be found.")


def new_record(cloud: SimCloud, project_id: str, **fields: Any) -> Record:
    """The fields every Neutron object has, then ``fields``."""
    return base_record(project_id, cloud.now(), **fields)


def delete_faulted(cloud: SimCloud, kind: str, record: Record) -> bool:
    """Apply the fault rules to a delete of ``record``: True when the delete hangs (answer 204
    but keep the object); 409 ``<Kind>InUse`` or 500 when a rule says so. Under the lock."""
    rule = faults.delete_rule(cloud, "network", kind, record)
    if rule is None:
        return False
    cloud.changed()  # the rule was used
    if rule.effect == faults.DELETE_CONFLICT:
        what = "".join(part.capitalize() for part in kind.split("_"))
        raise neutron_error(409, f"{what}InUse", rule.message or
                            f"Unable to complete operation on {kind} {record['id']}: "
                            "it is in use.")
    if rule.effect == faults.DELETE_ERROR:
        raise neutron_error(500, "HTTPInternalServerError", rule.message or
                            "Request Failed: internal server error while processing your "
                            "request.")
    return True


def disassociate_port(cloud: SimCloud, port_id: str) -> None:
    """Free the floating IPs associated with a port that is going away. Under the lock."""
    for fip in cloud.kind("floatingip").values():
        if fip.get("port_id") == port_id:
            fip.update({"port_id": None, "fixed_ip_address": None, "router_id": None,
                        "status": "DOWN"})
            touch(cloud, fip)


def touch(cloud: SimCloud, record: Record) -> None:
    record["updated_at"] = stamp(cloud.now())
    record["revision_number"] = record.get("revision_number", 0) + 1


async def body_of(request: Request, key: str) -> dict[str, Any]:
    """The request body's ``key`` object (400 when missing or not an object)."""
    try:
        payload = await request.json()
    except ValueError:
        raise bad_request("Malformed request body.") from None
    found = payload.get(key) if isinstance(payload, dict) else None
    if not isinstance(found, dict):
        raise bad_request(f"Resource body required: {key}.")
    return found


def project_of(who: Caller, body: dict[str, Any]) -> str:
    """The project a new object belongs to: the caller's, or any an admin names."""
    asked = body.get("project_id") or body.get("tenant_id")
    if asked and asked != who.project_id and not who.is_admin:
        raise neutron_error(403, "HTTPForbidden",
                            "Only admins may create objects in another project.")
    return str(asked or who.project_id or "")


# -- visibility ----------------------------------------------------------------------------

def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes", "on")


def asks_all(request: Request, who: Caller) -> bool:
    query = request.query_params
    return who.is_admin and (_truthy(query.get("all_projects")) or
                             _truthy(query.get("all_tenants")) or
                             "project_id" in query or "tenant_id" in query)


def network_is_public(network: Record | None) -> bool:
    return network is not None and bool(network.get("shared") or network.get("router:external"))


def visible(cloud: SimCloud, who: Caller, kind: str, record: Record) -> bool:
    """Whether ``who`` sees ``record`` without asking for all projects."""
    if record["project_id"] == who.project_id:
        return True
    if kind == "network":
        return network_is_public(record)
    if kind == "subnet":
        return network_is_public(cloud.kind("network").get(record["network_id"]))
    return False


def get_visible(cloud: SimCloud, who: Caller, kind: str, object_id: str,
                error: CloudError) -> Record:
    """The object ``object_id`` of ``kind`` if ``who`` may read it (else ``error``)."""
    found = cloud.kind(kind).get(object_id)
    if found is None or not (who.is_admin or visible(cloud, who, kind, found)):
        raise error
    return found


def get_owned(cloud: SimCloud, who: Caller, kind: str, object_id: str,
              error: CloudError) -> Record:
    """The object if ``who`` may change it: its project's or an admin (403 if only visible)."""
    found = get_visible(cloud, who, kind, object_id, error)
    if not who.is_admin and found["project_id"] != who.project_id:
        raise neutron_error(403, "HTTPForbidden",
                            f"The request you have made requires the {kind}'s owner.")
    return found


# -- listing -------------------------------------------------------------------------------

def _matches(value: Any, wanted: list[str]) -> bool:
    if isinstance(value, bool):
        return str(value).lower() in [w.lower() for w in wanted]
    if isinstance(value, list):
        return any(str(v) in wanted for v in value)
    return ("" if value is None else str(value)) in wanted


def select(request: Request, rows: Iterable[Record]) -> list[Record]:
    """Rows (already shown) matching every attribute filter of the query."""
    filters: dict[str, list[str]] = {}
    for key, value in request.query_params.multi_items():
        if key not in CONTROL:
            filters.setdefault("project_id" if key == "tenant_id" else key, []).append(value)
    return [row for row in rows
            if all(key not in row or _matches(row[key], wanted)
                   for key, wanted in filters.items())]


def tag_filter(query: Any) -> Callable[[Record], bool] | None:
    """A predicate on a record's tags from the query's tag filters (None: no filter)."""
    wanted = {k: set(query[k].split(",")) for k in ("tags", "tags-any", "not-tags",
                                                     "not-tags-any") if query.get(k)}
    if not wanted:
        return None

    def keep(record: Record) -> bool:
        tags = set(record.get("tags") or [])
        return ((not wanted.get("tags") or wanted["tags"] <= tags) and
                (not wanted.get("tags-any") or bool(wanted["tags-any"] & tags)) and
                (not wanted.get("not-tags") or not wanted["not-tags"] <= tags) and
                (not wanted.get("not-tags-any") or not wanted["not-tags-any"] & tags))
    return keep


def only_fields(request: Request, row: Record) -> Record:
    fields = request.query_params.getlist("fields")
    return {k: v for k, v in row.items() if k in fields} if fields else row


def listing(request: Request, plural: str, rows: list[Record]) -> dict[str, Any]:
    """Neutron's list answer: filtered, sorted by id, paginated, ``fields`` applied."""
    rows = sorted(select(request, rows), key=lambda r: str(r["id"]))
    tagged = tag_filter(request.query_params)
    if tagged is not None:
        rows = [r for r in rows if tagged(r)]
    query = request.query_params
    marker = query.get("marker")
    if marker:
        rows = [r for r in rows if str(r["id"]) > marker]
    body: dict[str, Any] = {}
    limit_text = query.get("limit")
    if limit_text:
        try:
            limit = int(limit_text)
        except ValueError:
            raise bad_request(f"Invalid limit: {limit_text}.") from None
        if limit > 0:
            links = []
            if len(rows) > limit:
                rows = rows[:limit]
                href = request.url.include_query_params(marker=rows[-1]["id"], limit=limit)
                links.append({"rel": "next", "href": str(href)})
            if marker:
                links.append({"rel": "previous", "href": str(request.url.include_query_params(
                    marker=rows[0]["id"] if rows else marker, page_reverse="True"))})
            body[f"{plural}_links"] = links
    body[plural] = [only_fields(request, r) for r in rows]
    return body


def list_kind(cloud: SimCloud, request: Request, who: Caller, kind: str,
              show: Callable[[Record], Record]) -> dict[str, Any]:
    everyone = asks_all(request, who)
    rows = [show(r) for r in cloud.kind(kind).values()
            if everyone or visible(cloud, who, kind, r)]
    return listing(request, kind + "s", rows)


def updated(record: Record, body: dict[str, Any], allowed: Iterable[str]) -> None:
    """Copy the ``allowed`` keys of an update body onto ``record`` (400 for others)."""
    allowed = set(allowed)
    unknown = [k for k in body if k not in allowed]
    if unknown:
        raise bad_request(f"Cannot update read-only or unknown attribute(s) {unknown}.")
    record.update(body)


# -- addresses -----------------------------------------------------------------------------

def mac_address() -> str:
    return "fa:16:3e:" + ":".join(f"{random.randrange(256):02x}" for _ in range(3))


def used_addresses(cloud: SimCloud, subnet_id: str) -> set[str]:
    return {ip["ip_address"] for port in cloud.kind("port").values()
            for ip in port["fixed_ips"] if ip["subnet_id"] == subnet_id}


def in_pools(subnet: Record, address: str) -> bool:
    value = int(ipaddress.ip_address(address))
    return any(int(ipaddress.ip_address(p["start"])) <= value <= int(ipaddress.ip_address(p["end"]))
               for p in subnet["allocation_pools"])


def _address_text(version: int, value: int) -> str:
    """An address's text as ``str(ipaddress.ip_address(value))`` gives it; for IPv4 without
    building the object, which made a scan past 1,000 used addresses take milliseconds."""
    if version == 4:
        return socket.inet_ntop(socket.AF_INET, value.to_bytes(4, "big"))
    return str(ipaddress.IPv6Address(value))


def allocate(cloud: SimCloud, subnet: Record) -> str | None:
    """The first free address of the subnet's allocation pools (None: exhausted)."""
    used = used_addresses(cloud, subnet["id"])
    for pool in subnet["allocation_pools"]:
        start = ipaddress.ip_address(pool["start"])
        for value in range(int(start), int(ipaddress.ip_address(pool["end"])) + 1):
            text = _address_text(start.version, value)
            if text not in used:
                return text
    return None


def exhausted(network_id: str) -> CloudError:
    return neutron_error(409, "IpAddressGenerationFailure",
                         f"No more IP addresses available on network {network_id}.")
