"""Nova's ``/servers`` collection and item routes in the simulated cloud: list (with Nova's
filters and pagination), show, update, delete and the server's ``ips``.

Callers: ``convergence_simcloud.app`` includes :data:`router` under ``/compute/v2.1`` (creation
is ``convergence_simcloud.server_boot``'s, actions, metadata and tags
``convergence_simcloud.server_actions``'s). Lists show the caller's project; an admin sees the
other projects' servers with ``all_tenants`` (``all_projects`` in openstacksdk), a member who
asks for them gets Nova's 403. Filters: ``name`` (a regular expression), ``status``,
``flavor``, ``image``, ``availability_zone``, ``key_name``, ``ip``, ``changes-since``,
``uuid``, ``user_id``/``project_id`` (with ``all_tenants``) and the tag filters of 2.26; the
newest server comes first, ``limit``/``marker`` page with a ``servers_links`` next link. A
delete answers 204 and the server is gone (or shows ``task_state`` deleting for
``Options.server_delete_seconds``), unless a fault rule makes it hang, conflict or fail.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response

from convergence_simcloud import faults, server_views
from convergence_simcloud.compute import MAX_LIMIT, Microversion, nova_error
from convergence_simcloud.compute_quotas import answer
from convergence_simcloud.context import Authenticated, Caller, cloud_of
from convergence_simcloud.network_common import tag_filter
from convergence_simcloud.server_boot import invalid, request_body
from convergence_simcloud.servers import (
    KIND,
    SERVICE,
    advance,
    remove_server,
    set_state,
    sim,
    stamp,
    visible_server,
)
from convergence_simcloud.state import Record, SimCloud

router = APIRouter()
Version = tuple[int, int]
_TRUE = ("1", "true", "yes", "on", "")


def live_servers(cloud: SimCloud) -> list[Record]:
    """Every server, advanced to the clock (the vanished ones removed). Under the lock."""
    return [s for s in list(cloud.kind(KIND).values()) if advance(cloud, s)]


def _int(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise invalid(name, raw, f"'{raw}' is not a valid integer") from None
    if value < 0:
        raise invalid(name, raw, f"{value} is less than the minimum of 0")
    return value


def _addresses(cloud: SimCloud, server: Record) -> list[str]:
    return [a["addr"] for rows in server_views.addresses(cloud, server).values() for a in rows]


def _filtered(cloud: SimCloud, request: Request, who: Caller, version: Version,
              rows: list[Record]) -> list[Record]:
    query = request.query_params
    everyone = "all_tenants" in query and query["all_tenants"].lower() in _TRUE
    if everyone and not who.is_admin:
        raise nova_error(403, "Policy doesn't allow os_compute_api:servers:index:"
                              "get_all_tenants to be performed.")
    project = query.get("project_id") or query.get("tenant_id")
    if who.is_admin and project and "all_tenants" not in query:
        everyone = True
    if not everyone:
        rows = [s for s in rows if s["project_id"] == who.project_id]
    elif project:
        rows = [s for s in rows if s["project_id"] == project]
    checks: list[tuple[str, Any]] = []
    if query.get("name"):
        try:
            pattern = re.compile(query["name"])
        except re.error:
            raise invalid("name", query["name"], "It is not a valid regular expression.") \
                from None
        rows = [s for s in rows if pattern.search(s["name"])]
    if query.get("status"):
        wanted = {v.upper() for v in query.getlist("status")}
        rows = [s for s in rows if s["status"] in wanted]
    for key, field in (("flavor", None), ("image", None), ("availability_zone",
                                                          "availability_zone"),
                       ("key_name", "key_name"), ("uuid", "id"), ("user_id", "user_id"),
                       ("host", "host")):
        if query.get(key) is not None:
            checks.append((field or key, query[key]))
    for field, value in checks:
        if field == "flavor":
            rows = [s for s in rows if s["flavor"]["id"] == value]
        elif field == "image":
            rows = [s for s in rows if (s.get("image") or {}).get("id") == value]
        else:
            rows = [s for s in rows if str(s.get(field)) == value]
    if query.get("ip"):
        pattern = re.compile(re.escape(query["ip"]).replace(r"\*", ".*"))
        rows = [s for s in rows if any(pattern.search(a) for a in _addresses(cloud, s))]
    if query.get("changes-since"):
        rows = [s for s in rows if s["updated"] >= query["changes-since"][:19]]
    tagged = tag_filter(query) if version >= (2, 26) else None
    if tagged is not None:
        rows = [s for s in rows if tagged(s)]
    return rows


# Nova's sort keys -> the record's field (the others sort as created_at)
SORT_FIELDS = {"display_name": "name", "uuid": "id", "updated_at": "updated",
               "availability_zone": "availability_zone", "key_name": "key_name",
               "vm_state": "OS-EXT-STS:vm_state", "task_state": "OS-EXT-STS:task_state",
               "power_state": "OS-EXT-STS:power_state", "host": "host",
               "project_id": "project_id", "user_id": "user_id",
               "launched_at": "OS-SRV-USG:launched_at", "hostname": "hostname"}
SORT_KEYS = {*SORT_FIELDS, "created_at", "access_ip_v4", "access_ip_v6", "auto_disk_config",
             "config_drive", "display_description", "image_ref", "instance_type_id",
             "kernel_id", "launch_index", "locked_by", "node", "progress", "ramdisk_id",
             "root_device_name", "terminated_at"}


def _sort(request: Request, rows: list[Record]) -> None:
    """Sort as Nova does: ``sort_key``/``sort_dir`` pairs, then newest first."""
    keys = request.query_params.getlist("sort_key")
    dirs = request.query_params.getlist("sort_dir")
    for key in keys:
        if key not in SORT_KEYS:
            raise invalid("sort_key", key, f"'{key}' is not one of the sort keys")
    for direction in dirs:
        if direction not in ("asc", "desc"):
            raise invalid("sort_dir", direction, f"'{direction}' is not one of "
                                                 "['asc', 'desc']")
    rows.sort(key=lambda s: (sim(s)["made_at"], sim(s).get("seq", 0)), reverse=True)
    for n in range(len(keys) - 1, -1, -1):
        reverse = (dirs[n] if n < len(dirs) else "desc") == "desc"
        field = SORT_FIELDS.get(keys[n])
        if field is None:
            rows.sort(key=lambda s: (sim(s)["made_at"], sim(s).get("seq", 0)),
                      reverse=reverse)
            continue

        def value(server: Record, name: str = field) -> tuple[bool, str]:
            return server.get(name) is not None, str(server.get(name) or "")

        rows.sort(key=value, reverse=reverse)


def _listing(request: Request, who: Caller, version: Version, detail: bool) -> dict[str, Any]:
    limit = _int(request, "limit")
    limit = MAX_LIMIT if limit is None else min(limit, MAX_LIMIT)
    marker = request.query_params.get("marker")
    cloud = cloud_of(request)
    with cloud.locked():
        rows = _filtered(cloud, request, who, version, live_servers(cloud))
        _sort(request, rows)
        if marker is not None:
            at = next((n for n, s in enumerate(rows) if s["id"] == marker), None)
            if at is None:
                raise nova_error(400, f"marker [{marker}] not found")
            rows = rows[at + 1:]
        page = rows[:limit]
        by_device = server_views.ports_by_device(cloud) if detail else {}
        shown = [server_views.detail(cloud, request, s, version, who.is_admin,
                                     by_device=by_device) if detail
                 else server_views.summary(request, s) for s in page]
    body: dict[str, Any] = {"servers": shown}
    if page and len(page) == limit:
        query = [(k, v) for k, v in request.query_params.multi_items() if k != "marker"]
        href = (server_views.base_url(request) + request.url.path + "?" +
                urlencode([*query, ("marker", page[-1]["id"])]))
        body["servers_links"] = [{"rel": "next", "href": href}]
    return body


@router.get("/servers")
def list_servers(request: Request, who: Authenticated, version: Microversion) -> dict[str, Any]:
    return _listing(request, who, version, detail=False)


@router.get("/servers/detail")
def list_servers_detail(request: Request, who: Authenticated,
                        version: Microversion) -> dict[str, Any]:
    return _listing(request, who, version, detail=True)


@router.get("/servers/{server_id}")
def show_server(server_id: str, request: Request, who: Authenticated,
                version: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        server = visible_server(cloud, who, server_id)
        return {"server": server_views.detail(cloud, request, server, version, who.is_admin)}


@router.get("/servers/{server_id}/ips")
def list_ips(server_id: str, request: Request, who: Authenticated,
             _: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        server = visible_server(cloud, who, server_id)
        found = server_views.addresses(cloud, server)
    return {"addresses": {name: [{"version": a["version"], "addr": a["addr"]} for a in rows]
                          for name, rows in found.items()}}


@router.get("/servers/{server_id}/ips/{network_label}")
def show_ips(server_id: str, network_label: str, request: Request, who: Authenticated,
             _: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        server = visible_server(cloud, who, server_id)
        rows = server_views.addresses(cloud, server).get(network_label)
    if rows is None:
        raise nova_error(404, "Instance is not a member of specified network")
    return {network_label: [{"version": a["version"], "addr": a["addr"]} for a in rows]}


UPDATABLE = ("name", "accessIPv4", "accessIPv6", "OS-DCF:diskConfig")


@router.put("/servers/{server_id}")
async def update_server(server_id: str, request: Request, who: Authenticated,
                        version: Microversion) -> dict[str, Any]:
    body = (await request_body(request, "server"))["server"]
    allowed = UPDATABLE + (("description",) if version >= (2, 19) else ())
    unexpected = sorted(set(body) - set(allowed))
    if unexpected:
        raise invalid("server", body, f"Additional properties are not allowed "
                                      f"({', '.join(repr(k) for k in unexpected)} "
                                      f"{'was' if len(unexpected) == 1 else 'were'} "
                                      "unexpected)")
    if "name" in body and (not isinstance(body["name"], str)
                           or not 1 <= len(body["name"].strip()) <= 255):
        raise invalid("name", body["name"], "The name must be 1 to 255 characters long.")
    if "description" in body and body["description"] is not None and (
            not isinstance(body["description"], str) or len(body["description"]) > 255):
        raise invalid("description", body["description"], "At most 255 characters.")
    cloud = cloud_of(request)
    with cloud.locked():
        server = visible_server(cloud, who, server_id)
        server.update(body)
        server["updated"] = stamp(cloud.now())
        shown = server_views.detail(cloud, request, server, version, who.is_admin,
                                    extended=False)
    cloud.changed()
    return {"server": shown}


@router.delete("/servers/{server_id}", status_code=204)
def delete_server(server_id: str, request: Request, who: Authenticated,
                  version: Microversion) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        server = visible_server(cloud, who, server_id)
        if server.get("locked") and not who.is_admin:
            raise nova_error(409, f"Instance {server_id} is locked")
        rule = faults.delete_rule(cloud, SERVICE, KIND, server)
        if rule is not None and rule.effect == faults.DELETE_CONFLICT:
            raise nova_error(409, rule.message or f"Cannot 'delete' instance {server_id} "
                                                  f"while it is in task_state deleting")
        if rule is not None and rule.effect == faults.DELETE_ERROR:
            raise nova_error(500, rule.message or "Unexpected API Error. Please report this "
                                                  "at http://bugs.launchpad.net/nova/ and "
                                                  "attach the Nova API log if possible.\n"
                                                  "<class 'nova.exception.NovaException'>")
        seconds = cloud.options.server_delete_seconds
        if rule is not None and rule.effect == faults.DELETE_HANGS:
            set_state(cloud, server, None, "deleting")
            sim(server).pop("task", None)
            sim(server)["delete_hangs"] = True
        elif seconds > 0:
            set_state(cloud, server, None, "deleting")
            sim(server).pop("task", None)
            sim(server)["deleting_until"] = cloud.now() + seconds
        else:
            remove_server(cloud, server)
    cloud.changed()
    return answer(204, version)
