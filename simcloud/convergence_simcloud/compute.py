"""Nova of the simulated cloud, its base: the version documents, microversions, flavors,
availability zones and limits (servers, key pairs, server groups, interfaces, volume
attachments and quotas are in the ``server_*``, ``keypairs``, ``server_groups``,
``server_interfaces``, ``compute_volumes`` and ``compute_quotas`` modules beside it).

Callers: ``convergence_simcloud.app`` mounts :data:`router` at ``/compute/v2.1`` and serves
:func:`versions` at ``/compute/``; a :class:`~convergence_simcloud.context.CloudError` raised
with ``service="compute"`` is rendered by :func:`error_body` as Nova's
``{"itemNotFound": {"code": 404, "message": ...}}``. Microversions: the version document
advertises ``MIN_VERSION``..``MAX_VERSION`` (2.1-2.61) and every route takes
:data:`Microversion`, which reads ``OpenStack-API-Version: compute X`` (or the legacy
``X-OpenStack-Nova-API-Version``), answers 406 outside the range and echoes the version in the
response headers. 2.61 is chosen because the flavor shapes up to it are implemented exactly:
``description`` from 2.55, ``extra_specs`` embedded from 2.61, ``swap`` as ``""`` when zero
(before 2.75); limits drop the network quotas at 2.36 and the personality ones at 2.57. The
servers module, when it lands, must implement every server shape up to ``MAX_VERSION`` (e.g.
the embedded flavor of 2.47) or lower it; raising it means implementing the newer shapes of
flavors and limits too. Flavors, availability zones and the default quota are objects of
kinds ``"flavor"``, ``"availability_zone"`` and ``"compute_quota"``, seeded from
``convergence_simcloud.seed``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request, Response

from convergence_simcloud.context import Authenticated, CloudError, cloud_of

router = APIRouter()

MIN_VERSION = (2, 1)
MAX_VERSION = (2, 61)
MAX_LIMIT = 1000  # Nova's osapi_max_limit
FAULTS = {400: "badRequest", 401: "unauthorized", 403: "forbidden", 404: "itemNotFound",
          405: "badMethod", 406: "notAcceptable", 409: "conflictingRequest",
          413: "overLimit", 415: "badMediaType", 429: "overLimit", 501: "notImplemented",
          503: "serviceUnavailable"}
_VERSION = re.compile(r"^(\d+)\.(\d+)$")


def error_body(error: CloudError) -> dict[str, Any]:
    """Nova's fault body: the fault's name over its code and message."""
    name = FAULTS.get(error.status, "computeFault")
    return {name: {"code": error.status, "message": error.message}}


def nova_error(status: int, message: str) -> CloudError:
    return CloudError(status, FAULTS.get(status, "computeFault"), message, service="compute")


def _text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


# -- version documents -----------------------------------------------------------------------

def _version(request: Request) -> dict[str, Any]:
    base = str(request.base_url).rstrip("/")
    return {"id": "v2.1", "status": "CURRENT", "version": _text(MAX_VERSION),
            "min_version": _text(MIN_VERSION), "updated": "2013-07-23T11:33:21Z",
            "links": [{"rel": "self", "href": f"{base}/compute/v2.1/"},
                      {"rel": "describedby", "type": "text/html",
                       "href": "http://docs.openstack.org/"}],
            "media-types": [{"base": "application/json",
                             "type": "application/vnd.openstack.compute+json;version=2.1"}]}


def versions(request: Request) -> dict[str, Any]:
    """``GET /compute/``: the versions Nova serves (only v2.1 here)."""
    version = _version(request)
    del version["media-types"]
    return {"versions": [version]}


@router.get("")
@router.get("/")
def version_document(request: Request) -> dict[str, Any]:
    return {"version": _version(request)}


# -- microversions ---------------------------------------------------------------------------

def microversion(request: Request, response: Response) -> tuple[int, int]:
    """The request's microversion (2.1 when not given), echoed in the response headers."""
    raw = None
    header = request.headers.get("openstack-api-version", "")
    for part in header.split(","):
        service, _, value = part.strip().partition(" ")
        if service.lower() == "compute":
            raw = value.strip()
    raw = raw or request.headers.get("x-openstack-nova-api-version")
    if not raw:
        version = MIN_VERSION
    elif raw.lower() == "latest":
        version = MAX_VERSION
    else:
        found = _VERSION.match(raw.strip())
        if found is None:
            raise nova_error(400, f"Invalid API version request string {raw}")
        version = (int(found[1]), int(found[2]))
        if not MIN_VERSION <= version <= MAX_VERSION:
            raise nova_error(406, f"Version {raw} is not supported by the API. Minimum is "
                                  f"{_text(MIN_VERSION)} and maximum is {_text(MAX_VERSION)}.")
    response.headers["OpenStack-API-Version"] = f"compute {_text(version)}"
    response.headers["X-OpenStack-Nova-API-Version"] = _text(version)
    response.headers["Vary"] = "OpenStack-API-Version, X-OpenStack-Nova-API-Version"
    return version


