"""Nova's flavor management in the simulated cloud: create, delete and describe flavors, write
their extra specs, and grant or revoke a project's access to a private flavor.

Callers: ``convergence_simcloud.app`` includes :data:`router` under ``/compute/v2.1``;
openstacksdk's ``compute`` proxy (``create_flavor``, ``delete_flavor``, ``update_flavor``,
``create_flavor_extra_specs``, ``update_flavor_extra_specs_property``,
``delete_flavor_extra_specs_property``, ``flavor_add_tenant_access``,
``flavor_remove_tenant_access``, ``get_flavor_access``) and ``openstack flavor create`` /
``set`` / ``delete`` call these routes. The reading routes (list, show, extra specs read) are
in ``convergence_simcloud.compute``, whose :func:`~convergence_simcloud.compute.flavor_view`
shapes the answers. A flavor is an object of kind ``"flavor"`` (as the seeded ones are) with
``access``, the projects a private flavor is shared with. Every change is an admin's, as
Nova's default policy has it (403 otherwise); names and ids are unique (409), as in Nova.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud.compute import Microversion, flavor_view, nova_error
from convergence_simcloud.compute_quotas import answer, forbidden, nova_body
from convergence_simcloud.context import Authenticated, Caller, cloud_of
from convergence_simcloud.state import Record, SimCloud

router = APIRouter()
KIND = "flavor"


def _admin(who: Caller, action: str) -> None:
    if not who.is_admin:
        raise forbidden(f"os-flavor-manage:{action}")


def _flavor(cloud: SimCloud, flavor_id: str) -> Record:
    found = cloud.kind(KIND).get(flavor_id)
    if found is None:
        raise nova_error(404, f"Flavor {flavor_id} could not be found.")
    return found


def _count(body: dict[str, Any], key: str, least: int, default: int | None = None) -> int:
    value = body.get(key, default)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise nova_error(400, f"Invalid input for field/attribute {key}. Value: {value}. "
                              f"{value!r} is not an integer >= {least}")
    return value


def _new_flavor(body: dict[str, Any], version: tuple[int, int]) -> Record:
    """The flavor a create body describes (Nova's 400 for what its schema refuses)."""
    name = body.get("name")
    if not isinstance(name, str) or not 1 <= len(name) <= 255 or name != name.strip():
        raise nova_error(400, f"Invalid input for field/attribute name. Value: {name}. "
                              f"{name!r} is not a valid flavor name")
    flavor_id = body.get("id")
    if flavor_id in (None, "auto"):
        flavor_id = str(uuid.uuid4())
    if not isinstance(flavor_id, str) or not 1 <= len(flavor_id) <= 255:
        raise nova_error(400, f"Invalid input for field/attribute id. Value: {flavor_id}.")
    rxtx = body.get("rxtx_factor", 1.0)
    if isinstance(rxtx, bool) or not isinstance(rxtx, int | float) or rxtx <= 0:
        raise nova_error(400, f"Invalid input for field/attribute rxtx_factor. Value: {rxtx}.")
    public = body.get("os-flavor-access:is_public", True)
    if not isinstance(public, bool):
        raise nova_error(400, "Invalid input for field/attribute os-flavor-access:is_public. "
                              f"Value: {public}.")
    description = body.get("description")
    if description is not None and version < (2, 55):
        raise nova_error(400, "Invalid input for field/attribute flavor. Additional "
                              "properties are not allowed ('description' was unexpected)")
    return {"id": flavor_id, "name": name, "ram": _count(body, "ram", 1),
            "vcpus": _count(body, "vcpus", 1), "disk": _count(body, "disk", 0),
            "ephemeral": _count(body, "OS-FLV-EXT-DATA:ephemeral", 0, 0),
            "swap": _count(body, "swap", 0, 0), "rxtx_factor": float(rxtx),
            "is_public": public, "disabled": False, "description": description,
            "extra_specs": {}, "access": [], "project_id": None}


@router.post("/flavors")
async def create_flavor(request: Request, who: Authenticated,
                        version: Microversion) -> dict[str, Any]:
    _admin(who, "create")
    flavor = _new_flavor(await nova_body(request, "flavor"), version)
    cloud = cloud_of(request)
    with cloud.locked():
        rows = cloud.kind(KIND)
        if flavor["id"] in rows:
            raise nova_error(409, f"Flavor with ID {flavor['id']} already exists.")
        if any(f["name"] == flavor["name"] for f in rows.values()):
            raise nova_error(409, f"Flavor with name {flavor['name']} already exists.")
        rows[flavor["id"]] = flavor
    cloud.changed()
    return {"flavor": flavor_view(request, flavor, version)}


@router.put("/flavors/{flavor_id}")
async def update_flavor(flavor_id: str, request: Request, who: Authenticated,
                        version: Microversion) -> dict[str, Any]:
    if version < (2, 55):
        raise nova_error(404, "The resource could not be found.")
    _admin(who, "update")
    body = await nova_body(request, "flavor")
    if set(body) != {"description"}:
        raise nova_error(400, f"Invalid input for field/attribute flavor. Value: {body}. "
                              "'description' is the only property that can be updated")
    cloud = cloud_of(request)
    with cloud.locked():
        flavor = _flavor(cloud, flavor_id)
        flavor["description"] = body["description"]
    cloud.changed()
    return {"flavor": flavor_view(request, flavor, version)}


@router.delete("/flavors/{flavor_id}", status_code=202)
def delete_flavor(flavor_id: str, request: Request, who: Authenticated,
                  version: Microversion) -> Response:
    _admin(who, "delete")
    cloud = cloud_of(request)
    with cloud.locked():
        _flavor(cloud, flavor_id)
        del cloud.kind(KIND)[flavor_id]
    cloud.changed()
    return answer(202, version)


# -- extra specs -----------------------------------------------------------------------------

def _specs(body: Any) -> dict[str, str]:
    if not isinstance(body, dict) or not body:
        raise nova_error(400, f"Invalid input for field/attribute extra_specs. Value: {body}.")
    for key, value in body.items():
        if not 1 <= len(key) <= 255 or isinstance(value, dict | list) or value is None:
            raise nova_error(400, f"Invalid input for field/attribute extra_specs. Value: "
                                  f"{body}. {key!r} is not a valid extra spec")
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in body.items()}


