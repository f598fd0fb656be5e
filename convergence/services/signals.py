"""Signed URLs: how a server's agent, a wait condition's curl or an alarm reaches the API
without a tenant's token, and can reach nothing else.

A token is the base64url of a small JSON claim (``k``: what it is for, ``t``: the tenant,
``s``: the stack, ``r``: the resource, and per kind more: the deployment and the derived
config a report is for) and an HMAC-SHA256 of it with the engine's signing key
(``CONVERGENCE_SIGNING_KEY``, else one the engine makes once and keeps in its database). The
API's ``/v1/signed/{token}`` routes (``convergence.api.signed``) verify it and act on exactly
that resource: a token is the capability to signal one resource or read one server's
deployments, as Heat's pre-signed CFN and temp URLs are. Tokens are secrets: they are never
logged nor put in events.

A token is bound to what it was made for, not to a name (:func:`resolve`): ``i`` is the record
(the resource's version) that made it, which must still be the current version of that name
of that tenant's stack; a deployment's token names the deployment and the derived config it
applies, which must still be the one that deployment applies. So once a resource is replaced
(a server by a flavor change, a handle by an update), its old URL reaches nothing, not the new
version. A token made before ``i`` existed is taken while its resource has never been replaced
(the only version there has been). With ``CONVERGENCE_SIGNED_URL_SECONDS`` set, a URL is good
for that many seconds after its resource's version (a deployment's URL: its derived config)
was made; a token carries no time of its own, so it stays the same for one version and what
reads it (``get_attr``) sees no change. Whatever does not verify is None: the API answers 404,
telling a bad signature, an expired URL and a replaced resource apart to nobody.

Callers: ``convergence.services.software`` mints them for the plugins (through
``SoftwareBackend.signed_url``) and ``convergence.api.signed`` resolves them (:func:`resolve`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from convergence.ports.store import Tx
from convergence.ports.views import RecordView

if TYPE_CHECKING:
    from convergence.services.context import Runtime

SIGNAL, METADATA, DEPLOYMENT = "signal", "metadata", "deployment"
KINDS = (SIGNAL, METADATA, DEPLOYMENT)
KEY_NAME = "signing"
ROUTE = "/v1/signed/"

_keys: dict[int, bytes] = {}
_lock = threading.Lock()


def signing_key(rt: Runtime) -> bytes:
    """The key tokens are signed with: the configured one, else the database's (made once)."""
    if rt.settings.signing_key:
        return rt.settings.signing_key.encode()
    with _lock:
        found = _keys.get(id(rt.store))
        if found is None:
            def key(tx: Tx) -> str:
                return tx.service_key(KEY_NAME)

            found = _keys[id(rt.store)] = rt.store.transact(key).encode()
        return found


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(key: bytes, claims: Mapping[str, str]) -> str:
    body = _b64(json.dumps(dict(claims), sort_keys=True, separators=(",", ":")).encode())
    mac = _b64(hmac.new(key, body.encode(), hashlib.sha256).digest())
    return f"{body}.{mac}"


def verify(key: bytes, token: str) -> dict[str, str] | None:
    """The claims of a token signed with ``key``; None when it is not one."""
    body, _, mac = token.partition(".")
    if not body or not mac or not token.isascii():
        return None  # a signature is base64url: anything else is not one (nor comparable)
    expected = _b64(hmac.new(key, body.encode(), hashlib.sha256).digest())
    if not hmac.compare_digest(expected, mac):
        return None
    try:
        claims: Any = json.loads(_unb64(body))
    except ValueError:
        return None
    if not isinstance(claims, dict) or claims.get("k") not in KINDS:
        return None
    return {str(k): str(v) for k, v in claims.items()}


def claims_for(kind: str, tenant: str, stack_id: str, resource: str,
               record: int | None = None, **more: str) -> dict[str, str]:
    """What a token says: its kind, the tenant, the stack, the resource's name and the record
    (the resource's version) it is made for, and per kind more (``d``, ``c``)."""
    record_claim = {} if record is None else {"i": str(record)}
    return {"k": kind, "t": tenant, "s": stack_id, "r": resource, **record_claim, **more}


def record_of(claims: Mapping[str, str]) -> int | None:
    """The record a token was made for; None for a token made before tokens named one."""
    found = claims.get("i")
    return int(found) if found is not None and found.isdigit() else None


def resolve(rt: Runtime, token: str, kinds: tuple[str, ...]) -> dict[str, str] | None:
    """The claims of ``token`` if it is good now: signed with the engine's key, of one of
    ``kinds``, what it was made for still there and current, and not expired; else None."""
    claims = verify(signing_key(rt), token)
    if claims is None or claims["k"] not in kinds:
        return None
    with rt.store.read() as tx:
        made_at = _made_at(tx, claims)
    lifetime = rt.settings.signed_url_seconds
    if made_at is None or (lifetime is not None and rt.clock.now() > made_at + lifetime):
        return None
    return claims


def _made_at(tx: Tx, claims: Mapping[str, str]) -> float | None:
    """When what the token was made for was made; None when it is not current any more."""
    if claims["k"] == DEPLOYMENT:
        dep = tx.software_deployment(claims.get("d", ""), claims["t"])
        if dep is None or claims.get("c", dep.config_id) != dep.config_id:
            return None  # gone, or re-applied since (a new server, new inputs): a new URL
        if "i" in claims and dep.owner != f"{claims['s']}/{claims['i']}":
            return None
        config = tx.software_config(dep.config_id)
        return dep.created_at if config is None else config.created_at
    stack = tx.stack(claims["s"], outputs=False)
    if stack is None or stack.tenant != claims["t"]:
        return None
    head = tx.heads(stack.id, [claims["r"]]).get(claims["r"])
    return head.created_at if head is not None and _made_for(head, claims) else None


def _made_for(head: RecordView, claims: Mapping[str, str]) -> bool:
    """Whether ``head``, the current version of the token's resource, is what it was made
    for: the record it names, or, for a token that names none, the only version there has
    been."""
    record = record_of(claims)
    if record is None:
        return "i" not in claims and head.replaces is None
    return head.id == record


def url(public_url: str, token: str) -> str:
    return f"{public_url.rstrip('/')}{ROUTE}{token}"
