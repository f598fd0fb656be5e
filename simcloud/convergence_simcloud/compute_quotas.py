"""Nova's quotas in the simulated cloud: ``os-quota-sets`` and ``os-quota-class-sets``, plus the
quota helpers the other Nova modules share.

Callers: ``convergence_simcloud.app`` includes :data:`router` under ``/compute/v2.1``;
``convergence_simcloud.keypairs`` and ``server_groups`` call :func:`quota_of`,
:func:`over_quota` and :func:`nova_body`; Nova's servers module reads the same records. The
default quota is the object ``compute_quota/default`` (seeded); a per-project override set with
``PUT /os-quota-sets/{project_id}`` is stored as ``compute_quota/<project_id>`` holding the
*whole* quota (the default merged with the overridden limits, which are remembered in
``_sim["overrides"]`` so that a change of the default class reaches the others), and removed by
``DELETE``. Shapes follow Nova at 2.1-2.61: 2.36 drops the network quotas (``fixed_ips``,
``floating_ips``, ``security_groups``, ``security_group_rules``) and 2.57 the personality ones
(``injected_files*``) from show, update and defaults; the quota classes gain ``server_groups``
and ``server_group_members`` and lose the network quotas at 2.50. Only admins change quotas;
a project reads its own.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from convergence_simcloud.compute import Microversion, nova_error
from convergence_simcloud.context import Authenticated, Caller, CloudError, cloud_of
from convergence_simcloud.state import Record, SimCloud

router = APIRouter()
KIND = "compute_quota"
CLASS_KIND = "compute_quota_class"
RESOURCES = ("cores", "fixed_ips", "floating_ips", "injected_file_content_bytes",
             "injected_file_path_bytes", "injected_files", "instances", "key_pairs",
             "metadata_items", "ram", "security_group_rules", "security_groups",
             "server_groups", "server_group_members")
NETWORK_QUOTAS = ("fixed_ips", "floating_ips", "security_group_rules", "security_groups")
PERSONALITY_QUOTAS = ("injected_files", "injected_file_content_bytes",
                      "injected_file_path_bytes")
# Limits Nova has even when the seed does not name them.
FALLBACK = {"fixed_ips": -1, "injected_file_path_bytes": 255, "floating_ips": -1,
            "security_groups": -1, "security_group_rules": -1}


# -- shared helpers ----------------------------------------------------------------------------

async def nova_body(request: Request, key: str) -> dict[str, Any]:
    """The request body's ``key`` object, or Nova's 400 when missing or not an object."""
    try:
        payload = await request.json()
    except ValueError:
        raise nova_error(400, "Malformed request body") from None
    found = payload.get(key) if isinstance(payload, dict) else None
    if not isinstance(found, dict):
        raise nova_error(400, f"Invalid input for field/attribute {key}. Value: {payload}. "
                              f"'{key}' is a required property")
    return found


def answer(status: int, version: tuple[int, int], body: Any = None) -> Response:
    """A response built by hand (another status than the route's, or no body) that still
    carries the microversion headers."""
    text = f"{version[0]}.{version[1]}"
    headers = {"OpenStack-API-Version": f"compute {text}", "X-OpenStack-Nova-API-Version": text,
               "Vary": "OpenStack-API-Version, X-OpenStack-Nova-API-Version"}
    if body is None:
        return Response(status_code=status, headers=headers)
    return JSONResponse(body, status_code=status, headers=headers)


def forbidden(action: str) -> CloudError:
    """Nova's policy refusal for ``action`` (``os-quota-sets:update``...)."""
    return nova_error(403, f"Policy doesn't allow os_compute_api:{action} to be performed.")


def over_quota(message: str) -> CloudError:
    """Nova's over-quota answer (403 ``forbidden``)."""
    return nova_error(403, message)


def quota_of(cloud: SimCloud, project_id: str | None) -> dict[str, int]:
    """The project's limits: the default merged with its overrides. Call under the lock."""
    rows = cloud.kind(KIND)
    limits: dict[str, int] = dict(FALLBACK)
    limits.update({k: int(v) for k, v in (rows.get("default") or {}).items()
                   if k in RESOURCES})
    own = rows.get(str(project_id)) if project_id else None
    if own is not None:
        keys = (own.get("_sim") or {}).get("overrides", RESOURCES)
        limits.update({k: int(own[k]) for k in keys if k in own and k in RESOURCES})
    return limits


def usage_of(cloud: SimCloud, project_id: str, user_id: str | None) -> dict[str, int]:
    """What the project uses (key pairs: the user's). Call under the lock."""
    servers = [s for s in cloud.kind("server").values() if s.get("project_id") == project_id]
    used = dict.fromkeys(RESOURCES, 0)
    used["instances"] = len(servers)
    used["cores"] = sum(int((s.get("flavor") or {}).get("vcpus", 0)) for s in servers)
    used["ram"] = sum(int((s.get("flavor") or {}).get("ram", 0)) for s in servers)
    used["server_groups"] = sum(1 for g in cloud.kind("server_group").values()
                                if g.get("project_id") == project_id)
    used["key_pairs"] = sum(1 for k in cloud.kind("keypair").values()
                            if k.get("user_id") == user_id)
    return used


def _shown(version: tuple[int, int]) -> list[str]:
    hidden: tuple[str, ...] = ()
    if version >= (2, 36):
        hidden += NETWORK_QUOTAS
    if version >= (2, 57):
        hidden += PERSONALITY_QUOTAS
    return [r for r in RESOURCES if r not in hidden]


def _class_shown(version: tuple[int, int]) -> list[str]:
    if version < (2, 50):
        return [r for r in RESOURCES if r not in ("server_groups", "server_group_members")]
    return [r for r in _shown(version) if r not in NETWORK_QUOTAS]


def _refresh(cloud: SimCloud) -> None:
    """Rebuild every project override over the (changed) default."""
    for key, row in list(cloud.kind(KIND).items()):
        if key != "default":
            row.update(quota_of(cloud, key))


# -- os-quota-sets -----------------------------------------------------------------------------

def _project(cloud: SimCloud, project_id: str) -> None:
    if project_id not in cloud.table("projects"):
        raise nova_error(400, f"Project ID {project_id} is not a valid project.")


def _readable(who: Caller, project_id: str, action: str = "show") -> None:
    if not who.is_admin and who.project_id != project_id:
        raise forbidden(f"os-quota-sets:{action}")


def _quota_set(project_id: str | None, values: dict[str, Any],
               version: tuple[int, int]) -> dict[str, Any]:
    body: dict[str, Any] = {} if project_id is None else {"id": project_id}
    body.update({k: values[k] for k in _shown(version)})
    return {"quota_set": body}


@router.get("/os-quota-sets/{project_id}")
def show_quota_set(project_id: str, request: Request, who: Authenticated,
                   version: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    _readable(who, project_id)
    with cloud.locked():
        _project(cloud, project_id)
        return _quota_set(project_id, quota_of(cloud, project_id), version)


@router.get("/os-quota-sets/{project_id}/detail")
def show_quota_set_detail(project_id: str, request: Request, who: Authenticated,
                          version: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    _readable(who, project_id, "detail")
    user_id = request.query_params.get("user_id") or who.user_id
    with cloud.locked():
        _project(cloud, project_id)
        limits = quota_of(cloud, project_id)
        used = usage_of(cloud, project_id, user_id)
    detail = {k: {"in_use": used[k], "limit": limits[k], "reserved": 0} for k in RESOURCES}
    return _quota_set(project_id, detail, version)


@router.get("/os-quota-sets/{project_id}/defaults")
def show_quota_defaults(project_id: str, request: Request, _: Authenticated,
                        version: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        _project(cloud, project_id)
        return _quota_set(project_id, quota_of(cloud, None), version)


def _limits_of(body: dict[str, Any], allowed: list[str], key: str) -> dict[str, int]:
    """The new limits in an update body (Nova's 400 for unknown keys or bad values)."""
    unknown = sorted(k for k in body if k not in allowed and k != "force")
    if unknown:
        raise nova_error(400, f"Invalid input for field/attribute {key}. Value: {body}. "
                              f"Additional properties are not allowed "
                              f"({', '.join(repr(k) for k in unknown)} "
                              f"{'was' if len(unknown) == 1 else 'were'} unexpected)")
    limits: dict[str, int] = {}
    for name, raw in body.items():
        if name == "force":
            continue
        try:
            value = int(raw)
            if isinstance(raw, bool | float) or value < -1:
                raise ValueError
        except (TypeError, ValueError):
            raise nova_error(400, f"Invalid input for field/attribute {name}. Value: {raw}. "
                                  f"{raw!r} is not valid under any of the given schemas"
                             ) from None
        limits[name] = value
    return limits


def _forced(body: dict[str, Any]) -> bool:
    force = body.get("force", False)
    if isinstance(force, str):
        return force.lower() in ("1", "true", "yes", "on")
    return bool(force)


@router.put("/os-quota-sets/{project_id}")
async def update_quota_set(project_id: str, request: Request, who: Authenticated,
                           version: Microversion) -> dict[str, Any]:
    body = await nova_body(request, "quota_set")
    if not who.is_admin:
        raise forbidden("os-quota-sets:update")
    limits = _limits_of(body, _shown(version), "quota_set")
    cloud = cloud_of(request)
    with cloud.locked():
        _project(cloud, project_id)
        if not _forced(body):
            used = usage_of(cloud, project_id, request.query_params.get("user_id")
                            or who.user_id)
            for name, value in limits.items():
                if value != -1 and value < used[name]:
                    raise nova_error(400, f"Quota limit {value} for {name} must be greater "
                                          f"than or equal to already used and reserved "
                                          f"{used[name]}.")
        rows = cloud.kind(KIND)
        old = rows.get(project_id)
        overrides = set((old or {}).get("_sim", {}).get("overrides", [])) | set(limits)
        record: Record = {"id": project_id, "project_id": project_id,
                          "_sim": {"overrides": sorted(overrides)}}
        record.update({k: (old or {}).get(k) for k in overrides if k not in limits})
        record.update(limits)
        rows[project_id] = record
        record.update(quota_of(cloud, project_id))
        shown = _quota_set(None, quota_of(cloud, project_id), version)
    cloud.changed()
    return shown


@router.delete("/os-quota-sets/{project_id}", status_code=202)
def revert_quota_set(project_id: str, request: Request, who: Authenticated,
                     version: Microversion) -> Response:
    if not who.is_admin:
        raise forbidden("os-quota-sets:delete")
    cloud = cloud_of(request)
    with cloud.locked():
        cloud.kind(KIND).pop(project_id, None)
    cloud.changed()
    return answer(202, version)


# -- os-quota-class-sets -----------------------------------------------------------------------

def _class_limits(cloud: SimCloud, class_name: str) -> dict[str, int]:
    limits = quota_of(cloud, None)
    if class_name != "default":
        limits.update({k: int(v) for k, v in
                       (cloud.kind(CLASS_KIND).get(class_name) or {}).items()
                       if k in RESOURCES})
    return limits


@router.get("/os-quota-class-sets/{class_name}")
def show_quota_class(class_name: str, request: Request, who: Authenticated,
                     version: Microversion) -> dict[str, Any]:
    if not who.is_admin:
        raise forbidden("os-quota-class-sets:show")
    cloud = cloud_of(request)
    with cloud.locked():
        limits = _class_limits(cloud, class_name)
    return {"quota_class_set": {"id": class_name,
                                **{k: limits[k] for k in _class_shown(version)}}}


@router.put("/os-quota-class-sets/{class_name}")
async def update_quota_class(class_name: str, request: Request, who: Authenticated,
                             version: Microversion) -> dict[str, Any]:
    body = await nova_body(request, "quota_class_set")
    if not who.is_admin:
        raise forbidden("os-quota-class-sets:update")
    limits = _limits_of({k: v for k, v in body.items() if k != "force"},
                        _class_shown(version), "quota_class_set")
    cloud = cloud_of(request)
    with cloud.locked():
        if class_name == "default":
            cloud.kind(KIND).setdefault("default", {"id": "default", "project_id": None})
            cloud.kind(KIND)["default"].update(limits)
            _refresh(cloud)
        else:
            cloud.kind(CLASS_KIND).setdefault(
                class_name, {"id": class_name, "project_id": None}).update(limits)
        found = _class_limits(cloud, class_name)
    cloud.changed()
    return {"quota_class_set": {k: found[k] for k in _class_shown(version)}}
