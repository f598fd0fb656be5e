"""Request ids: every answer of the API carries ``X-Openstack-Request-Id: req-<uuid>``, as
OpenStack's services' answers do (oslo.middleware's ``RequestId``), and an unexpected error's
500 names the id in its body while the log line of its exception carries it: the caller
quotes the id, the operator finds the traceback, and nothing of it goes to the caller.

Callers: ``convergence.api.app`` adds :class:`RequestIdMiddleware` after the other
middleware (the outermost of them, so that the body limit's 413 carries the header too),
with ``convergence.api.errors.unexpected`` as what answers an exception no handler took;
that reads :func:`request_id`. The middleware answers such an exception itself, before
Starlette's outermost error middleware would: that one passes the exception on to the server,
which would log it a second time and close the connection, a client's keep-alive one too. An
exception raised once the answer has begun (a stream) goes on to the server as before, which
ends the connection: the client must not take a cut answer for a whole one.

An id the caller sends is not taken: each request gets a new one, made here.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "X-Openstack-Request-Id"
_RAW_HEADER = HEADER.lower().encode("latin-1")
_STATE_KEY = "request_id"  # in the request's state (``scope["state"]``)


def new_request_id() -> str:
    """``req-`` and a random UUID, OpenStack's form."""
    return f"req-{uuid.uuid4()}"


def request_id(conn: HTTPConnection) -> str:
    """The id of this request (one made now if the middleware gave it none)."""
    state = conn.scope.setdefault("state", {})
    found = state.get(_STATE_KEY)
    if not isinstance(found, str):
        found = state[_STATE_KEY] = new_request_id()
    return found


ErrorAnswer = Callable[[Request, Exception], Awaitable[Response]]


class RequestIdMiddleware:
    """Gives each HTTP request an id, kept in its state, and adds it to the answer; an
    exception that reaches it before the answer began is answered by ``on_error``."""

    def __init__(self, app: ASGIApp, on_error: ErrorAnswer) -> None:
        self.app = app
        self.on_error = on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = new_request_id()
        scope.setdefault("state", {})[_STATE_KEY] = rid
        header = (_RAW_HEADER, rid.encode("latin-1"))

        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers") or [])
                if not any(name.lower() == _RAW_HEADER for name, _ in headers):
                    message = {**message, "headers": [*headers, header]}
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            if started:
                raise
            response = await self.on_error(Request(scope, receive), exc)
            await response(scope, receive, sending)
