"""Keystone v3: the version document, tokens (password, token, application credential;
scoped to a project or by a trust, ``convergence_simcloud.trusts``),
their validation and revocation, and the projects a token may see.

Callers: ``convergence_simcloud.app`` mounts :data:`router` at ``/v3`` and serves
:func:`versions` at ``/``. Shapes follow Keystone's: ``POST /v3/auth/tokens`` answers 201 with
the token id in ``X-Subject-Token`` and ``{"token": {methods, user, project, roles, catalog,
expires_at, issued_at, audit_ids}}``; ``GET /v3/auth/tokens`` validates ``X-Subject-Token``
(200, or 404 when unknown or expired), ``HEAD`` checks it and ``DELETE`` revokes it; as in
Keystone's policy, a caller with the ``admin`` or ``service`` role may do so for any token,
another only for a token of its own user (403 otherwise, unknown tokens included, so that no
one learns which tokens exist). A failed authentication answers 401 in Keystone's error
body. A token lives ``Options.token_lifetime`` seconds on the cloud's clock.
"""

from __future__ import annotations

import datetime
import secrets
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from convergence_simcloud.catalog import catalog
from convergence_simcloud.context import (
    Authenticated,
    Caller,
    CloudError,
    cloud_of,
    not_found,
    token_record,
    unauthorized,
)
from convergence_simcloud.state import SimCloud
from convergence_simcloud.trusts import trust_body, trust_scope

router = APIRouter()
TOKEN_ROLES = frozenset({"admin", "service"})  # may validate, check and revoke any token
MEDIA = [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}]


