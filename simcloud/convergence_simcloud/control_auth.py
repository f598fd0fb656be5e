"""The credential of the simulated cloud's control plane: with ``Options.control_token`` set,
a request to ``/_sim/`` is answered only when it carries that token in the
``X-Sim-Control-Token`` header (401 without it, 403 with another).

Callers: ``convergence_simcloud.app`` wraps the whole app in :class:`Guard`;
``convergence.cli.simcloud_cmd`` sets the token (given with ``--control-token``, or generated)
whenever the cloud listens on an address other than loopback, where anyone who reaches the
port could otherwise inject faults, read the journal or change the agent's settings;
``convergence_simcloud.client.SimControl`` sends it (its ``token``). Without a token the control
plane is open, as it is on loopback. The services' own routes (Keystone's tokens) are not
touched here.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from convergence_simcloud.state import SimCloud

HEADER = "X-Sim-Control-Token"
PREFIX = "/_sim"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _given(scope: Scope) -> str | None:
    wanted = HEADER.lower().encode()
    for key, value in scope.get("headers", []):
        if key.lower() == wanted:
            return str(value.decode("latin-1"))
    return None


class Guard:
    """Refuses ``/_sim/`` requests without the cloud's control token (when it has one)."""

    def __init__(self, app: ASGIApp, cloud: SimCloud) -> None:
        self.app = app
        self.cloud = cloud

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = self.cloud.options.control_token
        path = str(scope.get("path") or "")
        if token and scope["type"] == "http" and (path == PREFIX or
                                                  path.startswith(PREFIX + "/")):
            given = _given(scope)
            if given is None:
                await _refuse(401, f"the control plane wants its token in {HEADER}", send)
                return
            if not hmac.compare_digest(given.encode(), token.encode()):
                await _refuse(403, f"{HEADER}: not this cloud's control token", send)
                return
        await self.app(scope, receive, send)


async def _refuse(status: int, message: str, send: Send) -> None:
    """Answer ``status`` with the control plane's error body (as ``SimControl`` reads it)."""
    body = json.dumps({"error": {"code": status, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", HEADER.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