Microversion = Annotated[tuple[int, int], Depends(microversion)]


# -- flavors ---------------------------------------------------------------------------------

def _links(request: Request, flavor_id: str) -> list[dict[str, str]]:
    base = str(request.base_url).rstrip("/")
    return [{"rel": "self", "href": f"{base}/compute/v2.1/flavors/{flavor_id}"},
            {"rel": "bookmark", "href": f"{base}/compute/flavors/{flavor_id}"}]


def flavor_view(request: Request, flavor: dict[str, Any], version: tuple[int, int],
                detail: bool = True) -> dict[str, Any]:
    """A flavor as Nova shows it at ``version``."""
    body: dict[str, Any] = {"id": flavor["id"], "name": flavor["name"],
                            "links": _links(request, flavor["id"])}
    if detail:
        body.update({
            "ram": flavor["ram"], "vcpus": flavor["vcpus"], "disk": flavor["disk"],
            "swap": flavor["swap"] or "", "rxtx_factor": flavor["rxtx_factor"],
            "OS-FLV-EXT-DATA:ephemeral": flavor["ephemeral"],
            "OS-FLV-DISABLED:disabled": flavor["disabled"],
            "os-flavor-access:is_public": flavor["is_public"]})
    if version >= (2, 55):
        body["description"] = flavor["description"]
    if detail and version >= (2, 61):
        body["extra_specs"] = dict(flavor["extra_specs"])
    return body


