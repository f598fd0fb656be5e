"""Notification webhook subscriptions: ``/v1/{tenant}/subscriptions`` (an extension to Heat).

Callers: ``convergence.api.app.create_app`` calls :func:`install`, which includes :data:`router`
and runs the webhook delivery (``convergence.webhooks``) while the app is up.

``POST`` takes ``{url, events: [...], stack_id?, secret}`` and answers 201 with the
subscription; ``GET`` lists or reads, ``DELETE`` removes (204). The secret is write-only: no
answer contains it and nothing logs it. A tenant sees its own subscriptions only (another
tenant's id answers 404, as an unknown one).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, FastAPI, Request, Response

from convergence import webhooks
from convergence.api import bodies
from convergence.api.auth import require_auth
from convergence.api.errors import ApiError
from convergence.ports.views import SubscriptionView
from convergence.runtime import Runtime

router = APIRouter(prefix="/v1/{tenant_id}", dependencies=[Depends(require_auth)])

_DELIVERER_KEY = "webhook_deliverer"
_LOCK = threading.Lock()


def _runtime(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


def view(sub: SubscriptionView) -> dict[str, Any]:
    """A subscription as answered (never its secret)."""
    return {"id": sub.id, "url": sub.url, "events": list(sub.events),
            "stack_id": sub.stack_id, "tenant": sub.tenant, "created_at": sub.created_at}


def _bad(message: str) -> ApiError:
    return ApiError(400, "HTTPBadRequest", message)


def _parse(body: Any) -> tuple[str, list[str], str | None, str]:
    if not isinstance(body, dict):
        raise _bad("The request body must be a JSON object.")
    url, events, stack_id, secret = (body.get("url"), body.get("events"), body.get("stack_id"),
                                     body.get("secret"))
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") \
            or not urlsplit(url).netloc:
        raise _bad("'url' must be an http or https URL.")
    if not isinstance(events, list) or not events or \
            not all(isinstance(e, str) and webhooks.valid_pattern(e) for e in events):
        raise _bad("'events' must be a non-empty list of event types "
                   "(orchestration.stack.<action>.<start|end|error>, globs allowed).")
    if stack_id is not None and not isinstance(stack_id, str):
        raise _bad("'stack_id' must be a stack id.")
    if not isinstance(secret, str) or not secret:
        raise _bad("'secret' must be a non-empty string.")
    return url, events, stack_id, secret


@router.post("/subscriptions", status_code=201)
async def create_subscription(request: Request, tenant_id: str,
                              rt: Runtime = Depends(_runtime)) -> dict[str, Any]:  # noqa: B008
    body = bodies.parse_json(await request.body())
    url, events, stack_id, secret = _parse(body)
    with rt.store.begin() as tx:
        sub = tx.insert_subscription(str(uuid.uuid4()), tenant_id, url, events, stack_id,
                                     secret)
    return {"subscription": view(sub)}


@router.get("/subscriptions")
def list_subscriptions(tenant_id: str,
                       rt: Runtime = Depends(_runtime)) -> dict[str, Any]:  # noqa: B008
    with rt.store.read() as tx:
        return {"subscriptions": [view(s) for s in tx.subscriptions(tenant_id)]}


def _not_found(sub_id: str) -> ApiError:
    return ApiError(404, "HTTPNotFound", f"The subscription ({sub_id}) could not be found.")


@router.get("/subscriptions/{sub_id}")
def show_subscription(tenant_id: str, sub_id: str,
                      rt: Runtime = Depends(_runtime)) -> dict[str, Any]:  # noqa: B008
    with rt.store.read() as tx:
        sub = tx.subscription(tenant_id, sub_id)
    if sub is None:
        raise _not_found(sub_id)
    return {"subscription": view(sub)}


@router.get("/subscriptions/{sub_id}/deliveries")
def list_deliveries(tenant_id: str, sub_id: str,
                    rt: Runtime = Depends(_runtime)) -> dict[str, Any]:  # noqa: B008
    """The delivery log, for debugging: attempts, last error, delivered or not."""
    with rt.store.read() as tx:
        if tx.subscription(tenant_id, sub_id) is None:
            raise _not_found(sub_id)
        found = tx.deliveries(sub_id)
    return {"deliveries": [
        {"id": d.id, "event_id": d.event_id, "event_type": d.event_type,
         "attempts": d.attempts, "next_attempt_at": d.next_attempt_at,
         "delivered_at": d.delivered_at, "last_error": d.last_error} for d in found]}


@router.delete("/subscriptions/{sub_id}", status_code=204)
def delete_subscription(tenant_id: str, sub_id: str,
                        rt: Runtime = Depends(_runtime)) -> Response:  # noqa: B008
    with rt.store.begin() as tx:
        if not tx.delete_subscription(tenant_id, sub_id):
            raise _not_found(sub_id)
    return Response(status_code=204)


# Delivery while the app is up ----------------------------------------------------------------

def deliverer(rt: Runtime) -> webhooks.Deliverer:
    """The runtime's deliverer, hooked after the engine's existing ``on_events`` on first use."""
    with _LOCK:
        found = rt.extra.get(_DELIVERER_KEY)
        if isinstance(found, webhooks.Deliverer):
            return found
        if rt.settings.broker_url:
            from convergence.dispatch.celery_dispatch import CeleryDispatcher

            dispatcher = rt.dispatcher
            app = dispatcher.app if isinstance(dispatcher, CeleryDispatcher) else None
            settings = rt.settings

            last_sent = [float("-inf")]

            def send() -> None:
                # A delivery stays due until a worker claims it: one task a second is enough
                # to wake a worker, however often the loop looks meanwhile.
                now = time.monotonic()
                if app is not None and now - last_sent[0] >= 1.0:
                    last_sent[0] = now
                    app.send_task(webhooks.TASK_NAME, kwargs=webhooks.task_kwargs(settings))

            step = webhooks.celery_step(rt.store, send)
        else:
            step = webhooks.local_step(rt.store, rt.settings)
        made = webhooks.Deliverer(rt.store, step)
        previous = rt.engine.on_events
        if previous is None:
            rt.engine.on_events = made.wake
        else:
            def both() -> None:
                previous()
                made.wake()
            rt.engine.on_events = both
        rt.extra[_DELIVERER_KEY] = made
        return made


def install(app: FastAPI) -> None:
    """Include the routes, and run the runtime's deliverer for as long as the app is up."""
    app.include_router(router)
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: FastAPI) -> AsyncIterator[Any]:
        running = deliverer(a.state.runtime)
        running.start()
        try:
            async with inner(a) as state:
                yield state
        finally:
            running.stop()

    app.router.lifespan_context = lifespan
