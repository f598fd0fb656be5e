"""Whose credentials a request's stack uses, as the API knows its caller.

Callers: the stack routes (``convergence.api.stacks``: create, update, validate). The use cases
take what is decided here (``convergence.services.credentials`` says the rules):

- ``noauth``: the process's own cloud, or one the body names (``cloud``) among
  ``CONVERGENCE_STACK_CLOUDS``.
- ``token``: the cloud mapped to the URL's project (``CONVERGENCE_PROJECT_CLOUDS``), or
  another of that project's clouds the body names; an admin may name any. A project with no
  cloud gets none (``NO_CLOUD``), never the engine's default one.
- ``keystone``: the body's cloud as in noauth, worked in through a trust from the caller
  (:func:`delegation`), which needs a token scoped to the URL's project: an admin's token
  scoped elsewhere delegates nothing, and its stack gets no cloud.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import Request

from convergence.api.auth import Identity
from convergence.api.errors import ApiError
from convergence.api.requests import bad_request
from convergence.plugins.base import DEFAULT_SCOPE, NO_CLOUD, CloudScope, Delegation
from convergence.runtime import Runtime


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a request hands the use cases about its stack's cloud: the ``scope`` a new stack
    gets (an update: the one a stack with none of its own gets), and in keystone mode
    (``delegated``) the ``caller`` who gives the engine its trust (None: nobody can)."""

    scope: CloudScope = DEFAULT_SCOPE
    caller: Delegation | None = None
    delegated: bool = False

    def create_options(self) -> dict[str, Any]:
        return {"scope": self.scope, "caller": self.caller, "delegated": self.delegated}

    def update_options(self) -> dict[str, Any]:
        return {"scope": self.scope if self.scope != DEFAULT_SCOPE else None,
                "caller": self.caller, "delegated": self.delegated}


def _identity(request: Request) -> Identity | None:
    found: Identity | None = getattr(request.state, "identity", None)
    return found


def _mode(request: Request) -> str:
    authenticator = getattr(request.app.state, "authenticator", None)
    return str(getattr(authenticator, "mode", "noauth"))


def credentials(request: Request, rt: Runtime, tenant_id: str,
                body: Mapping[str, Any] | None = None) -> Credentials:
    """The credentials of a request on a stack of ``tenant_id`` (``body``: a create's, which
    may name the stack's cloud)."""
    mode = _mode(request)
    identity = _identity(request)
    admin = identity is not None and identity.is_admin
    cloud = (body or {}).get("cloud")
    if cloud is not None and (not isinstance(cloud, str) or not cloud
                              or cloud.startswith("<")):
        raise bad_request("'cloud' must be the name of a cloud.")
    if mode == "token":
        own = rt.settings.project_clouds.get(tenant_id, ())
        if cloud is None:
            return Credentials(CloudScope(cloud=own[0] if own else NO_CLOUD))
        if cloud in own or admin:
            return Credentials(CloudScope(cloud=cloud))
        raise _forbidden_cloud(cloud)
    scope = DEFAULT_SCOPE
    if cloud is not None:
        if cloud not in rt.settings.stack_clouds and not admin:
            raise _forbidden_cloud(cloud)
        scope = CloudScope(cloud=cloud)
    if mode == "keystone":
        return Credentials(scope, delegation(request, tenant_id), delegated=True)
    return Credentials(scope)


def _forbidden_cloud(cloud: str) -> ApiError:
    return ApiError(403, "Forbidden", f"You are not authorized to put a stack in cloud "
                                      f"{cloud!r}.")


def delegation(request: Request, tenant_id: str) -> Delegation | None:
    """What a caller Keystone authenticated hands the engine, so that the stack's resources
    are made in the stack's project as the caller (None: not in keystone mode, or a token not
    scoped to the URL's project, such as an admin's acting for another project: it cannot
    delegate work there)."""
    identity = _identity(request)
    token = request.headers.get("x-auth-token")
    if _mode(request) != "keystone" or identity is None or not token \
            or identity.project != tenant_id or identity.user is None:
        return None
    return Delegation(token=token, project_id=identity.project, user_id=identity.user,
                      role_ids=identity.role_ids)
