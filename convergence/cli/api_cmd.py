"""``convergence api``: serve the Heat-compatible REST API (orchestration v1) with uvicorn.

Registered on the ``convergence`` group by ``convergence.cli``. Builds the runtime from the
settings (``CONVERGENCE_*`` environment variables) and serves
``convergence.api.app.create_app``. With no broker configured, the app runs the in-process
dispatcher's work on a background thread while it is up. FastAPI and uvicorn are imported when
the command runs, so the other commands do not load them.
"""

from __future__ import annotations

import click

from convergence.runtime import open_runtime
from convergence.settings import load_settings


@click.command("api")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8004, show_default=True, type=int, help="Port to listen on.")
def api(host: str, port: int) -> None:
    """Serve the Heat orchestration API v1 (noauth: the tenant is the URL's)."""
    import uvicorn

    from convergence.api.app import create_app

    app = create_app(open_runtime(load_settings()))
    # Idle connections are kept past any client's poll interval (the openstack client's
    # --wait polls every 5 s, uvicorn's default keep-alive): a client must never reuse a
    # connection the server is closing at that very moment.
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_keep_alive=75)
