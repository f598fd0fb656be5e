"""Nova's server metadata and server tags routes in the simulated cloud.

Callers: ``convergence_simcloud.app`` includes :data:`router` under ``/compute/v2.1``;
openstacksdk's ``MetadataMixin`` (``set_server_metadata``, ``get_server_metadata``,
``delete_server_metadata``) and ``TagMixin`` (``add_tag``, ``remove_tag``, ``set_tags``) call
these routes. Metadata: ``GET``/``POST`` (merge)/``PUT`` (replace) ``/servers/{id}/metadata``
and ``GET``/``PUT``/``DELETE /servers/{id}/metadata/{key}``, changeable only while the server is
active, paused, suspended or stopped with no task (409 otherwise), limited by the
``metadata_items`` quota (403). Tags (microversion 2.26+, 404 before): ``GET``/``PUT``/``DELETE
/servers/{id}/tags`` and ``GET``/``PUT``/``DELETE /servers/{id}/tags/{tag}``, at most 50 tags
of 1 to 60 characters without ``/`` or ``,``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud.compute import Microversion, nova_error
from convergence_simcloud.compute_quotas import answer
from convergence_simcloud.context import Authenticated, cloud_of
from convergence_simcloud.server_boot import check_metadata, invalid, request_body
from convergence_simcloud.server_views import base_url
from convergence_simcloud.servers import check_state, stamp, visible_server
from convergence_simcloud.state import Record, SimCloud

router = APIRouter()
Version = tuple[int, int]
CHANGEABLE = ("active", "paused", "suspended", "stopped")
TAG_STATES = ("active", "paused", "rescued", "shelved", "shelved_offloaded", "stopped",
              "suspended")
MAX_TAGS = 50


def _changed(cloud: SimCloud, server: Record) -> None:
    server["updated"] = stamp(cloud.now())


# -- metadata --------------------------------------------------------------------------------

@router.get("/servers/{server_id}/metadata")
def show_metadata(server_id: str, request: Request, who: Authenticated,
                  _: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"metadata": dict(visible_server(cloud, who, server_id)["metadata"])}


async def _set_metadata(server_id: str, request: Request, who: Any,
                        replace: bool) -> dict[str, Any]:
    body = (await request_body(request, "metadata"))["metadata"]
    cloud = cloud_of(request)
    with cloud.locked():
        server = visible_server(cloud, who, server_id)
        check_state(server, "update metadata", CHANGEABLE)
        merged = dict(body) if replace else {**server["metadata"], **body}
        server["metadata"] = check_metadata(cloud, server["project_id"], merged)
        _changed(cloud, server)
        shown = dict(server["metadata"])
    cloud.changed()
    return {"metadata": shown}


@router.post("/servers/{server_id}/metadata")
async def update_metadata(server_id: str, request: Request, who: Authenticated,
                          _: Microversion) -> dict[str, Any]:
    return await _set_metadata(server_id, request, who, replace=False)


@router.put("/servers/{server_id}/metadata")
async def replace_metadata(server_id: str, request: Request, who: Authenticated,
                           _: Microversion) -> dict[str, Any]:
    return await _set_metadata(server_id, request, who, replace=True)


def _item_missing() -> Exception:
    return nova_error(404, "Metadata item was not found")


@router.get("/servers/{server_id}/metadata/{key}")
def show_metadata_item(server_id: str, key: str, request: Request, who: Authenticated,
                       _: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        metadata = visible_server(cloud, who, server_id)["metadata"]
        if key not in metadata:
            raise _item_missing()
        return {"meta": {key: metadata[key]}}


@router.put("/servers/{server_id}/metadata/{key}")
async def set_metadata_item(server_id: str, key: str, request: Request, who: Authenticated,
                            _: Microversion) -> dict[str, Any]:
    meta = (await request_body(request, "meta"))["meta"]
    if len(meta) > 1:
        raise nova_error(400, "Request body contains too many items")
    if key not in meta:
        raise nova_error(400, "Request body and URI mismatch")
    cloud = cloud_of(request)
    with cloud.locked():
        server = visible_server(cloud, who, server_id)
        check_state(server, "update metadata", CHANGEABLE)
        server["metadata"] = check_metadata(cloud, server["project_id"],
                                            {**server["metadata"], **meta}, "meta")
        _changed(cloud, server)
    cloud.changed()
    return {"meta": dict(meta)}


@router.delete("/servers/{server_id}/metadata/{key}", status_code=204)
def delete_metadata_item(server_id: str, key: str, request: Request, who: Authenticated,
                         version: Microversion) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        server = visible_server(cloud, who, server_id)
        if key not in server["metadata"]:
            raise _item_missing()
        check_state(server, "delete metadata", CHANGEABLE)
        del server["metadata"][key]
        _changed(cloud, server)
    cloud.changed()
    return answer(204, version)


# -- tags (2.26+) ----------------------------------------------------------------------------

def _tagged(version: Version) -> None:
    if version < (2, 26):
        raise nova_error(404, "The resource could not be found.")


def _check_tag(tag: Any) -> str:
    if not isinstance(tag, str) or not 1 <= len(tag) <= 60 or "/" in tag or "," in tag:
        raise invalid("tags", tag, "A tag is 1 to 60 characters without '/' or ','.")
    return tag


def _tag_server(cloud: SimCloud, who: Any, server_id: str, action: str | None) -> Record:
    server = visible_server(cloud, who, server_id)
    if action is not None:
        check_state(server, action, TAG_STATES)
    return server


@router.get("/servers/{server_id}/tags")
def list_tags(server_id: str, request: Request, who: Authenticated,
              version: Microversion) -> dict[str, Any]:
    _tagged(version)
    cloud = cloud_of(request)
    with cloud.locked():
        return {"tags": list(_tag_server(cloud, who, server_id, None)["tags"])}


@router.put("/servers/{server_id}/tags")
async def replace_tags(server_id: str, request: Request, who: Authenticated,
                       version: Microversion) -> dict[str, Any]:
    _tagged(version)
    tags = (await request_body_list(request))
    cloud = cloud_of(request)
    with cloud.locked():
        server = _tag_server(cloud, who, server_id, "update tags")
        server["tags"] = list(dict.fromkeys(tags))
        _changed(cloud, server)
        shown = list(server["tags"])
    cloud.changed()
    return {"tags": shown}


async def request_body_list(request: Request) -> list[str]:
    try:
        payload = await request.json()
    except ValueError:
        raise nova_error(400, "Malformed request body") from None
    tags = payload.get("tags") if isinstance(payload, dict) else None
    if not isinstance(tags, list):
        raise invalid("tags", payload, "'tags' is a required property")
    if len(tags) > MAX_TAGS:
        raise invalid("tags", tags, f"is too long (at most {MAX_TAGS} tags)")
    return [_check_tag(t) for t in tags]


@router.delete("/servers/{server_id}/tags", status_code=204)
def delete_tags(server_id: str, request: Request, who: Authenticated,
                version: Microversion) -> Response:
    _tagged(version)
    cloud = cloud_of(request)
    with cloud.locked():
        server = _tag_server(cloud, who, server_id, "delete tags")
        server["tags"] = []
        _changed(cloud, server)
    cloud.changed()
    return answer(204, version)


@router.get("/servers/{server_id}/tags/{tag}", status_code=204)
def check_tag(server_id: str, tag: str, request: Request, who: Authenticated,
              version: Microversion) -> Response:
    _tagged(version)
    cloud = cloud_of(request)
    with cloud.locked():
        if tag not in _tag_server(cloud, who, server_id, None)["tags"]:
            raise nova_error(404, f"Instance {server_id} has no tag '{tag}'")
    return answer(204, version)


@router.put("/servers/{server_id}/tags/{tag}", status_code=201)
def add_tag(server_id: str, tag: str, request: Request, who: Authenticated,
            version: Microversion) -> Response:
    _tagged(version)
    _check_tag(tag)
    cloud = cloud_of(request)
    with cloud.locked():
        server = _tag_server(cloud, who, server_id, "update tag")
        if tag in server["tags"]:
            return answer(204, version)
        if len(server["tags"]) >= MAX_TAGS:
            raise invalid("tags", tag, f"The number of tags exceeded the per-server limit "
                                       f"{MAX_TAGS}")
        server["tags"].append(tag)
        _changed(cloud, server)
    cloud.changed()
    created = answer(201, version)
    created.headers["Location"] = f"{base_url(request)}/compute/v2.1/servers/{server_id}/" \
                                  f"tags/{tag}"
    return created


@router.delete("/servers/{server_id}/tags/{tag}", status_code=204)
def delete_tag(server_id: str, tag: str, request: Request, who: Authenticated,
               version: Microversion) -> Response:
    _tagged(version)
    cloud = cloud_of(request)
    with cloud.locked():
        server = _tag_server(cloud, who, server_id, "delete tag")
        if tag not in server["tags"]:
            raise nova_error(404, f"Instance {server_id} has no tag '{tag}'")
        server["tags"].remove(tag)
        _changed(cloud, server)
    cloud.changed()
    return answer(204, version)
