"""The API application: routes, error handlers, and what runs beside them while the app is up.

Callers: ``convergence.api.serve`` (``convergence api``, served by uvicorn), the API tests and
the benchmarks. :func:`create_app` takes a runtime built by ``convergence.runtime.open_runtime``
and builds what the app owns, kept on ``app.state``:

- ``notifier``: the event notifier that wakes the waiting event streams and long-polls
  (``convergence.api.stream.EventNotifier``);
- ``deliverer``: the webhook deliverer (``convergence.services.webhooks.Deliverer``, built by
  ``convergence.api.subscriptions.build_deliverer``), run on a thread;
- ``driver``: with no broker configured the runtime's work runs on the in-process
  dispatcher; the app then runs it on a background thread (:class:`DispatcherDriver`), woken
  by the routes that start work, and heartbeats as an "api" worker
  (``convergence.workers.heartbeat``) meanwhile.

For as long as the app is up (its lifespan) the notifier's ``notify`` and the deliverer's
``wake`` are observers of the runtime's engine (``Engine.observers``: told after each
transaction that recorded events); they are removed when it stops, so that several apps may
be built, one after the other, on one runtime.

At start, a noauth app logs a warning (``convergence.api.auth.auth_warnings``). When the server
stops, ``convergence api`` calls :func:`stop_streams` so that open event streams let it go.
``/docs`` is Swagger UI with its assets served from the ``fastapi_offline`` package
(:data:`DOCS_ASSETS`): it needs no other host.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline

from convergence.api import (
    actions,
    catalog,
    errors,
    ops,
    request_ids,
    services_api,
    signed,
    software,
    stack_extras,
    stream,
    subscriptions,
)
from convergence.api.auth import Authenticator, auth_warnings, build_authenticator
from convergence.api.policy import build_policy
from convergence.api.requests import base_url
from convergence.api.stacks import router
from convergence.background import Loop
from convergence.dispatch.inprocess import InProcessDispatcher
from convergence.logs import get_logger
from convergence.ports.views import API
from convergence.runtime import Runtime
from convergence.workers.heartbeat import Heartbeat, worker_info

log = logging.getLogger(__name__)

# Swagger UI's scripts and styles, served by the app from the package that ships them, so
# that /docs works without reaching any other host.
DOCS_ASSETS = "/docs/assets"


class DispatcherDriver(Loop):
    """Runs an in-process dispatcher's work on a thread until stopped.

    The dispatcher's ``run`` returns when nothing is left; the driver then waits for
    :meth:`wake` (called after a request dispatched work) or ``idle`` seconds, whichever first.
    """

    def __init__(self, dispatcher: InProcessDispatcher, idle: float = 0.2) -> None:
        self._dispatcher = dispatcher
        self._idle = idle
        super().__init__("dispatcher", on_error_wait=idle)

    def turn(self, stop: threading.Event) -> float:
        # The sweeper's turn, when due, even while idle: a stack left behind by a process
        # that died is found without anyone asking.
        if self._dispatcher.pending() or self._dispatcher.run_periodic():
            self._dispatcher.run(stop=stop)
            return 0.0
        return self._idle


def version_document(base: str) -> dict[str, Any]:
    """Heat's version document (what ``GET /`` answers, with status 300)."""
    return {"versions": [{"id": "v1.0", "status": "CURRENT",
                          "links": [{"rel": "self", "href": f"{base}/v1/"}]}]}


def stop_streams(app: FastAPI) -> None:
    """The server is stopping: end the event streams and long-polls now. Left alone they
    would hold their connections open, and the server would wait on them."""
    app.state.stopping.set()


