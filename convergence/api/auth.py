"""Who is calling: authentication of the ``/v1/{tenant_id}/...`` routes.

Callers: ``convergence.api.app.create_app`` builds an :class:`Authenticator` from the settings
(:func:`build_authenticator`) and keeps it on ``app.state.authenticator``; the stack router
depends on :func:`require_auth`, which answers 401/403 in Heat's error shape and leaves the
caller's :class:`Identity` on ``request.state.identity``. The version document and ``/healthz``
are not under the router and stay unauthenticated.

Modes (``CONVERGENCE_AUTH``):

``noauth``    the URL's tenant is the caller's project, with the roles ``member`` and
              ``reader`` (not ``admin``); ``X-Auth-Token`` is ignored. Said
              loudly (:func:`auth_warnings`: a warning logged at start and one in ``/healthz``);
              ``convergence api`` serves it on loopback addresses only unless allowed
              (``--allow-noauth``, ``CONVERGENCE_ALLOW_NOAUTH``).
``token``     ``X-Auth-Token`` must be one of the tokens of ``CONVERGENCE_TOKENS_FILE`` (YAML or
              JSON: ``{token: {project: ..., roles: [...]}}``).
``keystone``  ``X-Auth-Token`` is validated against Keystone v3 (``GET /v3/auth/tokens`` with
              ``X-Subject-Token``, authenticated with the service's own token) via keystoneauth1.

In the last two modes the token's project must equal the URL's tenant (403 otherwise) unless
the token has the ``admin`` role. What the caller may do there is the policy's
(``convergence.api.policy``: each route names its Heat rule). Tokens are secrets: they are
never logged nor put in an error message; the Keystone cache is keyed by their SHA-256.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml
from fastapi import Request

from convergence.api.errors import ApiError
from convergence.settings import Settings

log = logging.getLogger(__name__)

ADMIN_ROLE = "admin"
AUTH_MODES = ("noauth", "token", "keystone")

NOAUTH_WARNING = ("Authentication is off (CONVERGENCE_AUTH=noauth): whoever reaches this API "
                  "may act as any tenant. Set CONVERGENCE_AUTH=token or keystone to require "
                  "tokens.")


@dataclass(frozen=True, slots=True)
class Identity:
    """The caller: its project (tenant), roles and, when known, user id."""

    project: str
    roles: frozenset[str] = frozenset()
    user: str | None = None
    # The roles' Keystone ids (keystone mode): what a trust to the engine delegates.
    role_ids: tuple[str, ...] = ()

    @property
    def is_admin(self) -> bool:
        return ADMIN_ROLE in self.roles


def unauthorized(message: str = "Authentication required: send a valid X-Auth-Token.",
                 headers: dict[str, str] | None = None) -> ApiError:
    return ApiError(401, "HTTPUnauthorized", message, headers)


def server_error(message: str) -> ApiError:
    return ApiError(500, "HTTPInternalServerError", message)


class Authenticator(Protocol):
    """Turns a request's token (``None`` when absent) into the caller's identity.

    ``tenant`` is the URL's tenant, which only ``noauth`` uses. Raises :class:`ApiError`
    (401 for a missing or unknown token, 500 when the authenticator cannot work).
    """

    mode: str

    def identify(self, token: str | None, tenant: str) -> Identity: ...


NOAUTH_ROLES = frozenset({"member", "reader"})


class NoAuth:
    """No authentication: the caller is a member of the URL's tenant (one person's own
    engine: it may do all a project's member may, not administer the engine)."""

    mode = "noauth"

    def identify(self, token: str | None, tenant: str) -> Identity:
        return Identity(project=tenant, roles=NOAUTH_ROLES)


