"""What every command of the CLI shares: the tenant and one runtime, opened on first use.

Callers: ``convergence.cli.cli`` builds a :class:`CliState` once per invocation (reading the
tenant from ``CONVERGENCE_PROJECT_ID`` there, the only place the CLI reads it) and stores it
as the click context object; the commands take it with :func:`pass_state` and hand it to
``convergence.cli.client.open_client``. Commands that never touch the database never open the
runtime (``convergence.cli.local`` opens it on first use). With a URL (``--url`` or
``CONVERGENCE_URL``) :meth:`CliState.remote` hands out a ``convergence.cli.remote`` client
instead, and the commands talk to the API, not the database. Imports neither: each is imported
when first asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from convergence.cli.client import StackClient
    from convergence.cli.remote import RemoteClient
    from convergence.runtime import Runtime
    from convergence.settings import Settings

DEFAULT_TENANT = "default"

@dataclass
class CliState:
    tenant: str = DEFAULT_TENANT
    # Remote mode: the API's root URL (``--url`` / ``CONVERGENCE_URL``) and its token.
    url: str | None = None
    token: str | None = field(default=None, repr=False)
    _settings: Settings | None = field(default=None, repr=False)
    _runtime: Runtime | None = field(default=None, repr=False)
    _remote: RemoteClient | None = field(default=None, repr=False)

    def remote(self) -> RemoteClient | None:
        """The API client when a URL was given (remote mode), else None (embedded)."""
        if self.url is None:
            return None
        if self._remote is None:
            from convergence.cli.remote import RemoteClient

            client = RemoteClient(self.url, self.tenant, self.token)
            self._remote = client
            ctx = click.get_current_context(silent=True)
            if ctx is not None:
                ctx.find_root().call_on_close(client.close)
        return self._remote

    def settings(self) -> Settings:
        """This invocation's settings, read from the environment once."""
        if self._settings is None:
            from convergence.settings import load_settings

            self._settings = load_settings()
        return self._settings

    def runtime(self) -> Runtime:
        """The runtime for this invocation, built from its settings once."""
        if self._runtime is None:
            from convergence.runtime import open_runtime

            # The embedded command line is a person's own: with no cloud configured, it
            # serves a simulated one in-process on first use, and says so on stderr.
            rt = open_runtime(self.settings(), simulated_cloud=True,
                              said=lambda message: click.echo(message, err=True))
            self._runtime = rt
            click.get_current_context().find_root().call_on_close(rt.store.engine.dispose)
        return self._runtime

    @property
    def embedded(self) -> bool:
        """No broker: the work a command starts runs in this process."""
        return self.runtime().inprocess is not None


# Hands a command the invocation's CliState (a default one when the group did not set it).
pass_state = click.make_pass_decorator(CliState, ensure=True)


def open_client(state: CliState) -> StackClient:
    """The API client in remote mode, else the embedded one (each imported here, on use)."""
    remote = state.remote()
    if remote is not None:
        return remote
    from convergence.cli.local import LocalClient

    return LocalClient(state)