def _int_filter(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise nova_error(400, f"Invalid {name} filter [{raw}]") from None
    if value < 0:
        raise nova_error(400, f"Invalid {name} filter [{raw}]")
    return value


def _flavor_list(request: Request, version: tuple[int, int], detail: bool) -> dict[str, Any]:
    params = request.query_params
    min_ram, min_disk = _int_filter(request, "minRam"), _int_filter(request, "minDisk")
    limit = _int_filter(request, "limit")
    limit = MAX_LIMIT if limit is None else min(limit, MAX_LIMIT)
    public = (params.get("is_public") or "true").lower()
    cloud = cloud_of(request)
    with cloud.locked():
        rows = sorted(cloud.kind("flavor").values(), key=lambda f: f["id"])
    rows = [f for f in rows
            if (min_ram is None or f["ram"] >= min_ram)
            and (min_disk is None or f["disk"] >= min_disk)
            and (public == "none" or f["is_public"] == (public not in ("false", "0", "no")))]
    marker = params.get("marker")
    if marker is not None:
        at = next((n for n, f in enumerate(rows) if f["id"] == marker), None)
        if at is None:
            raise nova_error(400, f"marker [{marker}] not found")
        rows = rows[at + 1:]
    page = rows[:limit]
    body: dict[str, Any] = {"flavors": [flavor_view(request, f, version, detail) for f in page]}
    if page and len(page) == limit:
        query = [(k, v) for k, v in params.multi_items() if k != "marker"]
        href = (str(request.base_url).rstrip("/") + request.url.path + "?" +
                urlencode([*query, ("marker", page[-1]["id"])]))
        body["flavors_links"] = [{"rel": "next", "href": href}]
    return body


@router.get("/flavors")
def list_flavors(request: Request, _: Authenticated, version: Microversion) -> dict[str, Any]:
    return _flavor_list(request, version, detail=False)


@router.get("/flavors/detail")
def list_flavors_detail(request: Request, _: Authenticated,
                        version: Microversion) -> dict[str, Any]:
    return _flavor_list(request, version, detail=True)


def _flavor(request: Request, flavor_id: str) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        flavor = cloud.kind("flavor").get(flavor_id)
    if flavor is None:
        raise nova_error(404, f"Flavor {flavor_id} could not be found.")
    return flavor


@router.get("/flavors/{flavor_id}")
def show_flavor(flavor_id: str, request: Request, _: Authenticated,
                version: Microversion) -> dict[str, Any]:
    return {"flavor": flavor_view(request, _flavor(request, flavor_id), version)}


@router.get("/flavors/{flavor_id}/os-extra_specs")
def list_extra_specs(flavor_id: str, request: Request, _: Authenticated,
                     __: Microversion) -> dict[str, Any]:
    return {"extra_specs": dict(_flavor(request, flavor_id)["extra_specs"])}


@router.get("/flavors/{flavor_id}/os-extra_specs/{key}")
def show_extra_spec(flavor_id: str, key: str, request: Request, _: Authenticated,
                    __: Microversion) -> dict[str, Any]:
    specs = _flavor(request, flavor_id)["extra_specs"]
    if key not in specs:
        raise nova_error(404, f"Flavor {flavor_id} has no extra specs with key {key}.")
    return {key: specs[key]}


# -- availability zones ----------------------------------------------------------------------

@router.get("/os-availability-zone")
def list_zones(request: Request, _: Authenticated, __: Microversion) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        zones = sorted(cloud.kind("availability_zone").values(), key=lambda z: z["name"])
    return {"availabilityZoneInfo": [{"zoneName": z["name"],
                                      "zoneState": {"available": z["available"]},
                                      "hosts": None} for z in zones]}


@router.get("/os-availability-zone/detail")
def list_zones_detail(request: Request, who: Authenticated,
                      __: Microversion) -> dict[str, Any]:
    if not who.is_admin:
        raise nova_error(403, "Policy doesn't allow os_compute_api:os-availability-zone:detail "
                              "to be performed.")
    cloud = cloud_of(request)
    with cloud.locked():
        zones = sorted(cloud.kind("availability_zone").values(), key=lambda z: z["name"])
    service = {"nova-compute": {"available": True, "active": True, "updated_at": None}}
    return {"availabilityZoneInfo": [{"zoneName": z["name"],
                                      "zoneState": {"available": z["available"]},
                                      "hosts": {h: service for h in z["hosts"]} or None}
                                     for z in zones]}


# -- limits ----------------------------------------------------------------------------------

@router.get("/limits")
def limits(request: Request, who: Authenticated, version: Microversion) -> dict[str, Any]:
    """The project's absolute limits and usage; shapes change at 2.36 and 2.57."""
    cloud = cloud_of(request)
    with cloud.locked():
        quotas = cloud.kind("compute_quota")
        quota = dict(quotas.get(str(who.project_id)) or quotas.get("default") or {})
        servers = [s for s in cloud.kind("server").values()
                   if s.get("project_id") == who.project_id]
        groups = [g for g in cloud.kind("server_group").values()
                  if g.get("project_id") == who.project_id]
    absolute: dict[str, Any] = {
        "maxTotalInstances": quota.get("instances", 10),
        "maxTotalCores": quota.get("cores", 20),
        "maxTotalRAMSize": quota.get("ram", 51200),
        "maxServerMeta": quota.get("metadata_items", 128),
        "maxImageMeta": quota.get("metadata_items", 128),
        "maxTotalKeypairs": quota.get("key_pairs", 100),
        "maxServerGroups": quota.get("server_groups", 10),
        "maxServerGroupMembers": quota.get("server_group_members", 10),
        "totalInstancesUsed": len(servers),
        "totalCoresUsed": sum(int((s.get("flavor") or {}).get("vcpus", 0)) for s in servers),
        "totalRAMUsed": sum(int((s.get("flavor") or {}).get("ram", 0)) for s in servers),
        "totalServerGroupsUsed": len(groups)}
    if version < (2, 57):
        absolute["maxPersonality"] = quota.get("injected_files", 5)
        absolute["maxPersonalitySize"] = quota.get("injected_file_content_bytes", 10240)
    if version < (2, 36):
        absolute.update({"maxSecurityGroups": quota.get("security_groups", 10),
                         "maxSecurityGroupRules": quota.get("security_group_rules", 20),
                         "maxTotalFloatingIps": quota.get("floating_ips", 10),
                         "totalSecurityGroupsUsed": 0, "totalFloatingIpsUsed": 0})
    return {"limits": {"rate": [], "absolute": absolute}}
