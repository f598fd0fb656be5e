"""Notification webhooks: the tenants' subscriptions, and stack events POSTed, signed, to
their URLs.

Callers: ``convergence.api.subscriptions`` (the subscriptions API calls the use cases of
:func:`create_subscription` and its neighbours, and builds the app's :class:`Deliverer`, which
``convergence.api.app`` runs while the app is up and wakes as one of the engine's observers,
``Engine.observers``); the worker process (``convergence.workers.app`` and ``process``) runs
:func:`deliver_task` as the Celery task :data:`TASK_NAME`.

Everything goes through the store, so a crash loses nothing:

1. *Fan-out* (:func:`fan_out`): each subscription keeps the id of the last ``events`` row it
   considered (``last_event_id``). The stack-level events after it (``OS::Heat::Stack`` rows:
   a stack's action starting, ending or failing) are named like Heat's notifications
   (:func:`event_type`: ``orchestration.stack.<action>.start|end|error``) and, when they match
   one of the subscription's patterns (``fnmatch``: ``orchestration.stack.*``), become a
   ``deliveries`` row, in the same transaction that moves the cursor on.
2. *Delivery* (:func:`deliver_due`): due rows are claimed (their due time pushed ahead by a
   lease, compare-and-swap), POSTed with httpx, then marked delivered or rescheduled with
   exponential backoff (``webhook_backoff_seconds`` x 2^(attempt-1)) until
   ``webhook_max_attempts``. At least once: a receiver de-duplicates on ``X-Event-Id`` (the
   body's ``event_id``), stable across attempts. ``X-Signature: sha256=<hex>`` is the
   HMAC-SHA256 of the exact body bytes keyed with the subscription's secret.

What a tenant may reach: a URL whose host is an IP literal of a refused kind (loopback,
private, link-local, metadata...: ``services.webhook_destinations``) is refused when the
subscription is created, and every connection is checked again on the addresses it goes to
(``services.webhook_client``), unless ``webhook_allowed_networks`` trusts them. A failed
attempt stores a class of failure (``HTTP 503``, ``timed out``, ``connection failed``,
``destination not allowed``), never the connection's words. A tenant holds at most
``max_subscriptions_per_tenant`` subscriptions, counted under a lock of the tenant's
subscriptions, so that two creates at once cannot both take the last place.

Who runs it: with no broker, the API process's :class:`Deliverer` thread delivers itself; with
a broker, that thread only fans out and sends a :data:`TASK_NAME` task when something is due,
and a Celery worker delivers (several senders are harmless: claims are atomic).
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx

from convergence.background import Loop
from convergence.errors import ConvergenceError, InvalidParameter
from convergence.ports.store import Store
from convergence.ports.views import (
    DeliveryView,
    EventView,
    NewDelivery,
    StackView,
    SubscriptionView,
)
from convergence.services import webhook_client
from convergence.services.webhook_destinations import Destinations, networks
from convergence.settings import Settings

if TYPE_CHECKING:
    from convergence.services.context import Runtime

log = logging.getLogger(__name__)

TASK_NAME = "convergence.webhooks.deliver"
STACK_TYPE = "OS::Heat::Stack"
PHASES = {"IN_PROGRESS": "start", "COMPLETE": "end", "FAILED": "error"}
CLAIM_SECONDS = 60.0  # a claimed delivery is not sent by anyone else for this long
BATCH = 50
TIMEOUT_SECONDS = webhook_client.TIMEOUT_SECONDS
MAX_BACKOFF_SECONDS = 3600.0
_EVENT_NAMESPACE = uuid.UUID("6f1c2a53-2b8e-4d55-9a57-0c2f4e0f9b11")


# Subscriptions -------------------------------------------------------------------------------

class SubscriptionLimitReached(ConvergenceError):
    """The tenant holds ``limit`` subscriptions already (Heat's words for its stacks)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"You have reached the maximum subscriptions per tenant, {limit}. "
                         "Please delete some subscriptions.")
        self.limit = limit