def _roles(value: Any, where: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset({value.lower()})
    if isinstance(value, list) and all(isinstance(r, str) for r in value):
        return frozenset(r.lower() for r in value)
    raise ValueError(f"{where}: 'roles' must be a list of names")


def parse_tokens(data: Any, source: str = "tokens") -> dict[str, Identity]:
    """The ``{token: {project, roles[, user]}}`` mapping of a tokens file, checked.

    Entries are named by position in errors so that no token ends up in a message or a log.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"{source}: expected a mapping of token to {{project, roles}}")
    tokens: dict[str, Identity] = {}
    for n, (token, entry) in enumerate(data.items(), start=1):
        where = f"{source}: entry {n}"
        if not isinstance(token, str) or not token:
            raise ValueError(f"{where}: the token must be a non-empty string")
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: expected {{project, roles}}")
        project = entry.get("project")
        if not isinstance(project, str) or not project:
            raise ValueError(f"{where}: 'project' must be a non-empty string")
        user = entry.get("user")
        tokens[token] = Identity(project=project, roles=_roles(entry.get("roles"), where),
                                 user=str(user) if user is not None else None)
    return tokens


def load_tokens(path: str | Path) -> dict[str, Identity]:
    """Read a tokens file (YAML or JSON, JSON being YAML)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read the tokens file {file}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        # The parser's message may quote the file's text, tokens included.
        raise ValueError(f"the tokens file {file} is not valid YAML/JSON") from None
    return parse_tokens(data, str(file))


class StaticTokens:
    """Token mode: a fixed table of tokens."""

    mode = "token"

    def __init__(self, tokens: Mapping[str, Identity]) -> None:
        self._tokens = dict(tokens)

    def identify(self, token: str | None, tenant: str) -> Identity:
        if not token:
            raise unauthorized()
        identity = self._tokens.get(token)
        if identity is None:
            raise unauthorized("The X-Auth-Token is not valid.")
        return identity


class Unconfigured:
    """An authentication mode that cannot work: every request answers 500 with the reason."""

    def __init__(self, mode: str, message: str) -> None:
        self.mode = mode
        self._message = message

    def identify(self, token: str | None, tenant: str) -> Identity:
        raise server_error(self._message)


class KeystoneTokens:
    """Keystone mode: tokens validated by a Keystone v3 server, answers cached a short while.

    ``session``: a keystoneauth1 session (tests may pass their own); by default one
    authenticated with ``service_token``.
    """

    mode = "keystone"

    def __init__(self, url: str, service_token: str, *, session: Any = None,
                 timeout: float = 10.0, cache_seconds: float = 30.0,
                 cache_size: int = 1024) -> None:
        from keystoneauth1 import session as ks_session
        from keystoneauth1 import token_endpoint

        self._url = url.rstrip("/")
        if self._url.endswith("/v3"):
            self._url = self._url[:-3]
        self._session = session if session is not None else ks_session.Session(
            auth=token_endpoint.Token(self._url, service_token), timeout=timeout)
        self._cache_seconds = cache_seconds
        self._cache_size = cache_size
        self._cache: dict[str, tuple[float, Identity]] = {}
        self._lock = threading.Lock()

    def _challenge(self) -> dict[str, str]:
        return {"WWW-Authenticate": f'Keystone uri="{self._url}"'}

    def identify(self, token: str | None, tenant: str) -> Identity:
        if not token:
            raise unauthorized(headers=self._challenge())
        key = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        identity = self._validate(token)
        if self._cache_seconds > 0:
            with self._lock:
                if len(self._cache) >= self._cache_size:
                    self._cache.clear()
                self._cache[key] = (now + self._cache_seconds, identity)
        return identity

    def _validate(self, token: str) -> Identity:
        from keystoneauth1 import exceptions as ks_exc

        try:
            resp = self._session.get(f"{self._url}/v3/auth/tokens",
                                     headers={"X-Subject-Token": token}, raise_exc=False)
        except ks_exc.ClientException as exc:
            log.error("cannot reach keystone at %s: %s", self._url, type(exc).__name__)
            raise server_error("The identity service (keystone) could not be reached.") \
                from None
        if resp.status_code in (401, 403):
            # Keystone refused the service's own token (or its right to validate tokens).
            log.error("keystone at %s refused the service token (%s)", self._url,
                      resp.status_code)
            raise server_error("The identity service (keystone) refused this service's "
                               "credentials.")
        if resp.status_code == 404:
            raise unauthorized("The X-Auth-Token is not valid.", self._challenge())
        if resp.status_code != 200:
            log.error("keystone at %s answered %s to a token validation", self._url,
                      resp.status_code)
            raise server_error(f"The identity service (keystone) answered {resp.status_code}.")
        try:
            return identity_from_keystone(resp.json())
        except (ValueError, TypeError, KeyError, AttributeError):
            raise server_error("The identity service (keystone) answered an unexpected "
                               "token body.") from None


def identity_from_keystone(body: Mapping[str, Any]) -> Identity:
    """The identity of a Keystone v3 token body (``{"token": {project, roles, user}}``).

    A token not scoped to a project (unscoped, domain or system scope) has project ``""``,
    which no tenant matches: such a caller needs the admin role.
    """
    token = body["token"]
    project = token.get("project") or {}
    roles = token.get("roles") or []
    user = token.get("user") or {}
    return Identity(project=str(project.get("id") or ""),
                    roles=frozenset(str(r["name"]).lower() for r in roles if r.get("name")),
                    user=str(user["id"]) if user.get("id") else None,
                    role_ids=tuple(str(r["id"]) for r in roles if r.get("id")))


def build_authenticator(settings: Settings) -> Authenticator:
    """The authenticator of ``settings.auth``; a misconfigured token mode raises ValueError."""
    mode = settings.auth
    if mode == "noauth":
        return NoAuth()
    if mode == "token":
        if not settings.tokens_file:
            raise ValueError("CONVERGENCE_AUTH=token needs CONVERGENCE_TOKENS_FILE")
        return StaticTokens(load_tokens(settings.tokens_file))
    if mode == "keystone":
        if not settings.keystone_url or not settings.keystone_service_token:
            log.error("keystone auth is not configured: set CONVERGENCE_KEYSTONE_URL and "
                      "CONVERGENCE_KEYSTONE_SERVICE_TOKEN")
            return Unconfigured("keystone", "keystone auth is not configured")
        return KeystoneTokens(settings.keystone_url, settings.keystone_service_token)
    raise ValueError(f"unknown auth mode {mode!r}: expected one of {', '.join(AUTH_MODES)}")


def auth_warnings(authenticator: Authenticator) -> list[str]:
    """What the operator must know about how callers are authenticated (shown by
    ``/healthz`` and logged when the API starts): noauth, said loudly."""
    return [NOAUTH_WARNING] if authenticator.mode == "noauth" else []


def require_auth(request: Request, tenant_id: str) -> Identity:
    """The dependency of every ``/v1/{tenant_id}/...`` route: authenticate, then authorize.

    The caller's project must be the URL's tenant, unless it has the admin role.
    """
    authenticator: Authenticator = getattr(request.app.state, "authenticator", None) or NoAuth()
    token = request.headers.get("x-auth-token") or None
    identity = authenticator.identify(token, tenant_id)
    if identity.project != tenant_id and not identity.is_admin:
        raise ApiError(403, "Forbidden", f"You are not authorized to access project "
                                         f"{tenant_id}.")
    request.state.identity = identity
    return identity
