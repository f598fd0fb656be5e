"""Cinder's shared machinery: error bodies, version documents, microversions, the project check,
volume types, the volume lookup and list pagination (quotas: ``volume_quotas``).

Callers: the Cinder route modules (``convergence_simcloud.volume`` for volumes,
``volume_snapshots`` for snapshots, ``volume_types`` for types, quotas and limits) build their
answers with these helpers; ``convergence_simcloud.app`` renders a :func:`cinder_error` (a
:class:`~convergence_simcloud.context.CloudError` whose service is ``"volume"``) with
:func:`error_body` as Cinder does (``{"itemNotFound": {"code": 404, "message": ...}}``). The
microversion range advertised is ``MIN_VERSION``..``MAX_VERSION`` (3.0-3.60): the volume shapes
up to it are implemented (``group_id`` 3.13, ``provider_id`` 3.21, ``service_uuid`` and
``shared_targets`` 3.48), the snapshot ones (``group_snapshot_id`` 3.14, ``user_id`` 3.41),
the attachments API of 3.27 (``os-complete`` 3.44), the summary (3.12, metadata 3.36), force
delete by query (3.23), revert (3.40), extend in-use (3.42), ``with_count`` (3.45) and the
time filters of 3.60. Raising ``MAX_VERSION`` means implementing the newer shapes first
(``cluster_name`` 3.61, ``volume_type_id`` 3.63, ``encryption_key_id`` 3.64,
``consumes_quota`` 3.65).
"""

from __future__ import annotations

import datetime
import operator
import re
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Request, Response

from convergence_simcloud import volume_records
from convergence_simcloud.context import Authenticated, Caller, CloudError
from convergence_simcloud.state import Record, SimCloud

MIN_VERSION = (3, 0)
MAX_VERSION = (3, 60)
MAX_LIMIT = 1000  # Cinder's osapi_max_limit
FAULTS = {400: "badRequest", 401: "unauthorized", 403: "forbidden", 404: "itemNotFound",
          405: "badMethod", 406: "notAcceptable", 409: "conflictingRequest",
          413: "overLimit", 415: "badMediaType", 429: "overLimit", 501: "notImplemented",
          503: "serviceUnavailable"}
_VERSION = re.compile(r"^(\d+)\.(\d+)$")
DEFAULT_TYPE_ID = "b3a1c8f2-0c44-4f0e-9d61-6a3f3b0f6c01"
SEED_TYPES: tuple[dict[str, Any], ...] = (
    {"id": DEFAULT_TYPE_ID, "name": "__DEFAULT__", "description": "Default Volume Type",
     "extra_specs": {}},
    {"id": "5f0d3a1e-7b2c-4d8e-a9f1-0c3b6e2d4a70", "name": "lvmdriver-1", "description": None,
     "extra_specs": {"volume_backend_name": "lvmdriver-1"}},
)


def error_body(error: CloudError) -> dict[str, Any]:
    """Cinder's fault body: the fault's name over its code and message."""
    name = FAULTS.get(error.status, "computeFault")
    body: dict[str, Any] = {"code": error.status, "message": error.message}
    if error.status == 413:
        body["retryAfter"] = "0"
    return {name: body}


def cinder_error(status: int, message: str) -> CloudError:
    return CloudError(status, FAULTS.get(status, "computeFault"), message, service="volume")


def not_found(what: str, object_id: str) -> CloudError:
    return cinder_error(404, f"{what} {object_id} could not be found.")


def forbidden(action: str) -> CloudError:
    return cinder_error(403, f"Policy doesn't allow {action} to be performed.")


def _text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


# -- version documents -----------------------------------------------------------------------

def _version(request: Request) -> dict[str, Any]:
    base = str(request.base_url).rstrip("/")
    return {"id": "v3.0", "status": "CURRENT", "version": _text(MAX_VERSION),
            "min_version": _text(MIN_VERSION), "updated": "2016-02-08T12:20:21Z",
            "links": [{"rel": "describedby", "type": "text/html",
                       "href": "https://docs.openstack.org/"},
                      {"rel": "self", "href": f"{base}/volume/v3/"}],
            "media-types": [{"base": "application/json",
                             "type": "application/vnd.openstack.volume+json;version=3"}]}


def versions(request: Request) -> dict[str, Any]:
    """``GET /volume/`` and ``GET /volume/v3/``: Cinder answers a version list at both."""
    return {"versions": [_version(request)]}


