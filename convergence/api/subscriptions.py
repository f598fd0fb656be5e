"""Notification webhook subscriptions: ``/v1/{tenant}/subscriptions`` (an extension to Heat).

Callers: ``convergence.api.app.create_app`` includes :data:`router` and builds the app's webhook
deliverer with :func:`build_deliverer` (it runs the deliverer while the app is up, told of new
events as one of the engine's observers). The routes call the subscription use cases of
``convergence.services.webhooks``, which also delivers.

``POST`` takes ``{url, events: [...], stack_id?, secret}`` and answers 201 with the
subscription; ``GET`` lists or reads, ``DELETE`` removes (204). The secret is write-only: no
answer contains it and nothing logs it. A tenant sees its own subscriptions only (another
tenant's id answers 404, as an unknown one).

A URL that names an address webhooks may not reach (loopback, private, link-local...) is a
400 that says why; a tenant that holds ``max_subscriptions_per_tenant`` subscriptions already
is answered 400 ``RequestLimitExceeded`` (Heat's answer to a tenant over its stack limit), and
nothing is stored. Delivery checks every connection again (``services.webhook_client``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Request, Response

from convergence.api import bodies
from convergence.api.auth import require_auth
from convergence.api.errors import ApiError
from convergence.api.policy import rule
from convergence.api.requests import bad_request, runtime
from convergence.ports.views import SubscriptionView
from convergence.runtime import Runtime
from convergence.services import webhooks

router = APIRouter(prefix="/v1/{tenant_id}", dependencies=[Depends(require_auth)])


def view(sub: SubscriptionView) -> dict[str, Any]:
    """A subscription as answered (never its secret)."""
    return {"id": sub.id, "url": sub.url, "events": list(sub.events),
            "stack_id": sub.stack_id, "tenant": sub.tenant, "created_at": sub.created_at}


def _parse(body: Any) -> tuple[str, list[str], str | None, str]:
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    url, events, stack_id, secret = (body.get("url"), body.get("events"), body.get("stack_id"),
                                     body.get("secret"))
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") \
            or not urlsplit(url).netloc:
        raise bad_request("'url' must be an http or https URL.")
    if not isinstance(events, list) or not events or \
            not all(isinstance(e, str) and webhooks.valid_pattern(e) for e in events):
        raise bad_request("'events' must be a non-empty list of event types "
                          "(orchestration.stack.<action>.<start|end|error>, globs allowed).")
    if stack_id is not None and not isinstance(stack_id, str):
        raise bad_request("'stack_id' must be a stack id.")
    if not isinstance(secret, str) or not secret:
        raise bad_request("'secret' must be a non-empty string.")
    return url, events, stack_id, secret


@router.post("/subscriptions", status_code=201, dependencies=[rule("subscriptions:create")])
async def create_subscription(request: Request, tenant_id: str,
                              rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    body = bodies.parse_json(await request.body())
    url, events, stack_id, secret = _parse(body)
    try:
        sub = webhooks.create_subscription(rt, tenant_id, url, events, stack_id, secret)
    except webhooks.SubscriptionLimitReached as exc:
        raise ApiError(400, "RequestLimitExceeded", str(exc)) from None
    return {"subscription": view(sub)}


@router.get("/subscriptions", dependencies=[rule("subscriptions:index")])
def list_subscriptions(tenant_id: str,
                       rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    return {"subscriptions": [view(s) for s in webhooks.list_subscriptions(rt, tenant_id)]}


def _not_found(sub_id: str) -> ApiError:
    return ApiError(404, "HTTPNotFound", f"The subscription ({sub_id}) could not be found.")


@router.get("/subscriptions/{sub_id}", dependencies=[rule("subscriptions:show")])
def show_subscription(tenant_id: str, sub_id: str,
                      rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    sub = webhooks.get_subscription(rt, tenant_id, sub_id)
    if sub is None:
        raise _not_found(sub_id)
    return {"subscription": view(sub)}


@router.get("/subscriptions/{sub_id}/deliveries",
            dependencies=[rule("subscriptions:list_deliveries")])
def list_deliveries(tenant_id: str, sub_id: str,
                    rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    """The delivery log, for debugging: attempts, last error, delivered or not."""
    found = webhooks.subscription_deliveries(rt, tenant_id, sub_id)
    if found is None:
        raise _not_found(sub_id)
    return {"deliveries": [
        {"id": d.id, "event_id": d.event_id, "event_type": d.event_type,
         "attempts": d.attempts, "next_attempt_at": d.next_attempt_at,
         "delivered_at": d.delivered_at, "last_error": d.last_error} for d in found]}


@router.delete("/subscriptions/{sub_id}", status_code=204,
               dependencies=[rule("subscriptions:delete")])
def delete_subscription(tenant_id: str, sub_id: str,
                        rt: Runtime = Depends(runtime)) -> Response:  # noqa: B008
    if not webhooks.delete_subscription(rt, tenant_id, sub_id):
        raise _not_found(sub_id)
    return Response(status_code=204)


# Delivery while the app is up ----------------------------------------------------------------

def _celery_send(rt: Runtime) -> Callable[[], None]:
    """Broker mode: send the delivery task to the workers (at most one a second)."""
    from convergence.dispatch.celery_dispatch import CeleryDispatcher

    dispatcher = rt.dispatcher
    app = dispatcher.app if isinstance(dispatcher, CeleryDispatcher) else None
    settings = rt.settings
    last_sent = [float("-inf")]

    def send() -> None:
        # A delivery stays due until a worker claims it: one task a second is enough to wake
        # a worker, however often the loop looks meanwhile.
        now = time.monotonic()
        if app is not None and now - last_sent[0] >= 1.0:
            last_sent[0] = now
            app.send_task(webhooks.TASK_NAME, kwargs=webhooks.task_kwargs(settings))
    return send


def build_deliverer(rt: Runtime) -> webhooks.Deliverer:
    """The app's webhook deliverer over ``rt`` (not started): with no broker it delivers
    itself; with one it fans out and has a worker deliver. ``create_app`` starts it with the
    app and makes its ``wake`` one of the engine's observers meanwhile."""
    if rt.settings.broker_url:
        step = webhooks.celery_step(rt.store, _celery_send(rt))
    else:
        step = webhooks.local_step(rt.store, rt.settings)
    return webhooks.Deliverer(rt.store, step)
