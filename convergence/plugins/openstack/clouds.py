"""The clouds the engine works on: openstacksdk connections, built once per process and cloud.

Callers: every OpenStack resource type declares :func:`build` as its ``clouds`` backend; the
registry builds it once per runtime from the ``PluginHost`` (whose ``environ`` names the
cloud) and a plugin asks :meth:`Clouds.connection` for the connection of the stack's cloud.

Where the cloud comes from is openstacksdk's own way: ``OS_CLOUD`` names an entry of a
``clouds.yaml`` (``OS_CLIENT_CONFIG_FILE``, the current folder, ``~/.config/openstack``,
``/etc/openstack``), or ``OS_AUTH_URL`` and the other ``OS_*`` variables describe one. The
environment the runtime hands over is read once, here. When it names no cloud, the host's
``fallback_cloud`` is asked for one on first use (the embedded mode starts a simulated cloud
then); with no fallback either, a plugin that needs a cloud fails its resource saying so.

A connection is made lazily, on the first call that needs it, and kept: its token is renewed
by keystoneauth when it expires. Connections do no retries of their own (``retries`` 0): a
call the cloud refused comes back at once and the engine decides when to try again, so a
worker thread never sleeps inside the SDK.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from openstack import exceptions as sdk_exceptions

from convergence.plugins.base import (
    NO_CLOUD,
    CloudScope,
    Delegation,
    PluginHost,
    ResourceFailure,
)
from convergence.plugins.openstack import lookups
from convergence.plugins.openstack.errors import Absent, translated

log = logging.getLogger(__name__)

CLOUDS = "clouds"  # the backend's name in ``PluginContext.backends``
ENVVARS = "envvars"  # openstacksdk's name of the cloud the ``OS_*`` variables describe
TRUSTED_CONNECTIONS = 256  # connections by trust a process keeps (see ``Clouds``)
NOT_CONFIGURED = ("no cloud is configured: set OS_CLOUD (a clouds.yaml entry) or the OS_* "
                  "variables for the API and the workers")


@dataclass(frozen=True, slots=True)
class CloudConfig:
    """Which cloud to reach: a ``clouds.yaml`` entry (``cloud``, from ``config_file`` if
    given, else where openstacksdk looks), or the ``OS_*`` variables (``cloud`` is
    :data:`ENVVARS`)."""

    cloud: str
    config_file: str | None = None
    environ: Mapping[str, str] | None = None  # the OS_* variables, for ENVVARS

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> CloudConfig | None:
        """The cloud an environment names; None when it names none."""
        config_file = environ.get("OS_CLIENT_CONFIG_FILE") or None
        if environ.get("OS_CLOUD"):
            return cls(environ["OS_CLOUD"], config_file)
        if environ.get("OS_AUTH_URL"):
            return cls(ENVVARS, None, {k: v for k, v in environ.items()
                                       if k.startswith("OS_")})
        return None

    def __repr__(self) -> str:  # never the environment: it holds the password
        return f"CloudConfig(cloud={self.cloud!r}, config_file={self.config_file!r})"


class Clouds:
    """The connections of one process, by cloud name (thread-safe). ``fallback``: the
    environment of a cloud to use when none is configured, asked once, on first use;
    ``not_configured``: why there is no cloud when neither gives one."""

    def __init__(self, default: CloudConfig | None,
                 fallback: Callable[[], Mapping[str, str]] | None = None,
                 config_file: str | None = None, not_configured: str = NOT_CONFIGURED,
                 ) -> None:
        self.default = default
        self.not_configured = not_configured
        # Where the clouds a stack names are looked up (None: where openstacksdk looks).
        self.config_file = config_file or (default.config_file if default else None)
        # A cloud the operator named (not the fallback, whose Keystone knows no caller).
        self.configured = default is not None
        self._fallback = fallback
        self._connections: dict[tuple[str, str | None], Any] = {}
        self._lock = threading.Lock()

    def connection(self, scope: CloudScope | str | None = None) -> Any:
        """The connection to a stack's cloud (``scope``; a ``clouds.yaml`` entry's name, or
        None: the default cloud with its own credentials). One per cloud and trust."""
        if not isinstance(scope, CloudScope):
            scope = CloudScope(cloud=scope)
        with self._lock:
            if scope.cloud is None and self.default is None and self._fallback is not None:
                self.default = CloudConfig.from_environ(self._fallback())
                self._fallback = None
            config = self._config(scope.cloud)
            key = (config.cloud, scope.trust_id)
            found = self._connections.pop(key, None)
            if found is None:
                with translated(f"connecting to cloud {config.cloud!r}"):
                    found = _connect(config, scope.trust_id)
                setattr(found, lookups.ATTRIBUTE, lookups.Lookups())
                self._forget_oldest_trust()
            self._connections[key] = found  # the most recently used last
            return found

    def _forget_oldest_trust(self) -> None:
        """Keep at most :data:`TRUSTED_CONNECTIONS` connections by trust (one a stack): the
        least recently used goes (made again if its stack comes back). Under the lock."""
        trusted = [key for key in self._connections if key[1] is not None]
        for key in trusted[:max(0, len(trusted) - TRUSTED_CONNECTIONS + 1)]:
            self._connections.pop(key).close()

    def delegate(self, scope: CloudScope, caller: Delegation) -> CloudScope:
        """A Keystone trust from ``caller`` to the user this process authenticates as on
        ``scope``'s cloud, for the caller's project and roles, impersonating: the engine then
        works in the caller's project, as the caller, after the caller's token expired. The
        caller's token is used for this one call and kept nowhere. With no cloud configured
        (the embedded mode's simulated one), there is no trust to make: ``scope`` as it is."""
        if not self.configured or scope.cloudless:
            return scope
        conn = self.connection(CloudScope(cloud=scope.cloud))
        with translated("making a trust for the engine"):
            trustee = conn.current_user_id
            answer = conn.identity.post(
                "/OS-TRUST/trusts", headers={"X-Auth-Token": caller.token},
                authenticated=False, raise_exc=False,
                json={"trust": {"trustor_user_id": caller.user_id, "trustee_user_id": trustee,
                                "project_id": caller.project_id, "impersonation": True,
                                "roles": [{"id": r} for r in caller.role_ids]}})
            sdk_exceptions.raise_from_response(answer)
        return CloudScope(cloud=scope.cloud, trust_id=str(answer.json()["trust"]["id"]))

    def release(self, scope: CloudScope) -> None:
        """Delete the trust of ``scope`` (with its own token: an impersonating trust's token
        is the trustor's) and forget its connection. A trust already gone is fine; one
        Keystone refuses to delete for good is left (said in the log); ``RetryLater`` when
        Keystone cannot answer now (the sweeper tries again)."""
        if scope.trust_id is None:
            return
        try:
            conn = self.connection(scope)
            with translated("deleting the engine's trust"):
                sdk_exceptions.raise_from_response(conn.identity.delete(
                    f"/OS-TRUST/trusts/{scope.trust_id}", raise_exc=False))
        except Absent:
            pass
        except ResourceFailure as exc:
            log.warning("a deleted stack's trust could not be deleted: %s", exc)
        with self._lock:
            dropped = self._connections.pop((self._config(scope.cloud).cloud, scope.trust_id),
                                            None)
        if dropped is not None:
            dropped.close()

    def as_caller(self, caller: Delegation) -> CallerClouds:
        """The clouds as ``caller`` sees them, with the caller's own token: what validating a
        template for a caller looks up (no trust is made for a look)."""
        return CallerClouds(self, caller)

    def cloud_problem(self, scope: CloudScope) -> str | None:
        """Why a stack of ``scope`` reaches no cloud at all (None: it may): its project has no
        credentials (:data:`NO_CLOUD`), or it names the default cloud and this process has
        none configured and no fallback. What acceptance refuses a template that needs a
        cloud with, before anything is stored."""
        if scope.cloudless:
            return "its project has no cloud credentials"
        if scope.cloud is None and self.default is None and self._fallback is None:
            return self.not_configured
        return None

    def scope_problem(self, scope: CloudScope) -> str | None:
        """Why ``scope`` names no cloud this process can reach (None: it can): a cloud that no
        ``clouds.yaml`` has an entry for."""
        if scope.cloud is None or scope.cloudless or (
                self.default is not None and scope.cloud == self.default.cloud):
            return None
        from openstack.config import loader

        files = [self.config_file] if self.config_file else None
        names = loader.OpenStackConfig(config_files=files, load_envvars=False).get_cloud_names()
        if scope.cloud not in names:
            return f"no clouds.yaml has a cloud named {scope.cloud!r}"
        return None

    def _config(self, cloud: str | None) -> CloudConfig:
        if cloud == NO_CLOUD:
            raise ResourceFailure("this stack has no cloud: its project has no cloud "
                                  "credentials (the engine's own are never used for it)")
        if cloud is None or (self.default is not None and cloud == self.default.cloud):
            if self.default is None:
                raise ResourceFailure(self.not_configured)
            return self.default
        return CloudConfig(cloud, self.config_file)

    def close(self) -> None:
        with self._lock:
            for conn in self._connections.values():
                conn.close()
            self._connections.clear()


class CallerClouds:
    """:class:`Clouds` seen by one caller (``Clouds.as_caller``): a connection to a stack's
    cloud authenticated by the caller's token, scoped to the caller's project; made on first
    use, kept for this object's life (one validation), never shared."""

    def __init__(self, clouds: Clouds, caller: Delegation) -> None:
        self._clouds, self._caller = clouds, caller
        self._connections: dict[str | None, Any] = {}

    def connection(self, scope: CloudScope | str | None = None) -> Any:
        cloud = scope.cloud if isinstance(scope, CloudScope) else scope
        found = self._connections.get(cloud)
        if found is None:
            if cloud is None and not self._clouds.configured:
                return self._clouds.connection(cloud)  # no Keystone of the caller's to ask
            config = self._clouds._config(cloud)
            with translated(f"connecting to cloud {config.cloud!r} for the caller"):
                found = _connect(config, caller=self._caller)
            setattr(found, lookups.ATTRIBUTE, lookups.Lookups())
            self._connections[cloud] = found
        return found


def _connect(config: CloudConfig, trust_id: str | None = None,
             caller: Delegation | None = None) -> Any:
    """A connection to ``config``'s cloud; with ``trust_id``, as the trustee of that Keystone
    trust: the cloud's credentials authenticate and the token is scoped by the trust (to the
    trustor's project, with the trustor's roles) instead of the configured project."""
    from openstack import connection
    from openstack.config import loader

    files = [config.config_file] if config.config_file else None
    if config.cloud == ENVVARS:
        # openstacksdk reads OS_* from the process's environment only: the variables handed
        # over are given as arguments instead, so no global state is touched.
        env = dict(config.environ or {})
        auth = {key[3:].lower(): value for key, value in env.items()
                if key[3:].lower() in _AUTH_KEYS}
        region = env.get("OS_REGION_NAME")
        cloud_region = loader.OpenStackConfig(load_yaml_config=False, load_envvars=False) \
            .get_one(auth=auth, region_name=region,
                     interface=env.get("OS_INTERFACE"),
                     identity_api_version=env.get("OS_IDENTITY_API_VERSION", "3"))
    else:
        cloud_region = loader.OpenStackConfig(config_files=files, load_envvars=False) \
            .get_one(cloud=config.cloud)
    if trust_id:
        _scope_by_trust(cloud_region, trust_id)
    elif caller is not None:
        _as_caller(cloud_region, caller)
    return connection.Connection(config=cloud_region)


def _as_caller(cloud_region: Any, caller: Delegation) -> None:
    """Have ``cloud_region`` authenticate with ``caller``'s token, in the caller's project."""
    from keystoneauth1 import loading

    auth_url = cloud_region.config["auth"]["auth_url"]
    cloud_region._auth = loading.get_plugin_loader("v3token").load_from_options(
        auth_url=auth_url, token=caller.token, project_id=caller.project_id)


def _scope_by_trust(cloud_region: Any, trust_id: str) -> None:
    """Have ``cloud_region`` authenticate with its credentials scoped by ``trust_id`` (its
    configured project or domain dropped: a token has one scope). openstacksdk's own merging
    of options cannot unset a key, so the authentication plugin is made here."""
    from keystoneauth1 import loading

    options = {key: value for key, value in cloud_region.config["auth"].items()
               if key not in _SCOPE_KEYS and value is not None}
    options["trust_id"] = trust_id
    kind = cloud_region.config.get("auth_type") or "password"
    cloud_region._auth = loading.get_plugin_loader(kind).load_from_options(**options)


# What scopes a token to a project or a domain: a trust scopes it instead.
_SCOPE_KEYS = ("project_name", "project_id", "project_domain_name", "project_domain_id",
               "domain_name", "domain_id", "system_scope")


_AUTH_KEYS = frozenset({
    "auth_url", "username", "user_id", "password", "project_name", "project_id",
    "user_domain_name", "user_domain_id", "project_domain_name", "project_domain_id",
    "domain_name", "domain_id", "token", "application_credential_id",
    "application_credential_name", "application_credential_secret", "system_scope",
})


def build(host: PluginHost) -> Clouds:
    """The backend: the connections to the cloud the host's environment names."""
    return Clouds(CloudConfig.from_environ(host.environ), host.fallback_cloud,
                  config_file=host.environ.get("OS_CLIENT_CONFIG_FILE") or None,
                  not_configured=host.no_cloud or NOT_CONFIGURED)
