"""``convergence api``: serve the Heat-compatible REST API (orchestration v1) with uvicorn.

Registered on the ``convergence`` group by ``convergence.cli``. Builds the runtime from the
settings (``CONVERGENCE_*`` environment variables) and serves it with
``convergence.api.serve``. With no broker configured, the app runs the in-process
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

import ipaddress
import os
import sys

import click

from convergence.settings import Settings, load_settings


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


def refuse_without_keys(settings: Settings) -> None:
    """A server process does not start unless the secrets it stores can be encrypted as
    configured (``CONVERGENCE_ENCRYPTION_KEYS``: required with a server database); the
    message says how to make a key."""
    from convergence.errors import ConfigurationError
    from convergence.store.sealing import open_sealer

    try:
        open_sealer(settings.database_url, settings.encryption_keys)
    except ConfigurationError as exc:
        raise click.UsageError(str(exc)) from None


STARTUP_FAILURE = 3  # uvicorn's exit code when the server could not start (port in use)


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
    refuse_without_keys(settings)
    if settings.auth == "noauth" and not is_loopback(host) and \
            not (allow_noauth or settings.allow_noauth):
        raise refuse_noauth(host)
    if not os.environ.get("CONVERGENCE_PUBLIC_URL"):
        # The signal URLs it hands out (servers' agents, wait conditions, alarms) name the
        # address it serves on, unless told the one its callers see.
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        shown = f"[{shown}]" if ":" in shown else shown
        settings = settings.with_(public_url=f"http://{shown}:{port}")

    from convergence.api.serve import serve

    if not serve(settings, host, port):
        sys.exit(STARTUP_FAILURE)