def iso(when: float) -> str:
    stamp = datetime.datetime.fromtimestamp(when, datetime.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def version(request: Request) -> dict[str, Any]:
    return {"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
            "links": [{"rel": "self", "href": base_url(request) + "/v3/"}],
            "media-types": MEDIA}


def versions(request: Request) -> JSONResponse:
    """``GET /``: Keystone answers 300 Multiple Choices with the versions it has."""
    return JSONResponse({"versions": {"values": [version(request)]}}, status_code=300)


@router.get("")
@router.get("/")
def version_document(request: Request) -> dict[str, Any]:
    return {"version": version(request)}


# -- issuing ---------------------------------------------------------------------------------

def _user(cloud: SimCloud, ref: dict[str, Any]) -> dict[str, Any] | None:
    if ref.get("id"):
        return cloud.find("users", id=ref["id"])
    domain_id = cloud.domain_id(ref.get("domain"))
    return None if domain_id is None else cloud.find("users", name=ref.get("name"),
                                                     domain_id=domain_id)


def _authenticate(cloud: SimCloud, identity: dict[str, Any]) -> dict[str, Any]:
    """Check the identity part of the request: the user, the methods and what they bring."""
    methods = list(identity.get("methods") or [])
    if "password" in methods:
        ref = (identity.get("password") or {}).get("user") or {}
        user = _user(cloud, ref)
        if user is None or not user["enabled"] or user["password"] != ref.get("password"):
            raise unauthorized()
        return {"user_id": user["id"], "methods": methods}
    if "token" in methods:
        token = token_record(cloud, (identity.get("token") or {}).get("id"))
        if token is None:
            raise unauthorized("Could not find token.")
        return {"user_id": token["user_id"], "methods": methods,
                "project_id": token.get("project_id"),
                "role_ids": token["role_ids"],
                "application_credential_id": token.get("application_credential_id"),
                "trust_id": token.get("trust_id"),
                "audit_chain": token["audit_ids"][:1]}
    if "application_credential" in methods:
        ref = identity.get("application_credential") or {}
        if ref.get("id"):
            cred = cloud.table("application_credentials").get(ref["id"])
        else:
            user = _user(cloud, ref.get("user") or {})
            cred = next((c for c in cloud.table("application_credentials").values()
                         if user is not None and c["user_id"] == user["id"]
                         and c["name"] == ref.get("name")), None)
        if cred is None or cred["secret"] != ref.get("secret"):
            raise unauthorized()
        return {"user_id": cred["user_id"], "methods": methods,
                "project_id": cred["project_id"], "role_ids": cred["role_ids"],
                "application_credential_id": cred["id"]}
    raise unauthorized(f"Unsupported authentication methods: {methods}")


def _scope(cloud: SimCloud, scope: Any, found: dict[str, Any], user: dict[str, Any],
           ) -> str | None:
    """The project the token is scoped to (None: unscoped)."""
    if found.get("application_credential_id"):
        return str(found["project_id"])  # always the credential's project
    if scope is None:  # a token keeps its project; a password gets the user's default one
        return found.get("project_id") if "token" in found["methods"] \
            else user.get("default_project_id")
    project_ref = scope.get("project") if isinstance(scope, dict) else None
    if project_ref is None:
        return None  # a domain or system scope: not simulated, the token is unscoped
    if project_ref.get("id"):
        project = cloud.find("projects", id=project_ref["id"])
    else:
        domain_id = cloud.domain_id(project_ref.get("domain"))
        project = None if domain_id is None else cloud.find(
            "projects", name=project_ref.get("name"), domain_id=domain_id)
    if project is None or not cloud.roles_of(user["id"], project["id"]):
        raise unauthorized(f"User {user['id']} has no access to project "
                           f"{project_ref.get('id') or project_ref.get('name')}")
    return str(project["id"])


def token_body(cloud: SimCloud, token: dict[str, Any], base: str) -> dict[str, Any]:
    user = cloud.table("users")[token["user_id"]]
    domain = cloud.table("domains")[user["domain_id"]]
    body: dict[str, Any] = {
        "methods": token["methods"], "audit_ids": token["audit_ids"],
        "expires_at": iso(token["expires_at"]), "issued_at": iso(token["issued_at"]),
        "user": {"id": user["id"], "name": user["name"], "password_expires_at": None,
                 "domain": {"id": domain["id"], "name": domain["name"]}},
    }
    project = cloud.table("projects").get(token.get("project_id") or "")
    if project is not None:
        pdomain = cloud.table("domains")[project["domain_id"]]
        body["project"] = {"id": project["id"], "name": project["name"],
                           "domain": {"id": pdomain["id"], "name": pdomain["name"]}}
        body["is_domain"] = False
        body["roles"] = [{"id": r, "name": cloud.table("roles")[r]["name"]}
                         for r in token["role_ids"] if r in cloud.table("roles")]
        body["catalog"] = catalog(base, project["id"], cloud.options.region)
    trust = trust_body(cloud, token["trust_id"]) if token.get("trust_id") else None
    if trust is not None:
        body["OS-TRUST:trust"] = trust
    cred_id = token.get("application_credential_id")
    if cred_id and cred_id in cloud.table("application_credentials"):
        cred = cloud.table("application_credentials")[cred_id]
        body["application_credential"] = {"id": cred["id"], "name": cred["name"],
                                          "restricted": not cred["unrestricted"]}
    return {"token": body}


def issue(cloud: SimCloud, auth: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Authenticate ``auth`` (the request's ``auth`` object); the new token's id and record."""
    found = _authenticate(cloud, auth.get("identity") or {})
    user = cloud.table("users")[found["user_id"]]
    if not user["enabled"]:
        raise unauthorized()
    scope = auth.get("scope")
    if isinstance(scope, dict) and "OS-TRUST:trust" in scope:
        trusted = trust_scope(cloud, (scope["OS-TRUST:trust"] or {}).get("id"), user["id"])
        found = {**found, **trusted}
        user = cloud.table("users")[trusted["user_id"]]
        scope = None
    project_id = _scope(cloud, scope, found, user)
    if found.get("role_ids") is not None and project_id == found.get("project_id"):
        role_ids = list(found["role_ids"])
    else:
        role_ids = [] if project_id is None else \
            [r["id"] for r in cloud.roles_of(user["id"], project_id)]
    now = cloud.now()
    token_id = "gAAAAA" + secrets.token_urlsafe(48)
    record = {"user_id": user["id"], "project_id": project_id, "role_ids": role_ids,
              "methods": found["methods"], "issued_at": now,
              "expires_at": now + cloud.options.token_lifetime,
              "application_credential_id": found.get("application_credential_id"),
              "trust_id": found.get("trust_id"),
              "audit_ids": [secrets.token_urlsafe(16), *found.get("audit_chain", [])]}
    cloud.table("tokens")[token_id] = record
    return token_id, record


@router.post("/auth/tokens", status_code=201)
async def create_token(request: Request) -> JSONResponse:
    try:
        payload = await request.json()
        auth = payload["auth"]
    except (ValueError, KeyError, TypeError):
        raise CloudError(400, "Bad Request", "Expecting to find auth in the request.") from None
    cloud = cloud_of(request)
    with cloud.locked():
        _purge_expired(cloud)
        token_id, record = issue(cloud, auth)
        body = token_body(cloud, record, base_url(request))
    cloud.changed()
    return JSONResponse(body, status_code=201, headers={"X-Subject-Token": token_id})


def _purge_expired(cloud: SimCloud) -> None:
    now = cloud.now()
    tokens = cloud.table("tokens")
    for token_id in [t for t, r in tokens.items() if r["expires_at"] <= now]:
        del tokens[token_id]


# -- validation ------------------------------------------------------------------------------

def _subject(cloud: SimCloud, who: Caller, subject: str | None,
             action: str) -> dict[str, Any] | None:
    """The live token ``subject`` (None: unknown or expired) if ``who`` may ``action`` it: any
    token with the admin or service role, else only one of its own user's (403). Under the
    lock."""
    token = token_record(cloud, subject)
    if TOKEN_ROLES & set(who.roles):
        return token
    if token is None or token["user_id"] != who.user_id:
        raise CloudError(403, "Forbidden", "You are not authorized to perform the requested "
                         f"action: identity:{action}.")
    return token


@router.get("/auth/tokens")
def validate_token(request: Request, who: Authenticated) -> JSONResponse:
    cloud = cloud_of(request)
    subject = request.headers.get("x-subject-token")
    with cloud.locked():
        token = _subject(cloud, who, subject, "validate_token")
        if token is None or subject is None:
            raise not_found(f"Could not find token: {subject}")
        body = token_body(cloud, token, base_url(request))
    return JSONResponse(body, headers={"X-Subject-Token": subject})


@router.head("/auth/tokens")
def check_token(request: Request, who: Authenticated) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        found = _subject(cloud, who, request.headers.get("x-subject-token"), "check_token")
    return Response(status_code=200 if found is not None else 404)


@router.delete("/auth/tokens", status_code=204)
def revoke_token(request: Request, who: Authenticated) -> Response:
    cloud = cloud_of(request)
    subject = request.headers.get("x-subject-token") or ""
    with cloud.locked():
        _subject(cloud, who, subject, "revoke_token")
        if cloud.table("tokens").pop(subject, None) is None:
            raise not_found(f"Could not find token: {subject}")
    cloud.changed()
    return Response(status_code=204)


# -- projects --------------------------------------------------------------------------------

def _project(cloud: SimCloud, project: dict[str, Any], base: str) -> dict[str, Any]:
    shown = dict(project)
    shown["links"] = {"self": f"{base}/v3/projects/{project['id']}"}
    return shown


@router.get("/auth/projects")
def auth_projects(request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        rows = [_project(cloud, p, base_url(request)) for p in cloud.projects_of(who.user_id)]
    return {"projects": rows, "links": {"self": str(request.url), "next": None,
                                        "previous": None}}


@router.get("/projects")
def list_projects(request: Request, who: Authenticated) -> dict[str, Any]:
    """Admins see every project; others, those they have a role on."""
    cloud = cloud_of(request)
    name = request.query_params.get("name")
    with cloud.locked():
        rows = list(cloud.table("projects").values()) if who.is_admin \
            else cloud.projects_of(who.user_id)
        shown = [_project(cloud, p, base_url(request)) for p in rows
                 if name is None or p["name"] == name]
    return {"projects": shown, "links": {"self": str(request.url), "next": None,
                                         "previous": None}}


@router.get("/projects/{project_id}")
def show_project(project_id: str, request: Request,
                 who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        project = cloud.find("projects", id=project_id)
        if project is None or not (who.is_admin or project_id == who.project_id):
            raise not_found(f"Could not find project: {project_id}.")
        return {"project": _project(cloud, project, base_url(request))}

