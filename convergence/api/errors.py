"""Heat's error JSON and the status code of each error family, in one place.

Callers: ``convergence.api.app`` registers :func:`install` on the app; routes raise
:class:`ApiError` for errors of their own (a missing template, a malformed body). The shape is
Heat's FaultWrapper answer: ``{"code", "title", "explanation", "error": {"type", "message",
"traceback": null}}``, which heatclient and openstacksdk read (``error.message``).

Any other exception is a 500 that tells nothing of it (not its type, its text, an SQL
statement, a traceback): its message names the request's id (``convergence.api.request_ids``,
also in the ``X-Openstack-Request-Id`` header), which the log line of the exception carries.
A database outage is a 503 with ``Retry-After``. The messages of the families above are the
engine's own words, never a library's.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from convergence.api import request_ids
from convergence.errors import (
    CloudRefused,
    Conflict,
    InvalidParameter,
    NotFound,
    NotSupported,
    PreconditionFailed,
)
from convergence.logs import get_logger
from convergence.template import TemplateError
from convergence.template.errors import SYNTAX

# webob's titles and explanations, which Heat puts in its error bodies.
_TITLES: dict[int, tuple[str, str]] = {
    400: ("Bad Request", "The server could not comply with the request since it is either "
                         "malformed or otherwise incorrect."),
    401: ("Unauthorized", "This server could not verify that you are authorized to access "
                          "the document you requested. Either you supplied the wrong "
                          "credentials (e.g., bad password), or your browser does not "
                          "understand how to supply the credentials required."),
    403: ("Forbidden", "Access was denied to this resource."),
    404: ("Not Found", "The resource could not be found."),
    405: ("Method Not Allowed", "The method is not allowed for this resource."),
    409: ("Conflict", "There was a conflict when trying to complete your request."),
    412: ("Precondition Failed", "Request precondition failed."),
    413: ("Request Entity Too Large", "The body of your request was too large for this "
                                      "server."),
    500: ("Internal Server Error", "The server has either erred or is incapable of performing "
                                   "the requested operation."),
    503: ("Service Unavailable", "The server is currently unavailable."),
}
_HTTP_TYPES = {400: "HTTPBadRequest", 401: "HTTPUnauthorized", 403: "HTTPForbidden",
               404: "NotFound",
               405: "HTTPMethodNotAllowed", 409: "HTTPConflict",
               412: "HTTPPreconditionFailed", 500: "HTTPInternalServerError",
               503: "HTTPServiceUnavailable"}
OUTAGE_RETRY_AFTER = "5"  # seconds: a database restart or failover


class ApiError(Exception):
    """An error answered as is: a status code, Heat's error type and a message."""

    def __init__(self, code: int, type_: str, message: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.type = type_
        self.message = message
        self.headers = headers


def error_body(code: int, type_: str, message: str) -> dict[str, Any]:
    title, explanation = _TITLES.get(code, (str(code), ""))
    return {"code": code, "title": title, "explanation": explanation,
            "error": {"type": type_, "message": message, "traceback": None}}


def error_response(code: int, type_: str, message: str,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(code, type_, message), status_code=code, headers=headers)


def internal_message(request_id: str) -> str:
    """What an unexpected error's 500 says: nothing of the error, its request's id."""
    return (f"The server could not complete the request. Its error is logged under the "
            f"request id {request_id}.")


def template_message(exc: TemplateError) -> str:
    """Every problem on its own line, each with its path."""
    return "\n".join(str(p) for p in exc.problems)


def is_too_large(exc: TemplateError) -> bool:
    """Whether the template package refused a document for its size (and nothing else)."""
    return all(p.kind == SYNTAX and "over the limit of" in p.message for p in exc.problems)


def install(app: FastAPI) -> None:
    """Register the handlers that turn exceptions into Heat's error JSON."""

    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.code, exc.type, exc.message, exc.headers)

    @app.exception_handler(TemplateError)
    async def _template(_: Request, exc: TemplateError) -> JSONResponse:
        if is_too_large(exc):
            return error_response(413, "RequestLimitExceeded", template_message(exc))
        return error_response(400, "StackValidationFailed", template_message(exc))

    @app.exception_handler(NotFound)
    async def _not_found(_: Request, exc: NotFound) -> JSONResponse:
        return error_response(404, "EntityNotFound", str(exc))

    @app.exception_handler(Conflict)
    async def _conflict(_: Request, exc: Conflict) -> JSONResponse:
        return error_response(409, "Conflict", str(exc))

    @app.exception_handler(NotSupported)
    async def _not_supported(_: Request, exc: NotSupported) -> JSONResponse:
        return error_response(400, "NotSupported", str(exc))

    @app.exception_handler(InvalidParameter)
    async def _invalid_parameter(_: Request, exc: InvalidParameter) -> JSONResponse:
        return error_response(400, "HTTPBadRequest", str(exc))

    @app.exception_handler(CloudRefused)
    async def _cloud_refused(_: Request, exc: CloudRefused) -> JSONResponse:
        if exc.retryable:
            return error_response(503, "ServiceUnavailable", str(exc), {"Retry-After": "5"})
        return error_response(403, "Forbidden", str(exc))

    @app.exception_handler(PreconditionFailed)
    async def _precondition(_: Request, exc: PreconditionFailed) -> JSONResponse:
        return error_response(412, "PreconditionFailed", str(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for e in exc.errors():
            where = ".".join(str(x) for x in e.get("loc", ()))
            parts.append(f"{where}: {e.get('msg', 'invalid')}" if where else str(e.get("msg")))
        return error_response(400, "HTTPBadRequest", "\n".join(parts) or "Invalid request")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = exc.status_code
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        headers = dict(exc.headers) if exc.headers else None
        return error_response(code, _HTTP_TYPES.get(code, "HTTPError"), message, headers)

    # What escapes ``request_ids.RequestIdMiddleware`` (which answers with the same), or an app
    # built without it.
    app.exception_handler(Exception)(unexpected)


async def unexpected(request: Request, exc: Exception) -> JSONResponse:
    """The answer to an exception no other handler took: 503 for a database outage, else a
    500 naming only the request's id; the exception is logged under that id."""
    rid = request_ids.request_id(request)
    header = {request_ids.HEADER: rid}
    # The store tells its outages apart: a restart, a failover (the client may try again
    # shortly).
    if request.app.state.runtime.store.unreachable(exc):
        get_logger(__name__).warning("the database is unavailable", request_id=rid,
                                     error=type(exc).__name__)
        return error_response(503, _HTTP_TYPES[503], "The database is unavailable for now. "
                              "Try again.", {"Retry-After": OUTAGE_RETRY_AFTER, **header})
    # Its text (an SQL statement, a path, a value) and its traceback are the log's only. The
    # route's template is logged, not the path: a signed URL's path is its credential.
    route = getattr(request.scope.get("route"), "path", None)
    get_logger(__name__).error("unexpected error in the API", request_id=rid,
                               method=request.method, route=route, exc_info=exc)
    return error_response(500, _HTTP_TYPES[500], internal_message(rid), header)


class Redirect(Exception):
    """Answer 302 Found with this absolute ``Location`` (the stack lookup routes)."""

    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


def install_redirect(app: FastAPI) -> None:
    @app.exception_handler(Redirect)
    async def _redirect(_: Request, exc: Redirect) -> JSONResponse:
        body = {"code": 302, "title": "Found", "explanation": "The resource was found at "
                f"{exc.location}; you should be redirected automatically.", "location":
                exc.location}
        return JSONResponse(body, status_code=302, headers={"Location": exc.location})