def create_app(runtime: Runtime, *, drive_dispatcher: bool = True,
               authenticator: Authenticator | None = None) -> FastAPI:
    """The API over ``runtime``.

    ``drive_dispatcher``: with the in-process dispatcher, run its work on a background thread
    while the app is up (tests that drain the dispatcher themselves turn this off).
    ``authenticator``: who may call the ``/v1/{tenant_id}/...`` routes; by default the one of
    ``runtime.settings.auth`` (``convergence.api.auth.build_authenticator``).
    """
    inprocess = runtime.inprocess
    driver = DispatcherDriver(inprocess) if inprocess is not None and drive_dispatcher else None
    # Stepping in-process, this API process is a worker too: it heartbeats as an "api".
    beat = Heartbeat(runtime.store, worker_info(runtime.engine.worker_id, API,
                                                runtime.clock.now()),
                     runtime.settings.heartbeat_seconds) if driver is not None else None
    notifier = stream.EventNotifier()
    deliverer = subscriptions.build_deliverer(runtime)
    observers = (notifier.notify, deliverer.wake)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        runtime.engine.observers.extend(observers)
        deliverer.start()
        try:
            for warning in auth_warnings(app.state.authenticator):
                get_logger(__name__).warning(warning, auth_mode=app.state.authenticator.mode)
            if driver is not None:
                driver.start()
            if beat is not None:
                beat.start()
            try:
                yield
            finally:
                stop_streams(app)
                if beat is not None:
                    beat.stop()
                if driver is not None:
                    driver.stop()
        finally:
            deliverer.stop()
            for observer in observers:
                with suppress(ValueError):  # taken off already (a benchmark clears them)
                    runtime.engine.observers.remove(observer)

    app = FastAPIOffline(title="Convergence orchestration API", version="1.0",
                         lifespan=lifespan, docs_url="/docs", redoc_url=None,
                         openapi_url="/openapi.json", static_url=DOCS_ASSETS)
    app.state.runtime = runtime
    app.state.driver = driver
    app.state.notifier = notifier  # wakes the event streams (convergence.api.stream)
    app.state.deliverer = deliverer  # delivers the webhooks (convergence.api.subscriptions)
    # Set when the server stops: event streams and long-polls end (convergence.api.stream).
    app.state.stopping = threading.Event()
    # Who may call the /v1/{tenant_id}/... routes (default: from the runtime's settings).
    app.state.authenticator = authenticator or build_authenticator(runtime.settings)
    # What each caller may do there: Heat's rules, with the operator's policy file if any.
    app.state.policy = build_policy(runtime.settings)
    errors.install(app)
    errors.install_redirect(app)

    # The version document, unauthenticated: at the root as in Heat, and (an extension Heat
    # does not have) at /v1 and /v1/{tenant} so that keystoneauth's discovery succeeds when
    # the endpoint is given as .../v1/{tenant}.
    def versions(request: Request) -> JSONResponse:
        return JSONResponse(version_document(base_url(request)), status_code=300)

    for path in ("/", "/versions", "/v1", "/v1/", "/v1/{tenant_id}", "/v1/{tenant_id}/"):
        app.add_api_route(path, versions, methods=["GET"], include_in_schema=False)

    ops.install(app)  # /healthz, /readyz, /healthcheck, /metrics and the request body limit
    # Added last, so outermost: every answer, the body limit's 413 too, carries the id, and
    # an exception no handler took is answered (a 500 telling nothing of it) and logged.
    app.add_middleware(request_ids.RequestIdMiddleware, on_error=errors.unexpected)
    app.include_router(signed.router)  # /v1/signed/{token}: what servers call, token-less
    app.include_router(actions.router)  # before the stack routes, whose lookups match any path
    app.include_router(stack_extras.router)  # the list, export/abandon, events, mark-unhealthy
    app.include_router(catalog.router)
    app.include_router(router)
    app.include_router(stream.router)  # GET /v1/{tenant}/events (+ watch, wait)
    app.include_router(subscriptions.router)  # /v1/{tenant}/subscriptions
    app.include_router(services_api.router)  # GET /v1/{tenant}/services (worker heartbeats)
    app.include_router(software.router)  # software configs and deployments
    return app