@router.post("/flavors/{flavor_id}/os-extra_specs")
async def create_extra_specs(flavor_id: str, request: Request, who: Authenticated,
                             _: Microversion) -> dict[str, Any]:
    if not who.is_admin:
        raise forbidden("os-flavor-extra-specs:create")
    specs = _specs(await nova_body(request, "extra_specs"))
    cloud = cloud_of(request)
    with cloud.locked():
        _flavor(cloud, flavor_id)["extra_specs"].update(specs)
    cloud.changed()
    return {"extra_specs": specs}


@router.put("/flavors/{flavor_id}/os-extra_specs/{key}")
async def update_extra_spec(flavor_id: str, key: str, request: Request, who: Authenticated,
                            _: Microversion) -> dict[str, Any]:
    if not who.is_admin:
        raise forbidden("os-flavor-extra-specs:update")
    try:
        payload = await request.json()
    except ValueError:
        raise nova_error(400, "Malformed request body") from None
    if not isinstance(payload, dict) or list(payload) != [key]:
        raise nova_error(400, "Request body and URI mismatch")
    specs = _specs(payload)
    cloud = cloud_of(request)
    with cloud.locked():
        _flavor(cloud, flavor_id)["extra_specs"].update(specs)
    cloud.changed()
    return specs


@router.delete("/flavors/{flavor_id}/os-extra_specs/{key}", status_code=202)
def delete_extra_spec(flavor_id: str, key: str, request: Request, who: Authenticated,
                      version: Microversion) -> Response:
    if not who.is_admin:
        raise forbidden("os-flavor-extra-specs:delete")
    cloud = cloud_of(request)
    with cloud.locked():
        specs = _flavor(cloud, flavor_id)["extra_specs"]
        if key not in specs:
            raise nova_error(404, f"Flavor {flavor_id} has no extra specs with key {key}.")
        del specs[key]
    cloud.changed()
    return answer(202, version)


# -- access to private flavors ---------------------------------------------------------------

def _access(flavor: Record) -> dict[str, Any]:
    return {"flavor_access": [{"flavor_id": flavor["id"], "tenant_id": project}
                              for project in flavor.get("access", [])]}


@router.get("/flavors/{flavor_id}/os-flavor-access")
def list_access(flavor_id: str, request: Request, who: Authenticated,
                _: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        flavor = _flavor(cloud, flavor_id)
        if flavor["is_public"]:
            raise nova_error(404, "Access list not available for public flavors.")
        return _access(flavor)


@router.post("/flavors/{flavor_id}/action")
async def flavor_action(flavor_id: str, request: Request, who: Authenticated,
                        _: Microversion) -> dict[str, Any]:
    try:
        payload = await request.json()
    except ValueError:
        raise nova_error(400, "Malformed request body") from None
    if not isinstance(payload, dict) or len(payload) != 1 or \
            next(iter(payload)) not in ("addTenantAccess", "removeTenantAccess"):
        raise nova_error(400, "There is no such action")
    action, args = next(iter(payload.items()))
    tenant = args.get("tenant") if isinstance(args, dict) else None
    if not isinstance(tenant, str) or not tenant:
        raise nova_error(400, f"Invalid input for field/attribute {action}. Value: {args}. "
                              "'tenant' is a required property")
    _admin(who, action.lower())
    cloud = cloud_of(request)
    with cloud.locked():
        flavor = _flavor(cloud, flavor_id)
        access: list[str] = flavor.setdefault("access", [])
        if action == "addTenantAccess":
            if flavor["is_public"]:
                raise nova_error(409, "Can not add access to a public flavor.")
            if tenant in access:
                raise nova_error(409, f"Flavor access already exists for flavor {flavor_id} "
                                      f"and project {tenant} combination.")
            access.append(tenant)
        else:
            if tenant not in access:
                raise nova_error(404, f"Flavor access not found for {flavor_id} / {tenant} "
                                      "combination.")
            access.remove(tenant)
        shown = _access(flavor)
    cloud.changed()
    return shown
