"""Nova's server groups in the simulated cloud: ``/os-server-groups`` list, create, show and
delete, in the shape Nova has before 2.64 (``policies`` as a list, an empty ``metadata``).

Callers: ``convergence_simcloud.app`` includes :data:`router` under ``/compute/v2.1``; Nova's
servers module adds a server's id to a group's ``members`` when it boots with the scheduler hint
``group`` and removes it when the server goes. A group (kind ``"server_group"``) holds ``id``,
``name``, ``project_id``, ``user_id``, ``policies`` (one of ``affinity``, ``anti-affinity``,
and from 2.15 ``soft-affinity``/``soft-anti-affinity``), ``policy`` (the same, as 2.64 would
show it), ``rules`` and ``members`` (server ids; the view shows only servers that still exist).
2.13 adds ``project_id`` and ``user_id`` to the view. A project lists its own groups; an admin
lists everybody's with ``all_projects``; reading or deleting another project's group is refused
(403) as Nova's policy does. The ``server_groups`` quota counts the project's groups, and a
``quota_exceeded`` fault rule (service ``compute``, kind ``server_group``) refuses a create the
same way (403).
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud import faults
from convergence_simcloud.compute import Microversion, nova_error
from convergence_simcloud.compute_quotas import (
    answer,
    forbidden,
    nova_body,
    over_quota,
    quota_of,
)
from convergence_simcloud.context import Authenticated, Caller, cloud_of
from convergence_simcloud.state import Record, SimCloud

router = APIRouter()
KIND = "server_group"
POLICIES = ("anti-affinity", "affinity")
SOFT_POLICIES = ("soft-anti-affinity", "soft-affinity")


def view(cloud: SimCloud, group: Record, version: tuple[int, int]) -> dict[str, Any]:
    """The group as Nova shows it at ``version`` (< 2.64). Call under the lock."""
    servers = cloud.kind("server")
    body: dict[str, Any] = {"id": group["id"], "name": group["name"],
                            "policies": list(group["policies"]), "metadata": {},
                            "members": [m for m in group["members"] if m in servers]}
    if version >= (2, 13):
        body["project_id"] = group["project_id"]
        body["user_id"] = group["user_id"]
    return body


def _not_found(group_id: str) -> Exception:
    return nova_error(404, f"Instance group {group_id} could not be found.")


def get_group(cloud: SimCloud, who: Caller, group_id: str, action: str) -> Record:
    """The group ``group_id`` if ``who`` may act on it (404 if none, 403 if another
    project's). Call under the lock."""
    found = cloud.kind(KIND).get(group_id)
    if found is None:
        raise _not_found(group_id)
    if not who.is_admin and found["project_id"] != who.project_id:
        raise forbidden(f"os-server-groups:{action}")
    return found


def _offset_limit(request: Request) -> tuple[int, int | None]:
    """Nova's ``common.limited``: ``offset`` and ``limit`` (400 when not integers >= 0)."""
    found: list[int | None] = []
    for name in ("offset", "limit"):
        raw = request.query_params.get(name)
        if raw is None:
            found.append(None)
            continue
        try:
            value = int(raw)
            if value < 0:
                raise ValueError
        except ValueError:
            raise nova_error(400, f"Invalid input for query parameters {name}. Value: {raw}."
                             ) from None
        found.append(value)
    return found[0] or 0, found[1]


@router.get("/os-server-groups")
def list_server_groups(request: Request, who: Authenticated,
                       version: Microversion) -> dict[str, Any]:
    offset, limit = _offset_limit(request)
    everyone = who.is_admin and "all_projects" in request.query_params  # as Nova: present
    cloud = cloud_of(request)
    with cloud.locked():
        rows = sorted((g for g in cloud.kind(KIND).values()
                       if everyone or g["project_id"] == who.project_id),
                      key=lambda g: g["_sim"]["serial"])
        rows = rows[offset:] if limit is None else rows[offset:offset + limit]
        return {"server_groups": [view(cloud, g, version) for g in rows]}


def _checked(body: dict[str, Any], version: tuple[int, int]) -> tuple[str, str]:
    """The new group's name and policy (Nova's 400 for what its schema refuses)."""
    unknown = sorted(set(body) - {"name", "policies"})
    if unknown:
        raise nova_error(400, f"Invalid input for field/attribute server_group. Value: {body}. "
                              f"Additional properties are not allowed "
                              f"({', '.join(repr(k) for k in unknown)} "
                              f"{'was' if len(unknown) == 1 else 'were'} unexpected)")
    for required in ("name", "policies"):
        if required not in body:
            raise nova_error(400, f"Invalid input for field/attribute server_group. Value: "
                                  f"{body}. '{required}' is a required property")
    name = body["name"]
    if not isinstance(name, str) or not 1 <= len(name) <= 255 or name != name.strip():
        raise nova_error(400, f"Invalid input for field/attribute name. Value: {name}. "
                              f"{name!r} does not match the name pattern")
    allowed = POLICIES + (SOFT_POLICIES if version >= (2, 15) else ())
    policies = body["policies"]
    if not isinstance(policies, list) or len(policies) != 1:
        raise nova_error(400, f"Invalid input for field/attribute policies. Value: "
                              f"{policies}. {policies!r} is not valid: exactly one policy "
                              "is required")
    if policies[0] not in allowed:
        raise nova_error(400, f"Invalid input for field/attribute policies. Value: "
                              f"{policies}. {policies[0]!r} is not one of {list(allowed)}")
    return name, str(policies[0])


@router.post("/os-server-groups")
async def create_server_group(request: Request, who: Authenticated,
                              version: Microversion) -> dict[str, Any]:
    name, policy = _checked(await nova_body(request, "server_group"), version)
    cloud = cloud_of(request)
    with cloud.locked():
        rows = cloud.kind(KIND)
        group: Record = {
            "id": str(uuid.uuid4()),
            "name": name, "project_id": who.project_id, "user_id": who.user_id,
            "policies": [policy], "policy": policy, "rules": {}, "members": [],
            "_sim": {"made_at": cloud.now(),
                     "serial": 1 + max((g["_sim"]["serial"] for g in rows.values()),
                                       default=0)}}
        limit = quota_of(cloud, who.project_id)["server_groups"]
        owned = sum(1 for g in rows.values() if g["project_id"] == who.project_id)
        rule = faults.quota_rule(cloud, "compute", KIND, group)
        if rule is not None or (limit != -1 and owned + 1 > limit):
            raise over_quota((rule.message if rule is not None else "")
                             or "Quota exceeded, too many server groups.")
        rows[group["id"]] = group
        shown = view(cloud, group, version)
    cloud.changed()
    return {"server_group": shown}


@router.get("/os-server-groups/{group_id}")
def show_server_group(group_id: str, request: Request, who: Authenticated,
                      version: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"server_group": view(cloud, get_group(cloud, who, group_id, "show"), version)}


@router.delete("/os-server-groups/{group_id}")
def delete_server_group(group_id: str, request: Request, who: Authenticated,
                        version: Microversion) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        get_group(cloud, who, group_id, "delete")
        del cloud.kind(KIND)[group_id]
    cloud.changed()
    return answer(204, version)
