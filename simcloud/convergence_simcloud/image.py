"""Glance v2 of the simulated cloud: version discovery, and images listed and shown.

Callers: ``convergence_simcloud.app`` mounts :data:`router` at the catalog's ``/image`` prefix
and renders a :class:`~convergence_simcloud.context.CloudError` raised with ``service="image"``
by :func:`error_body`. Shapes follow Glance's: ``GET /image/`` answers 300 Multiple Choices
with the versions (``GET /image/versions`` the same with 200), all at ``/v2/``;
``GET /v2/images`` filters by ``name``, ``status`` and ``visibility`` (without it, what the
project may see: public, community excluded, and its own), sorts by ``created_at`` then ``id``
descending and pages with ``limit``/``marker``, giving a relative ``next`` link while a page is
full; an unknown image or marker answers 404/400 in the JSON error body webob gives Glance
(``{"code": "404 Not Found", "title", "message"}``). Images are objects of kind ``"image"``
(seeded from ``convergence_simcloud.seed.SeedImage``), each owned by a project.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from convergence_simcloud.context import Authenticated, Caller, CloudError, cloud_of

router = APIRouter()

DEFAULT_LIMIT = 25  # Glance's limit_param_default
MAX_LIMIT = 1000  # Glance's api_limit_max
CURRENT = "v2.16"
SUPPORTED = ("v2.15", "v2.14", "v2.13", "v2.12", "v2.11", "v2.10", "v2.9", "v2.8", "v2.7",
             "v2.6", "v2.5", "v2.4", "v2.3", "v2.2", "v2.1", "v2.0")
TITLES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
          409: "Conflict"}


def error_body(error: CloudError) -> dict[str, Any]:
    """webob's JSON error, which Glance answers to ``Accept: application/json``."""
    title = TITLES.get(error.status, error.title)
    return {"code": f"{error.status} {title}", "title": title, "message": error.message}


def image_error(status: int, message: str) -> CloudError:
    return CloudError(status, TITLES.get(status, "Error"), message, service="image")


def _versions(request: Request) -> dict[str, Any]:
    href = str(request.base_url).rstrip("/") + "/image/v2/"
    return {"versions": [{"id": v, "status": "CURRENT" if v == CURRENT else "SUPPORTED",
                          "links": [{"rel": "self", "href": href}]}
                         for v in (CURRENT, *SUPPORTED)]}


@router.get("/")
@router.get("")
def versions(request: Request) -> JSONResponse:
    """``GET /image/``: Glance answers 300 Multiple Choices."""
    return JSONResponse(_versions(request), status_code=300)


@router.get("/versions")
def versions_list(request: Request) -> dict[str, Any]:
    return _versions(request)


def visible(image: dict[str, Any], who: Caller) -> bool:
    """Whether ``who`` may see ``image`` at all (show, or list with a visibility filter)."""
    return bool(image["visibility"] in ("public", "community")
                or image["owner"] == who.project_id or who.is_admin)


def _listed(image: dict[str, Any], who: Caller, visibility: str | None) -> bool:
    if visibility is None:  # Glance's default list: no community images of others
        return bool(image["visibility"] == "public" or image["owner"] == who.project_id)
    if visibility != "all" and image["visibility"] != visibility:
        return False
    return visible(image, who)


def shown(image: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in image.items() if k != "project_id"}
    body["self"] = f"/v2/images/{image['id']}"
    body["file"] = f"/v2/images/{image['id']}/file"
    body["schema"] = "/v2/schemas/image"
    return body


def _int_param(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise image_error(400, f"{name} param must be an integer") from None
    if value < 0:
        raise image_error(400, f"{name} param must be positive")
    return value


@router.get("/v2/images")
def list_images(request: Request, who: Authenticated) -> dict[str, Any]:
    params = request.query_params
    limit = min(_int_param(request, "limit", DEFAULT_LIMIT), MAX_LIMIT)
    marker = params.get("marker")
    cloud = cloud_of(request)
    with cloud.locked():
        rows = [i for i in cloud.kind("image").values()
                if _listed(i, who, params.get("visibility"))
                and all(params.get(key) in (None, i.get(key)) for key in ("name", "status"))]
        rows.sort(key=lambda i: (i["created_at"], i["id"]), reverse=True)
        if marker is not None:
            at = next((n for n, i in enumerate(rows) if i["id"] == marker), None)
            if at is None:
                raise image_error(400, f"marker {marker} not found")  # Glance: 400
            rows = rows[at + 1:]
        page = [shown(i) for i in rows[:limit]]
    body: dict[str, Any] = {"images": page, "schema": "/v2/schemas/images",
                            "first": "/v2/images"}
    if page and len(page) == limit:
        query = [(k, v) for k, v in params.multi_items() if k not in ("marker", "limit")]
        body["next"] = "/v2/images?" + urlencode([*query, ("marker", page[-1]["id"]),
                                                   ("limit", str(limit))])
    return body


@router.get("/v2/images/{image_id}")
def show_image(image_id: str, request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        image = cloud.kind("image").get(image_id)
        if image is None or not visible(image, who):
            raise image_error(404, f"No image found with ID {image_id}")
        return shown(image)