# -- microversions and the project in the URL ------------------------------------------------

def microversion(request: Request, response: Response) -> tuple[int, int]:
    """The request's microversion (3.0 when not given), echoed in the response headers."""
    raw = None
    for part in request.headers.get("openstack-api-version", "").split(","):
        service, _, value = part.strip().partition(" ")
        if service.lower() == "volume":
            raw = value.strip()
    if not raw:
        version = MIN_VERSION
    elif raw.lower() == "latest":
        version = MAX_VERSION
    else:
        found = _VERSION.match(raw)
        if found is None:
            raise cinder_error(400, f"API Version String {raw} is of invalid format. Must be "
                                    "of format MajorNum.MinorNum.")
        version = (int(found[1]), int(found[2]))
        if not MIN_VERSION <= version <= MAX_VERSION:
            raise cinder_error(406, f"Version {raw} is not supported by the API. Minimum is "
                                    f"{_text(MIN_VERSION)} and maximum is "
                                    f"{_text(MAX_VERSION)}.")
    response.headers["OpenStack-API-Version"] = f"volume {_text(version)}"
    response.headers["Vary"] = "OpenStack-API-Version"
    return version


VolumeVersion = Annotated[tuple[int, int], Depends(microversion)]


def check_project(request: Request, who: Authenticated) -> None:
    """The router's dependency: the project in the URL must be the token's (or an admin's)."""
    asked = request.path_params.get("project_id")
    if asked and asked != who.project_id and not who.is_admin:
        raise cinder_error(400, "Malformed request url")


def url_project(request: Request) -> str:
    return str(request.path_params.get("project_id", ""))


def links(request: Request, plural: str, object_id: str) -> list[dict[str, str]]:
    base = str(request.base_url).rstrip("/")
    project = url_project(request)
    return [{"rel": "self", "href": f"{base}/volume/v3/{project}/{plural}/{object_id}"},
            {"rel": "bookmark", "href": f"{base}/volume/{project}/{plural}/{object_id}"}]


# -- visibility and lists --------------------------------------------------------------------

def truthy(value: str | None) -> bool:
    return str(value).lower() in ("1", "true", "yes", "on")


def visible(who: Caller, record: Record) -> bool:
    return who.is_admin or record.get("project_id") == who.project_id


def listed(request: Request, who: Caller, rows: list[Record]) -> list[Record]:
    """The rows a list shows: the caller's project's, or (admin, ``all_tenants``) all, or
    (admin) a named ``project_id``."""
    query = request.query_params
    if who.is_admin and truthy(query.get("all_tenants") or query.get("all_projects")):
        project = query.get("project_id")
        return [r for r in rows if project in (None, r["project_id"])]
    project = (query.get("project_id") if who.is_admin else None) or who.project_id
    return [r for r in rows if r.get("project_id") == project]


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le,
    "eq": operator.eq, "neq": operator.ne}


def _moment(text: str) -> datetime.datetime:
    moment = datetime.datetime.fromisoformat(text.strip())
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def time_filter(rows: list[Record], key: str, text: str) -> list[Record]:
    """3.60's time comparisons (``created_at=gt:2024-01-01T00:00:00``, ops gt, gte, lt, lte,
    eq, neq; several joined by commas); rows without the time never match."""
    for part in text.split(","):
        op, _, value = part.partition(":")
        if op not in _COMPARE or not value:
            op, value = "eq", part
        try:
            wanted = _moment(value)
        except ValueError:
            raise cinder_error(400, f"Invalid input received: Invalid filter keys: {key}") \
                from None
        compare = _COMPARE[op]
        rows = [r for r in rows if r.get(key) and compare(_moment(str(r[key])), wanted)]
    return rows


def _sort_value(key: str) -> Callable[[Record], tuple[bool, str]]:
    def value(row: Record) -> tuple[bool, str]:
        found = row.get(key)
        if isinstance(found, int) and not isinstance(found, bool):
            return False, f"{found:020d}"
        return found is None, str(found or "")
    return value


