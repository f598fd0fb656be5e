"""``convergence api``: serve the Heat-compatible REST API (orchestration v1) with uvicorn.

Registered on the ``convergence`` group by ``convergence.cli``. Builds the runtime from the
settings (``CONVERGENCE_*`` environment variables) and serves
``convergence.api.app.create_app``. With no broker configured, the app runs the in-process
dispatcher's work on a background thread while it is up. FastAPI and uvicorn are imported when
the command runs, so the other commands do not load them.

Without authentication (``CONVERGENCE_AUTH=noauth``, the default) anyone who reaches the port
may act as any tenant: the command then listens on loopback addresses only (127.0.0.0/8, ::1,
localhost) unless told otherwise (``--allow-noauth`` or ``CONVERGENCE_ALLOW_NOAUTH=true``).

SIGTERM (or Ctrl-C) stops the server within ``CONVERGENCE_SHUTDOWN_GRACE_SECONDS``: it stops
accepting connections, ends the event streams and long-polls at once (clients resume with
``Last-Event-ID`` or their marker), gives other requests in flight the grace to finish and then
cancels them.
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

import click

from convergence.runtime import open_runtime
from convergence.settings import load_settings

if TYPE_CHECKING:
    import uvicorn


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``): only this machine connects."""
    name = host.strip().lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False  # another host name: it may resolve to any address
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def refuse_noauth(host: str) -> click.UsageError:
    return click.UsageError(
        f"refusing to listen on {host} without authentication: CONVERGENCE_AUTH is noauth, so "
        "anyone who reaches this address could act as any tenant. Set CONVERGENCE_AUTH=token "
        "or keystone, listen on a loopback address (127.0.0.1, ::1, localhost), or pass "
        "--allow-noauth (or set CONVERGENCE_ALLOW_NOAUTH=true) to serve it anyway.")


STARTUP_FAILURE = 3  # uvicorn's exit code when the server could not start (port in use)


def server(config: uvicorn.Config, on_exit: Callable[[], None]) -> uvicorn.Server:
    """A uvicorn server that, told to stop (SIGTERM, SIGINT), first calls ``on_exit``."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            on_exit()
            super().handle_exit(sig, frame)

    return Server(config)


@click.command("api")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8004, show_default=True, type=int, help="Port to listen on.")
@click.option("--allow-noauth", is_flag=True, default=False,
              help="Serve without authentication (CONVERGENCE_AUTH=noauth) on an address other "
                   "than loopback; also CONVERGENCE_ALLOW_NOAUTH=true.")
def api(host: str, port: int, allow_noauth: bool) -> None:
    """Serve the Heat orchestration API v1 (noauth by default: the tenant is the URL's)."""
    try:
        settings = load_settings()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if settings.auth == "noauth" and not is_loopback(host) and \
            not (allow_noauth or settings.allow_noauth):
        raise refuse_noauth(host)

    import uvicorn

    from convergence.api.app import create_app, stop_streams

    app = create_app(open_runtime(settings))
    # Idle connections are kept past any client's poll interval (the openstack client's
    # --wait polls every 5 s, uvicorn's default keep-alive): a client must never reuse a
    # connection the server is closing at that very moment. Told to stop, requests in flight
    # have the shutdown grace to finish, then are cancelled.
    grace = max(math.ceil(settings.shutdown_grace_seconds), 0)
    config = uvicorn.Config(app, host=host, port=port, log_level="info", timeout_keep_alive=75,
                            timeout_graceful_shutdown=grace)
    serving = server(config, lambda: stop_streams(app))
    with contextlib.suppress(KeyboardInterrupt):
        serving.run()
    if not serving.started:
        sys.exit(STARTUP_FAILURE)
