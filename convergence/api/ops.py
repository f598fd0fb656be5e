"""Operations endpoints and middleware: readiness, Heat's healthcheck, metrics, body limits.

Callers: ``convergence.api.app`` calls :func:`install` once. It adds

- ``GET /healthz`` and ``GET /healthcheck`` (Heat's path): up, and in noauth mode the mode
  and a warning (``convergence.api.auth.auth_warnings``), for whoever looks.
- ``GET /readyz``: 200 when the database answers (and the broker, when one is configured:
  a Redis ``PING``), else 503 naming what failed.
- ``GET /metrics``: Prometheus text format: HTTP requests by method, route template and
  status (and their duration), traversals started and finished by outcome and stacks by
  status (read from the store at scrape time), traversals finished by this process, nodes
  stepped, step latency and leases taken over by this process's engine, the broker's
  queue depths (Redis ``LLEN``; 0 with no broker), and the resource records read for
  resource lists and the lists abandoned by their client (``api.resource_list``).
- a request body limit (``Settings.max_request_bytes``): larger bodies get 413 in Heat's
  error shape before anything parses them (and :func:`check_template_size`, which
  ``convergence.api.requests.json_body`` calls, the template's limit).

The store's figures are read through the use cases of ``convergence.services.operations``.

Metrics live in a registry per app, so several apps (tests) do not collide. With several
server processes, each process counts its own requests (prometheus_client's multiprocess
mode is not set up here); the store-derived figures are global.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from convergence.api.auth import Authenticator, auth_warnings
from convergence.api.errors import ApiError, error_body
from convergence.runtime import Runtime
from convergence.services import operations

router = APIRouter()

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOO_LARGE = "RequestLimitExceeded"


# Health -----------------------------------------------------------------------------------------

def redis_ping(url: str, timeout: float = 2.0) -> None:
    """PING the broker; raises when it does not answer."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        if not client.ping():
            raise ConnectionError("the broker did not answer PING")
    finally:
        client.close()


def readiness(rt: Runtime) -> dict[str, str]:
    """Each dependency and ``ok`` or why it failed."""
    checks: dict[str, str] = {}
    try:
        operations.ping_database(rt)
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"failed: {type(exc).__name__}: {exc}"
    if rt.settings.broker_url:
        try:
            redis_ping(rt.settings.broker_url)
            checks["broker"] = "ok"
        except Exception as exc:
            checks["broker"] = f"failed: {type(exc).__name__}: {exc}"
    return checks


@router.get("/readyz")
def readyz(request: Request) -> JSONResponse:
    checks = readiness(request.app.state.runtime)
    failed = sorted(k for k, v in checks.items() if v != "ok")
    body: dict[str, Any] = {"status": "ok" if not failed else "unavailable", "checks": checks}
    if failed:
        body["failed"] = failed
    return JSONResponse(body, status_code=503 if failed else 200)


def health(request: Request) -> dict[str, Any]:
    """``/healthz`` and ``/healthcheck``: up; with noauth, the mode and a warning."""
    body: dict[str, Any] = {"status": "ok"}
    authenticator: Authenticator | None = getattr(request.app.state, "authenticator", None)
    if authenticator is not None and auth_warnings(authenticator):
        body["auth"] = authenticator.mode
        body["warnings"] = auth_warnings(authenticator)
    return body


@router.get("/healthz")
def healthz(request: Request) -> dict[str, Any]:
    return health(request)


@router.get("/healthcheck")
def healthcheck(request: Request) -> dict[str, Any]:
    return health(request)


# Metrics ----------------------------------------------------------------------------------------

def queue_depths(broker_url: str | None, timeout: float = 2.0) -> dict[str, int]:
    """``LLEN`` of each Celery queue on the broker; every queue 0 with no broker, none when
    the broker does not answer."""
    from convergence.dispatch.celery_dispatch import QUEUES

    if not broker_url:
        return dict.fromkeys(QUEUES, 0)
    import redis

    client = redis.Redis.from_url(broker_url, socket_connect_timeout=timeout,
                                  socket_timeout=timeout)
    try:
        return {queue: int(client.llen(queue)) for queue in QUEUES}
    except redis.RedisError:
        return {}
    finally:
        client.close()