def check_url(settings: Settings, url: str) -> None:
    """InvalidParameter("url") unless ``url`` is an http(s) URL with a host, and that host,
    when it is an IP literal, is an address webhooks may reach."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        parsed = None
    if parsed is None or parsed.scheme not in webhook_client.SCHEMES or not parsed.host:
        raise InvalidParameter("url", "'url' must be an http or https URL.")
    refused = Destinations.from_settings(settings).host_refusal(parsed.host)
    if refused is not None:
        address, why = refused
        raise InvalidParameter(
            "url", f"'url' names {address}, a {why} address: webhooks are not delivered to "
            "loopback, private, link-local, multicast, reserved or other addresses that are "
            "not global, unless the operator allows their network.")


def create_subscription(rt: Runtime, tenant: str, url: str, events: Sequence[str],
                        stack_id: str | None, secret: str) -> SubscriptionView:
    """Subscribe ``url`` to the tenant's stack events of the types ``events`` names (exact
    names or globs: :func:`valid_pattern`), of one stack or (``stack_id`` None) all.

    InvalidParameter when the URL is not one to deliver to (:func:`check_url`);
    SubscriptionLimitReached when the tenant holds ``max_subscriptions_per_tenant`` already
    (counted with the tenant's subscriptions locked: two creates at once take turns)."""
    check_url(rt.settings, url)
    limit = rt.settings.max_subscriptions_per_tenant
    with rt.store.begin() as tx:
        if limit > 0 and tx.count_subscriptions(tenant, lock=True) >= limit:
            raise SubscriptionLimitReached(limit)
        return tx.insert_subscription(str(uuid.uuid4()), tenant, url, list(events), stack_id,
                                      secret)


def list_subscriptions(rt: Runtime, tenant: str) -> list[SubscriptionView]:
    with rt.store.read() as tx:
        return tx.subscriptions(tenant)


def get_subscription(rt: Runtime, tenant: str, sub_id: str) -> SubscriptionView | None:
    """The tenant's subscription (None: no such subscription of this tenant)."""
    with rt.store.read() as tx:
        return tx.subscription(tenant, sub_id)


def subscription_deliveries(rt: Runtime, tenant: str, sub_id: str) -> list[DeliveryView] | None:
    """The delivery log of the tenant's subscription (None: no such subscription)."""
    with rt.store.read() as tx:
        if tx.subscription(tenant, sub_id) is None:
            return None
        return tx.deliveries(sub_id)


def delete_subscription(rt: Runtime, tenant: str, sub_id: str) -> bool:
    """Remove the tenant's subscription; False when it has none of that id."""
    with rt.store.begin() as tx:
        return tx.delete_subscription(tenant, sub_id)


# Naming and signing ------------------------------------------------------------------------

def event_type(event: EventView) -> str | None:
    """Heat's notification name for a stack-level event, None for any other event."""
    phase = PHASES.get(event.status)
    if event.resource_type != STACK_TYPE or phase is None:
        return None
    return f"orchestration.stack.{event.action.lower()}.{phase}"


def matches(patterns: Sequence[str], name: str) -> bool:
    """Whether an event type is one a subscription asked for (exact names or globs)."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def valid_pattern(pattern: str) -> bool:
    return pattern.startswith("orchestration.") or pattern == "*"


def event_id(event: EventView) -> str:
    """The de-duplication key of an event: the same for every attempt and subscription."""
    return str(uuid.uuid5(_EVENT_NAMESPACE, f"{event.stack_id}/{event.id}"))


def notification(event: EventView, stack: StackView, name: str) -> dict[str, Any]:
    """The delivered body (a CloudEvents-like envelope around Heat's payload fields)."""
    return {
        "event_id": event_id(event),
        "event_type": name,
        "timestamp": datetime.fromtimestamp(event.created_at, UTC).isoformat(),
        "payload": {"stack_id": stack.id, "stack_name": stack.name, "tenant": stack.tenant,
                    "action": event.action, "status": event.status, "reason": event.reason,
                    "generation": event.generation},
    }


def encode(body: dict[str, Any]) -> bytes:
    """The exact bytes sent (and signed)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def signature(secret: str, body: bytes) -> str:
    """The ``X-Signature`` header value."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str) -> bool:
    """What a receiver does with ``X-Signature`` (constant-time comparison)."""
    return hmac.compare_digest(signature(secret, body), header)


def backoff(settings: Settings, attempts: int) -> float:
    """The wait after the ``attempts``-th failed attempt: 1, 2, 4 ... x the base."""
    return float(min(settings.webhook_backoff_seconds * 2 ** max(attempts - 1, 0),
                     MAX_BACKOFF_SECONDS))


# Fan-out and delivery ------------------------------------------------------------------------

def fan_out(store: Store) -> int:
    """Record the deliveries of the stack events committed since each subscription's cursor;
    returns how many were recorded."""
    recorded = 0
    with store.begin() as tx:
        upto = tx.max_event_id()
        for sub in tx.subscriptions(lock=True):
            if sub.last_event_id >= upto:
                continue
            items = []
            for event, stack in tx.stack_level_events(sub.last_event_id, upto, sub.tenant,
                                                      sub.stack_id, STACK_TYPE):
                name = event_type(event)
                if name is not None and matches(sub.events, name):
                    items.append(NewDelivery(sub.id, event_id(event), name,
                                             notification(event, stack, name)))
            tx.add_deliveries(sub.id, upto, items)
            recorded += len(items)
    return recorded


def send_one(client: httpx.Client, delivery: DeliveryView, sub: SubscriptionView) -> str:
    """POST one delivery; returns "" when the receiver took it (2xx), else the class of
    failure stored on it (``HTTP 503``, ``timed out``...: ``webhook_client``), never the
    connection's own words, which go to this process's log only. The answer's body is not
    read."""
    body = encode(delivery.body)
    headers = {"Content-Type": "application/json", "X-Event-Id": delivery.event_id,
               "X-Event-Type": delivery.event_type, "X-Signature": signature(sub.secret, body)}
    try:
        with client.stream("POST", sub.url, content=body, headers=headers) as response:
            status = response.status_code
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        error = webhook_client.failure_class(exc)
        log.info("webhook delivery %s to subscription %s: %s (%s: %s)", delivery.event_id,
                 sub.id, error, type(exc).__name__, exc)
        return error
    return "" if 200 <= status < 300 else f"HTTP {status}"


def delivery_client(settings: Settings) -> httpx.Client:
    """The client deliveries are sent with: it connects only where ``settings`` allow."""
    return webhook_client.client(Destinations.from_settings(settings))


def deliver_due(store: Store, settings: Settings, client: httpx.Client | None = None,
                limit: int = BATCH) -> int:
    """Fan out, then attempt every due delivery (up to ``limit``); returns attempts made."""
    fan_out(store)
    own = client is None
    http = client if client is not None else delivery_client(settings)
    try:
        with store.begin() as tx:
            claimed = tx.claim_deliveries(CLAIM_SECONDS, limit)
        for delivery, sub in claimed:
            error = send_one(http, delivery, sub)
            attempts = delivery.attempts + 1
            retry_at: float | None = None
            if error:
                if attempts < settings.webhook_max_attempts:
                    retry_at = store.clock() + backoff(settings, attempts)
                    log.info("webhook delivery %s to subscription %s failed (attempt %d): %s",
                             delivery.event_id, sub.id, attempts, error)
                else:
                    log.warning("webhook delivery %s to subscription %s given up after %d "
                                "attempts: %s", delivery.event_id, sub.id, attempts, error)
            with store.begin() as tx:
                tx.delivery_attempted(delivery.id, delivered=not error, error=error,
                                      next_attempt_at=retry_at)
        return len(claimed)
    finally:
        if own:
            http.close()


def seconds_until_due(store: Store) -> float | None:
    """How long until a delivery is due (0 when one is), None when none is pending."""
    with store.begin() as tx:
        due = tx.next_delivery_due()
    return None if due is None else max(due - store.clock(), 0.0)


# Running it ----------------------------------------------------------------------------------

class Deliverer(Loop):
    """Runs ``step`` on a thread: after :meth:`wake` (events committed), when a delivery is
    due, and every ``idle`` seconds (events committed by other processes)."""

    def __init__(self, store: Store, step: Callable[[], object], idle: float = 1.0) -> None:
        self._store = store
        self._step = step
        self._idle = idle
        super().__init__("webhooks", on_error_wait=idle)

    def turn(self, stop: threading.Event) -> float:
        self._step()
        due = seconds_until_due(self._store)
        # A floor, so that a delivery due but not yet claimed (broker mode) is not spun on.
        return self._idle if due is None else min(self._idle, max(due, 0.05))


def local_step(store: Store, settings: Settings) -> Callable[[], object]:
    """Embedded mode: this process delivers."""
    client = delivery_client(settings)
    return lambda: deliver_due(store, settings, client)


def celery_step(store: Store, send: Callable[[], object]) -> Callable[[], object]:
    """Broker mode: fan out here, and have a worker deliver (``send``) when one is due."""
    def step() -> None:
        fan_out(store)
        due = seconds_until_due(store)
        if due is not None and due <= 0:
            send()
    return step


# The Celery task -----------------------------------------------------------------------------

def task_kwargs(settings: Settings) -> dict[str, Any]:
    """The sender's delivery settings, carried in the task: a worker applies the backoff,
    attempt limit and allowed networks of the API process that sent it, not its own
    environment's (the operator configures webhooks in one place)."""
    return {"backoff_seconds": settings.webhook_backoff_seconds,
            "max_attempts": settings.webhook_max_attempts,
            "allowed_networks": list(settings.webhook_allowed_networks)}


def deliver_task(store: Store, settings: Settings, backoff_seconds: float | None = None,
                 max_attempts: int | None = None,
                 allowed_networks: Sequence[str] | None = None) -> int:
    """The body of the :data:`TASK_NAME` task (run by ``convergence.workers``, with the
    worker's store and settings): deliver what is due, from this worker, with the sender's
    settings (:func:`task_kwargs`) when given, else this worker's."""
    if backoff_seconds is not None:
        settings = settings.with_(webhook_backoff_seconds=float(backoff_seconds))
    if max_attempts is not None:
        settings = settings.with_(webhook_max_attempts=int(max_attempts))
    if allowed_networks is not None:
        settings = settings.with_(webhook_allowed_networks=tuple(
            str(n) for n in networks(allowed_networks)))
    return deliver_due(store, settings)
