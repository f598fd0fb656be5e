"""Neutron's tags extension in the simulated cloud: tags on networks, subnets, ports and groups.

Callers: ``convergence_simcloud.network`` includes :data:`router` under ``/network/v2.0``;
openstacksdk's ``TagMixin`` drives it (``set_tags`` puts the whole list, ``add_tag`` and
``remove_tag`` one tag, ``check_tag`` reads one). The list filters ``tags``, ``tags-any``,
``not-tags`` and ``not-tags-any`` (comma-separated) are applied by
``network_common.listing``. Only the object's owner (or an admin)
may change its tags; a missing object or tag answers Neutron's 404.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud.context import Authenticated, CloudError, cloud_of
from convergence_simcloud.network_common import (
    bad_request,
    get_owned,
    get_visible,
    neutron_error,
    not_found,
    touch,
)
from convergence_simcloud.state import SimCloud

router = APIRouter()
KINDS = {"networks": ("network", "NetworkNotFound", "Network"),
         "subnets": ("subnet", "SubnetNotFound", "Subnet"),
         "ports": ("port", "PortNotFound", "Port"),
         "security-groups": ("security_group", "SecurityGroupNotFound", "Security group"),
         "routers": ("router", "RouterNotFound", "Router"),
         "floatingips": ("floatingip", "FloatingIPNotFound", "Floating IP")}


def _find(cloud: SimCloud, collection: str, object_id: str) -> tuple[str, CloudError]:
    if collection not in KINDS:
        raise neutron_error(404, "HTTPNotFound", f"No resource {collection} has tags.")
    kind, type_, what = KINDS[collection]
    return kind, not_found(type_, what, object_id)


@router.get("/{collection}/{object_id}/tags")
def list_tags(collection: str, object_id: str, request: Request,
              who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        kind, missing = _find(cloud, collection, object_id)
        return {"tags": list(get_visible(cloud, who, kind, object_id, missing)["tags"])}


@router.get("/{collection}/{object_id}/tags/{tag}", status_code=204)
def check_tag(collection: str, object_id: str, tag: str, request: Request,
              who: Authenticated) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        kind, missing = _find(cloud, collection, object_id)
        if tag not in get_visible(cloud, who, kind, object_id, missing)["tags"]:
            raise not_found("TagNotFound", "Tag", tag)
    return Response(status_code=204)


@router.put("/{collection}/{object_id}/tags")
async def set_tags(collection: str, object_id: str, request: Request,
                   who: Authenticated) -> dict[str, Any]:
    try:
        tags = (await request.json())["tags"]
    except (ValueError, KeyError, TypeError):
        raise bad_request("Invalid input: a body {\"tags\": [...]} is required.") from None
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise bad_request("Invalid input for tags: a list of strings is required.")
    cloud = cloud_of(request)
    with cloud.locked():
        kind, missing = _find(cloud, collection, object_id)
        record = get_owned(cloud, who, kind, object_id, missing)
        record["tags"] = list(dict.fromkeys(tags))
        touch(cloud, record)
        shown = list(record["tags"])
    cloud.changed()
    return {"tags": shown}


@router.put("/{collection}/{object_id}/tags/{tag}", status_code=201)
def add_tag(collection: str, object_id: str, tag: str, request: Request,
            who: Authenticated) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        kind, missing = _find(cloud, collection, object_id)
        record = get_owned(cloud, who, kind, object_id, missing)
        if tag not in record["tags"]:
            record["tags"].append(tag)
            touch(cloud, record)
    cloud.changed()
    return Response(status_code=201)


@router.delete("/{collection}/{object_id}/tags/{tag}", status_code=204)
def remove_tag(collection: str, object_id: str, tag: str, request: Request,
               who: Authenticated) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        kind, missing = _find(cloud, collection, object_id)
        record = get_owned(cloud, who, kind, object_id, missing)
        if tag not in record["tags"]:
            raise not_found("TagNotFound", "Tag", tag)
        record["tags"].remove(tag)
        touch(cloud, record)
    cloud.changed()
    return Response(status_code=204)


@router.delete("/{collection}/{object_id}/tags", status_code=204)
def remove_all_tags(collection: str, object_id: str, request: Request,
                    who: Authenticated) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        kind, missing = _find(cloud, collection, object_id)
        record = get_owned(cloud, who, kind, object_id, missing)
        record["tags"] = []
        touch(cloud, record)
    cloud.changed()
    return Response(status_code=204)
