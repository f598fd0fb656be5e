"""Keystone's trusts (``OS-TRUST``): a user (the trustor) lets another (the trustee) act in one
of its projects with some of its roles, and the trustee gets tokens scoped by the trust.

Callers: ``convergence_simcloud.app`` mounts :data:`router` beside the identity routes;
``convergence_simcloud.identity`` asks :func:`trust_scope` when a token is requested with
``{"scope": {"OS-TRUST:trust": {"id": ...}}}``. As in Keystone: only the trustor creates a
trust, for a project its token is scoped to and roles it has there; the trustor or the trustee
may read it; the trustor (an impersonating trust-scoped token is the trustor's) or an admin
deletes it; a trust-scoped token has the trust's project and roles and, with
``impersonation``, the trustor as its user. An expired or deleted trust scopes nothing.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from convergence_simcloud.context import (
    Authenticated,
    Caller,
    CloudError,
    cloud_of,
    not_found,
    unauthorized,
)
from convergence_simcloud.state import SimCloud

router = APIRouter()


def _forbidden(message: str) -> CloudError:
    return CloudError(403, "Forbidden", message)


def _bad(message: str) -> CloudError:
    return CloudError(400, "Bad Request", message)


def _expiry(value: Any) -> float | None:
    if value in (None, ""):
        return None
    try:
        when = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise _bad(f"Invalid expires_at: {value}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()


def _shown(cloud: SimCloud, trust: dict[str, Any], base: str) -> dict[str, Any]:
    roles = cloud.table("roles")
    expires = trust["expires_at"]
    return {"id": trust["id"], "trustor_user_id": trust["trustor_user_id"],
            "trustee_user_id": trust["trustee_user_id"], "project_id": trust["project_id"],
            "impersonation": trust["impersonation"], "remaining_uses": None,
            "expires_at": None if expires is None else datetime.datetime.fromtimestamp(
                expires, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
            "roles": [{"id": r, "name": roles[r]["name"]} for r in trust["role_ids"]
                      if r in roles],
            "links": {"self": f"{base}/v3/OS-TRUST/trusts/{trust['id']}"}}


def _role_ids(cloud: SimCloud, refs: Any, who: Caller) -> list[str]:
    """The roles a trust delegates, each one the trustor has on the project."""
    if not isinstance(refs, list) or not refs:
        raise _bad("A trust delegates at least one role.")
    held = {r["id"]: r for r in cloud.roles_of(who.user_id, str(who.project_id))}
    by_name = {r["name"].lower(): i for i, r in held.items()}
    ids = []
    for ref in refs:
        if not isinstance(ref, dict):
            raise _bad("Each role is {id} or {name}.")
        found = ref.get("id") if ref.get("id") in held else by_name.get(
            str(ref.get("name") or "").lower())
        if found is None:
            role = ref.get("id") or ref.get("name")
            raise _forbidden(f"The trustor does not have the role {role} on the project.")
        ids.append(found)
    return ids


@router.post("/OS-TRUST/trusts", status_code=201)
async def create_trust(request: Request, who: Authenticated) -> JSONResponse:
    try:
        body = (await request.json())["trust"]
        assert isinstance(body, dict)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise _bad("Expecting to find trust in the request.") from None
    cloud = cloud_of(request)
    with cloud.locked():
        if cloud.table("tokens")[who.token_id].get("trust_id"):
            raise _forbidden("A trust-scoped token cannot create a trust.")
        if body.get("trustor_user_id") != who.user_id:
            raise _forbidden("Only the trustor may create a trust.")
        if body.get("project_id") != who.project_id or who.project_id is None:
            raise _forbidden("A trust is for the project the trustor's token is scoped to.")
        if cloud.table("users").get(str(body.get("trustee_user_id"))) is None:
            raise not_found(f"Could not find user: {body.get('trustee_user_id')}.")
        trust = {"id": uuid.uuid4().hex, "trustor_user_id": who.user_id,
                 "trustee_user_id": body["trustee_user_id"], "project_id": who.project_id,
                 "impersonation": bool(body.get("impersonation", False)),
                 "expires_at": _expiry(body.get("expires_at")),
                 "role_ids": _role_ids(cloud, body.get("roles"), who)}
        cloud.table("trusts")[trust["id"]] = trust
        shown = _shown(cloud, trust, _base(request))
    cloud.changed()
    return JSONResponse({"trust": shown}, status_code=201)


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _visible(cloud: SimCloud, trust_id: str, who: Caller) -> dict[str, Any]:
    trust = cloud.table("trusts").get(trust_id)
    if trust is None or not (who.is_admin or who.user_id in (
            trust["trustor_user_id"], trust["trustee_user_id"])):
        raise not_found(f"Could not find trust: {trust_id}.")
    return trust


@router.get("/OS-TRUST/trusts/{trust_id}")
def show_trust(trust_id: str, request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        return {"trust": _shown(cloud, _visible(cloud, trust_id, who), _base(request))}


@router.get("/OS-TRUST/trusts")
def list_trusts(request: Request, who: Authenticated) -> dict[str, Any]:
    cloud = cloud_of(request)
    with cloud.locked():
        rows = [t for t in cloud.table("trusts").values()
                if who.is_admin or who.user_id in (t["trustor_user_id"], t["trustee_user_id"])]
        return {"trusts": [_shown(cloud, t, _base(request)) for t in rows],
                "links": {"self": str(request.url), "next": None, "previous": None}}


@router.delete("/OS-TRUST/trusts/{trust_id}", status_code=204)
def delete_trust(trust_id: str, request: Request, who: Authenticated) -> Response:
    cloud = cloud_of(request)
    with cloud.locked():
        trust = _visible(cloud, trust_id, who)
        if not (who.is_admin or who.user_id == trust["trustor_user_id"]):
            raise _forbidden("Only the trustor may delete a trust.")
        del cloud.table("trusts")[trust_id]
        # Tokens the trust scoped die with it.
        tokens = cloud.table("tokens")
        for token_id in [t for t, r in tokens.items() if r.get("trust_id") == trust_id]:
            del tokens[token_id]
    cloud.changed()
    return Response(status_code=204)


def trust_scope(cloud: SimCloud, trust_id: Any, trustee_id: str) -> dict[str, Any]:
    """What a token scoped by trust ``trust_id`` carries, for the trustee ``trustee_id``:
    ``user_id``, ``project_id``, ``role_ids`` and ``trust_id``. Call under the lock."""
    trust = cloud.table("trusts").get(str(trust_id))
    expires = trust["expires_at"] if trust is not None else None
    if trust is None or (expires is not None and expires <= cloud.now()):
        raise unauthorized(f"Could not find trust: {trust_id}")
    if trust["trustee_user_id"] != trustee_id:
        raise _forbidden("The user is not the trustee of the trust.")
    trustor = cloud.table("users").get(trust["trustor_user_id"])
    if trustor is None or not trustor["enabled"]:
        raise unauthorized("The trustor is disabled or gone.")
    held = {r["id"] for r in cloud.roles_of(trust["trustor_user_id"], trust["project_id"])}
    if not set(trust["role_ids"]) <= held:
        raise unauthorized("The trustor no longer has the roles the trust delegates.")
    return {"user_id": trust["trustor_user_id"] if trust["impersonation"] else trustee_id,
            "project_id": trust["project_id"], "role_ids": list(trust["role_ids"]),
            "trust_id": trust["id"]}


def trust_body(cloud: SimCloud, trust_id: str) -> dict[str, Any] | None:
    """The ``OS-TRUST:trust`` part of a token's body."""
    trust = cloud.table("trusts").get(trust_id)
    if trust is None:
        return None
    return {"id": trust["id"], "impersonation": trust["impersonation"],
            "trustor_user": {"id": trust["trustor_user_id"]},
            "trustee_user": {"id": trust["trustee_user_id"]}}
