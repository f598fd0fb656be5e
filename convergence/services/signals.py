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

Callers: ``convergence.services.software`` mints them for the plugins (through
``SoftwareBackend.signed_url``) and ``convergence.api.signed`` verifies them.
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
    if not body or not mac:
        return None
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
               **more: str) -> dict[str, str]:
    return {"k": kind, "t": tenant, "s": stack_id, "r": resource, **more}


def url(public_url: str, token: str) -> str:
    return f"{public_url.rstrip('/')}{ROUTE}{token}"
