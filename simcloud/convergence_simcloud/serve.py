"""Serving the simulated cloud with uvicorn: in the foreground (the CLI) or on a thread (tests).

Callers: ``convergence.cli.simcloud_cmd`` calls :func:`serve`; tests use :func:`running`, a
context manager that starts the server on a thread on an ephemeral loopback port and yields its
base URL (``http://127.0.0.1:PORT``), then stops it. Both run the cloud's software-configuration
agent (``convergence_simcloud.agent``) while the server listens, stop it before the server
stops, and save the state file (if any) when the server stops. :func:`clouds_yaml` is the
``clouds.yaml`` entry the CLI prints on stdout; uvicorn's lines, its access log included, go
to stderr.
"""

from __future__ import annotations

import contextlib
import copy
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn

from convergence_simcloud.agent import Agent
from convergence_simcloud.app import create_app
from convergence_simcloud.state import SimCloud

CLOUD_NAME = "simcloud"


def clouds_yaml(url: str, region: str = "RegionOne") -> str:
    """A ``clouds.yaml`` with one cloud, ``simcloud``, for the admin user at ``url``."""
    return (
        "clouds:\n"
        f"  {CLOUD_NAME}:\n"
        f"    region_name: {region}\n"
        "    identity_api_version: 3\n"
        "    auth:\n"
        f"      auth_url: {url}/v3\n"
        "      username: admin\n"
        "      password: admin\n"
        "      project_name: admin\n"
        "      user_domain_name: Default\n"
        "      project_domain_name: Default\n"
    )


def reachable(host: str) -> str:
    """The address a local client uses for a server listening on ``host``."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _log_config() -> dict[str, Any]:
    """uvicorn's logging, its access log on stderr too (its default is stdout, which is the
    clouds.yaml's)."""
    found: dict[str, Any] = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    found["handlers"]["access"]["stream"] = "ext://sys.stderr"
    return found


def _config(cloud: SimCloud, host: str, port: int, log_level: str) -> uvicorn.Config:
    return uvicorn.Config(create_app(cloud), host=host, port=port, log_level=log_level,
                          timeout_keep_alive=75, log_config=_log_config())


def serve(cloud: SimCloud, host: str, port: int,
          on_ready: Callable[[str], None] | None = None) -> bool:
    """Serve until told to stop (SIGINT, SIGTERM; uvicorn then ends the process by the same
    signal); ``on_ready(url)`` once listening. Whether the server had started (False: e.g. the
    port is in use)."""
    agent = Agent(cloud)

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                agent.start()
            if self.started and on_ready is not None:
                on_ready(f"http://{reachable(host)}:{port}")

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # Saved here: after a SIGTERM uvicorn raises the signal again once it has stopped.
            await super().shutdown(sockets)
            agent.stop()
            cloud.save()

    server = Server(_config(cloud, host, port, "info"))
    try:
        with contextlib.suppress(KeyboardInterrupt):
            server.run()
    finally:
        agent.stop()
        cloud.save()
    return bool(server.started)


@contextlib.contextmanager
def running(cloud: SimCloud, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve ``cloud`` on a thread on a free port of ``host``; yield its base URL."""
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets whose protocol says TCP, and
    # without it every answer (headers, then body) waited 40 ms for the client's delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(_config(cloud, host, port, "warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                              name="simcloud", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the simulated cloud did not start")
        time.sleep(0.01)
    agent = Agent(cloud)
    agent.start()
    try:
        yield f"http://{host}:{port}"
    finally:
        agent.stop()
        server.should_exit = True
        thread.join(10)
        sock.close()
        cloud.save()