def _sort_keys(sort: str | None, sort_key: str | None,
               sort_dir: str | None) -> list[tuple[str, str]]:
    if sort and sort_key:
        raise cinder_error(400, "Invalid input received: The 'sort_key' and 'sort_dir' "
                                "parameters are deprecated and cannot be used with the "
                                "'sort' parameter.")
    if sort:
        found = []
        for part in sort.split(","):
            key, _, direction = part.strip().partition(":")
            found.append((key, (direction or "desc").lower()))
    else:
        found = [(key.strip(), (sort_dir or "desc").lower())
                 for key in (sort_key or "").split(",") if key.strip()]
    for _, direction in found:
        if direction not in ("asc", "desc"):
            raise cinder_error(400, f"Invalid input received: Unknown sort direction, must "
                                    f"be 'desc' or 'asc': {direction}")
    keys = [k for k, _ in found]
    found += [(k, "desc") for k in ("created_at", "id") if k not in keys]
    return found


def paginate(request: Request, plural: str, rows: list[Record]) -> tuple[list[Record],
                                                                        list[dict[str, str]]]:
    """Cinder's order (``sort=key:dir,...`` or ``sort_key``/``sort_dir``; by default
    ``created_at`` then ``id``, newest first), ``marker`` and ``limit``; the page and its
    ``<plural>_links`` (a next link when more rows follow)."""
    query = request.query_params
    for key, direction in reversed(_sort_keys(query.get("sort"), query.get("sort_key"),
                                              query.get("sort_dir"))):
        rows = sorted(rows, key=_sort_value(key), reverse=direction == "desc")
    marker = query.get("marker")
    if marker:
        at = next((n for n, r in enumerate(rows) if r["id"] == marker), None)
        if at is None:
            raise cinder_error(400, f"Invalid input received: marker not found: {marker}")
        rows = rows[at + 1:]
    limit_text = query.get("limit")
    limit = MAX_LIMIT
    if limit_text:
        try:
            limit = int(limit_text)
        except ValueError:
            raise cinder_error(400, "limit param must be an integer") from None
        if limit < 0:
            raise cinder_error(400, "limit param must be positive")
        limit = min(limit, MAX_LIMIT)
    page = rows[:limit]
    page_links = []
    if len(rows) > limit and page:
        href = request.url.remove_query_params("marker").include_query_params(
            marker=page[-1]["id"], limit=limit)
        page_links.append({"rel": "next", "href": str(href)})
    return page, page_links


# -- volume types ----------------------------------------------------------------------------

def types(cloud: SimCloud) -> dict[str, Record]:
    """The volume types (kind ``"volume_type"``), seeded with ``__DEFAULT__`` and
    ``lvmdriver-1`` on first use."""
    table = cloud.kind("volume_type")
    if not table:
        for seed in SEED_TYPES:
            table[seed["id"]] = {**seed, "is_public": True, "qos_specs_id": None,
                                 "project_id": None, "extra_specs": dict(seed["extra_specs"])}
    return table


def find_type(cloud: SimCloud, ref: str | None) -> Record:
    """The volume type named or id'd ``ref`` (the default type when None); 404 otherwise."""
    table = types(cloud)
    if not ref:
        return table.get(DEFAULT_TYPE_ID) or next(iter(table.values()))
    if ref in table:
        return table[ref]
    for row in table.values():
        if row["name"] == ref:
            return row
    raise cinder_error(404, f"Volume type with name {ref} could not be found.")


def get_volume(cloud: SimCloud, who: Caller, volume_id: str) -> Record:
    """The volume ``volume_id`` advanced, if the caller may see it (404 otherwise)."""
    volume = cloud.kind(volume_records.KIND).get(volume_id)
    if volume is None or not visible(who, volume) or \
            volume_records.advance(cloud, volume) is None:
        raise not_found("Volume", volume_id)
    return volume



def parse_size(value: Any) -> int:
    try:
        size = int(value)
        if isinstance(value, bool | float) or size < 1:
            raise ValueError
    except (TypeError, ValueError):
        raise cinder_error(400, f"Invalid input for field/attribute size. Value: {value}. "
                                f"{value!r} is not a valid size (an integer >= 1).") from None
    return size


async def body_of(request: Request, key: str) -> dict[str, Any]:
    """The request body's ``key`` object (400 when missing or not an object)."""
    try:
        payload = await request.json()
    except ValueError:
        raise cinder_error(400, "Malformed request body") from None
    found = payload.get(key) if isinstance(payload, dict) else None
    if not isinstance(found, dict):
        raise cinder_error(400, f"Missing required element '{key}' in request body.")
    return found
