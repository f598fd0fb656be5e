"""Serving the API with uvicorn: the server ``convergence api`` runs.

Callers: ``convergence.cli.api_cmd`` (which checks the settings and the address first). Idle
connections are kept past any client's poll interval (the openstack client's ``--wait`` polls
every 5 s, uvicorn's default keep-alive): a client must never reuse a connection the server is
closing at that very moment. Told to stop (SIGTERM, SIGINT), the server ends the event streams
and long-polls at once, gives other requests in flight the shutdown grace to finish, and then
cancels them. The access log never shows a signed URL's token (:class:`RedactTokens`): the
token is the credential.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from collections.abc import Callable
from types import FrameType

import uvicorn

from convergence.api.app import create_app, stop_streams
from convergence.runtime import open_runtime
from convergence.settings import Settings

KEEP_ALIVE_SECONDS = 75
SIGNED = re.compile(r"(/v1/signed/)[^/?\s]+")


class RedactTokens(logging.Filter):
    """Hides the token of ``/v1/signed/<token>`` paths in uvicorn's access log lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(SIGNED.sub(r"\1***", a) if isinstance(a, str) else a
                                for a in record.args)
        return True


def server(config: uvicorn.Config, on_exit: Callable[[], None]) -> uvicorn.Server:
    """A uvicorn server that, told to stop (SIGTERM, SIGINT), first calls ``on_exit``."""

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            on_exit()
            super().handle_exit(sig, frame)

    return Server(config)


def serve(settings: Settings, host: str, port: int) -> bool:
    """Serve the API on ``host:port`` until told to stop; whether the server had started
    (False: it could not, e.g. the port is in use)."""
    app = create_app(open_runtime(settings))
    grace = max(math.ceil(settings.shutdown_grace_seconds), 0)
    config = uvicorn.Config(app, host=host, port=port, log_level="info",
                            timeout_keep_alive=KEEP_ALIVE_SECONDS,
                            timeout_graceful_shutdown=grace)
    serving = server(config, lambda: stop_streams(app))
    config.load()  # uvicorn's logging configured: then the access log is filtered
    logging.getLogger("uvicorn.access").addFilter(RedactTokens())
    with contextlib.suppress(KeyboardInterrupt):
        serving.run()
    return bool(serving.started)