class StoreCollector(Collector):
    """Figures read from the store (and the engine) at scrape time."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def collect(self) -> Iterator[Metric]:
        stacks, traversals, orphans = operations.store_stats(self._rt)
        by_status = GaugeMetricFamily("convergence_stacks", "Live stacks by status.",
                                      labels=["status"])
        for status, n in sorted(stacks.items()):
            by_status.add_metric([status], n)
        yield by_status
        started = CounterMetricFamily("convergence_traversals_started",
                                      "Traversals started, by action.", labels=["action"])
        finished = CounterMetricFamily(
            "convergence_traversals_finished",
            "Traversals finished, by action and outcome (COMPLETE, FAILED, SUPERSEDED).",
            labels=["action", "outcome"])
        per_action: dict[str, int] = {}
        for (action, state), n in sorted(traversals.items()):
            per_action[action] = per_action.get(action, 0) + n
            if state not in ("PLANNING", "RUNNING"):
                finished.add_metric([action, state], n)
        for action, n in sorted(per_action.items()):
            started.add_metric([action], n)
        yield started
        yield finished
        local = CounterMetricFamily("convergence_engine_traversals_finished",
                                    "Traversals finished by this process's engine.")
        local.add_metric([], self._rt.engine.finishes)
        yield local
        stats = self._rt.engine.stats
        stepped = CounterMetricFamily("convergence_engine_nodes_stepped",
                                      "Nodes stepped by this process's engine.")
        stepped.add_metric([], stats.nodes)
        yield stepped
        taken = CounterMetricFamily(
            "convergence_engine_leases_taken_over",
            "Steps of this process's engine whose lease another worker took over (fenced off).")
        taken.add_metric([], stats.fenced_off)
        yield taken
        waiting = GaugeMetricFamily(
            "convergence_orphans",
            "What steps made after their lease was taken over, not removed yet (the sweeper "
            "removes them).")
        waiting.add_metric([], orphans)
        yield waiting
        depth = GaugeMetricFamily("convergence_queue_depth",
                                  "Messages waiting in each broker queue (0 with no broker).",
                                  labels=["queue"])
        for queue, n in queue_depths(self._rt.settings.broker_url).items():
            depth.add_metric([queue], n)
        yield depth


class Metrics:
    """The app's metrics registry and its HTTP instruments."""

    def __init__(self, rt: Runtime) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("convergence_http_requests", "HTTP requests answered.",
                                ["method", "route", "status"], registry=self.registry)
        self.duration = Histogram("convergence_http_request_duration_seconds",
                                  "Time to answer HTTP requests.", ["method", "route"],
                                  registry=self.registry)
        self.steps = Histogram("convergence_step_duration_seconds",
                               "Time of one node's step in this process's engine.",
                               registry=self.registry)
        # The resource list's work (``convergence.api.resource_list``): what it read, and
        # the listings it stopped because their client went away.
        self.resource_records = Counter(
            "convergence_resource_list_records",
            "Resource records read to answer resource lists.", registry=self.registry)
        self.resource_abandoned = Counter(
            "convergence_resource_list_abandoned",
            "Resource lists stopped before their end: the client went away.",
            registry=self.registry)
        self.registry.register(StoreCollector(rt))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.duration.labels(method, route).observe(seconds)


@router.get("/metrics")
def metrics(request: Request) -> Response:
    registry = request.app.state.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def route_template(scope: Mapping[str, Any]) -> str:
    """The matched route's path template (``/v1/{tenant_id}/stacks``); ``unmatched`` if none."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


class MetricsMiddleware:
    """Counts every HTTP request by method, route template and status."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.observe(scope.get("method", ""), route_template(scope),
                                 status["code"], time.perf_counter() - started)


# Limits -----------------------------------------------------------------------------------------

def too_large(what: str, size: int | None, limit: int) -> ApiError:
    told = f"{size} bytes" if size is not None else "larger"
    return ApiError(413, TOO_LARGE, f"The {what} is {told}, over the limit of {limit} bytes.")


class BodyLimitMiddleware:
    """Refuses (413) request bodies over ``limit`` bytes before the app reads them.

    A declared ``Content-Length`` over the limit is refused at once; a body without one is
    read up to the limit (and refused beyond it), then handed to the app as read.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def _refuse(self, send: Send, size: int | None) -> None:
        error = too_large("request body", size, self.limit)
        response = JSONResponse(error_body(error.code, error.type, error.message),
                                status_code=413, headers={"Connection": "close"})
        await response({"type": "http"}, _no_receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                size = None
            if size is not None and size > self.limit:
                await self._refuse(send, size)
                return
            if size is not None:
                await self.app(scope, receive, send)
                return
        # No usable length: read the body here, up to the limit.
        chunks: list[bytes] = []
        total = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > self.limit:
                await self._refuse(send, None)
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        replayed = {"done": False}

        async def replay() -> Message:
            if not replayed["done"]:
                replayed["done"] = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


def check_template_size(request: Request, body: Mapping[str, Any]) -> None:
    """413 when the body's ``template`` is over ``Settings.max_template_bytes``."""
    import json

    template = body.get("template")
    if template is None:
        return
    runtime: Runtime | None = getattr(request.app.state, "runtime", None)
    if runtime is None:
        return
    limit = runtime.settings.max_template_bytes
    if isinstance(template, str):
        size = len(template.encode("utf-8")) if len(template) * 4 > limit else len(template)
    elif isinstance(template, Mapping):
        size = len(json.dumps(template).encode("utf-8"))
    else:
        return
    if size > limit:
        raise too_large("template", size, limit)


# Wiring -----------------------------------------------------------------------------------------

def install(app: FastAPI) -> None:
    """Add the operations routes, the metrics and the body limit to the app."""
    rt: Runtime = app.state.runtime
    app.state.metrics = Metrics(rt)
    rt.engine.on_step = app.state.metrics.steps.observe  # the step latency histogram
    app.include_router(router)
    app.add_middleware(BodyLimitMiddleware, limit=rt.settings.max_request_bytes)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
