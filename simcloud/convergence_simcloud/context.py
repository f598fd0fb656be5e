"""Who is asking: a request's token resolved to user, project and roles; and the error answers.

Callers: every service route after authentication takes an :data:`Authenticated` argument (the
FastAPI dependency :func:`caller`) and gets a :class:`Caller`, so it filters what it shows by
``caller.project_id`` (project isolation) and checks ``caller.is_admin``;
``convergence_simcloud.identity`` uses :func:`token_record` to read ``X-Subject-Token``. A
missing, unknown or expired ``X-Auth-Token`` answers 401. :class:`CloudError` is the error a
route raises; ``convergence_simcloud.app`` renders it in the body format of the service that
raised it (Keystone's ``{"error": {"code", "title", "message"}}`` now; Nova's, Neutron's and
Cinder's when those services come).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request

from convergence_simcloud.state import SimCloud


class CloudError(Exception):
    """An error answer: ``status``, a ``title`` (Keystone) or type name, and a message."""

    def __init__(self, status: int, title: str, message: str, service: str = "identity",
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.title = title
        self.message = message
        self.service = service
        self.headers = headers or {}


def unauthorized(message: str = "The request you have made requires authentication.",
                 ) -> CloudError:
    return CloudError(401, "Unauthorized", message,
                      headers={"WWW-Authenticate": 'Keystone uri="/v3"'})


def not_found(message: str, service: str = "identity") -> CloudError:
    return CloudError(404, "Not Found", message, service)


@dataclass(frozen=True)
class Caller:
    """The token's holder, as the services see it."""

    token_id: str
    user_id: str
    user_name: str
    project_id: str | None
    project_name: str | None
    roles: tuple[str, ...]

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles


def cloud_of(request: Request) -> SimCloud:
    found: SimCloud = request.app.state.cloud
    return found


def token_record(cloud: SimCloud, token_id: str | None) -> dict[str, Any] | None:
    """The live token ``token_id`` (None: unknown, revoked or expired). Call under the lock."""
    if not token_id:
        return None
    token = cloud.table("tokens").get(token_id)
    if token is None or token["expires_at"] <= cloud.now():
        return None
    return token


def caller(request: Request) -> Caller:
    """The FastAPI dependency every authenticated route takes."""
    cloud = cloud_of(request)
    with cloud.locked():
        token = token_record(cloud, request.headers.get("x-auth-token"))
        if token is None:
            raise unauthorized()
        user = cloud.table("users")[token["user_id"]]
        project = cloud.table("projects").get(token.get("project_id") or "")
        roles = tuple(cloud.table("roles")[r]["name"] for r in token["role_ids"]
                      if r in cloud.table("roles"))
        return Caller(token_id=request.headers["x-auth-token"], user_id=user["id"],
                      user_name=user["name"],
                      project_id=None if project is None else project["id"],
                      project_name=None if project is None else project["name"],
                      roles=roles)


# The argument type of every authenticated route: ``who: Authenticated``.
Authenticated = Annotated[Caller, Depends(caller)]
