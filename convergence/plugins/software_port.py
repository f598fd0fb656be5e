"""The engine's software configuration and signals, as the plugins that need them see them.

``OS::Heat::SoftwareConfig`` and its kin keep configs, ``OS::Heat::SoftwareDeployment`` keeps
deployments that servers' agents apply and report on, ``OS::Heat::WaitConditionHandle`` reads
the signals it received, and ``OS::Nova::Server`` and the signalled types hand out signed URLs:
all through the :class:`SoftwareBackend` the runtime hands every plugin
(``PluginHost.software``; ``ctx.backends["software"]`` for the types that declare it).
Implemented by ``convergence.services.software`` over the engine's store; each call is one
short transaction of its own, made from a step with no transaction open, like a call to a
cloud, and each is idempotent: what a resource made is found by its record's owner key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from convergence.plugins.base import PluginContext, ResourceFailure
from convergence.ports.views import SoftwareConfigView, SoftwareDeploymentView


class SoftwareBackend(Protocol):
    """Configs, deployments, handles' signals and signed URLs (see the module)."""

    public_url: str  # where servers reach the API

    # configs: immutable; a resource's are found by its owner key
    def make_config(self, ctx: PluginContext, content: Mapping[str, Any]) -> SoftwareConfigView:
        ...
    def config(self, ctx: PluginContext, config_id: str) -> SoftwareConfigView | None: ...
    def delete_configs(self, ctx: PluginContext) -> None: ...

    # deployments: one per resource (its owner key), re-applied in place
    def deployment(self, ctx: PluginContext) -> SoftwareDeploymentView | None: ...
    # ``derived``: what makes the config to apply of (deployment id, config id)
    def deploy(self, ctx: PluginContext, *, server_id: str,
               derived: Callable[[str, str], Mapping[str, Any]],
               input_values: Mapping[str, Any], action: str, status: str,
               reason: str) -> SoftwareDeploymentView: ...
    def forget_deployment(self, ctx: PluginContext) -> None: ...

    # signed URLs for ``ctx``'s resource: ``signal`` (its signals), ``metadata`` (a server's
    # deployments, which its agent polls), ``deployment`` (a deployment's report: ``claims``
    # name the deployment and the derived config it reports on)
    def signed_url(self, ctx: PluginContext, kind: str, **claims: str) -> str: ...
    def token(self, ctx: PluginContext, kind: str, **claims: str) -> str: ...

    # whether ``ctx``'s stack has a resource of one of ``types`` with that physical id: a
    # reference resolved within the stack (Heat's resource_by_refid), never in another's
    def stack_has(self, ctx: PluginContext, physical_id: str, types: tuple[str, ...]) -> bool:
        ...

    # a wait condition handle's signals: ``{id, status, reason, data}`` in the order received
    def handle_signals(self, handle_id: str) -> list[dict[str, Any]]: ...
    def forget_handle(self, handle_id: str) -> None: ...


def software_of(ctx: PluginContext) -> SoftwareBackend:
    """The software backend, or the resource fails saying this engine has none."""
    backend = ctx.backends.get("software")
    if backend is None:
        raise ResourceFailure("this engine keeps no software configuration")
    return backend  # type: ignore[no-any-return]


def software_backend(host: Any) -> object | None:
    """The backend factory the types that use it declare (``backends = {"software": ...}``)."""
    return getattr(host, "software", None)
