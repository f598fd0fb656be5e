"""Notification webhooks: subscriptions, and the deliveries fanned out to them.

Callers: composed into ``transactions.Tx``; reached through the ports' ``Webhooks`` protocol
by ``convergence.services.webhooks`` (fan-out: stack-level events become deliveries, each
subscription's cursor moved past them in the same transaction; delivery: due rows claimed by a
compare-and-swap on their due time) and the subscriptions API (``convergence.api``).

A tenant's subscriptions are counted under a lock of their own (:meth:`count_subscriptions`),
so that the cap on them holds when two creates run at once: on PostgreSQL a transaction-level
advisory lock keyed by the tenant (row locks cannot stop a row that is not there yet from
being inserted); SQLite's writers take turns already (``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, insert, select, text, update

from convergence.ports.views import (
    DeliveryView,
    EventView,
    NewDelivery,
    StackView,
    SubscriptionView,
)
from convergence.store import dialect
from convergence.store.rows import (
    T_DELIVERY,
    T_EVENT,
    T_STACK,
    T_SUB,
    Row,
    TxPart,
    delivery_view,
    event_view,
    stack_view,
    subscription_view,
)

# The advisory lock's first key ("subs" in ASCII); the second is the tenant's hash.
_SUBSCRIPTIONS_LOCK = 0x73756273


class WebhookQueries(TxPart):
    # subscriptions ------------------------------------------------------------------------
    def count_subscriptions(self, tenant: str, *, lock: bool = False) -> int:
        """How many subscriptions ``tenant`` holds. ``lock``: first wait for, then hold until
        the transaction ends, the tenant's subscriptions lock, so that a count followed by an
        insert is not raced by another transaction doing the same."""
        if lock and dialect.is_postgres(self.conn):
            self.conn.execute(text("SELECT pg_advisory_xact_lock(:space, hashtext(:tenant))"),
                              {"space": _SUBSCRIPTIONS_LOCK, "tenant": tenant})
        return int(self.conn.execute(select(func.count()).select_from(T_SUB)
                                     .where(T_SUB.c.tenant == tenant)).scalar_one())

    def insert_subscription(self, sub_id: str, tenant: str, url: str, events: Sequence[str],
                            stack_id: str | None, secret: str) -> SubscriptionView:
        """A new subscription; it is notified of events committed from now on only. Its
        secret is kept encrypted (``store/sealing.py``)."""
        last = self.conn.execute(select(func.max(T_EVENT.c.id))).scalar() or 0
        values = {"id": sub_id, "tenant": tenant, "url": url, "events": list(events),
                  "stack_id": stack_id, "secret": self.sealer.seal(secret),
                  "last_event_id": int(last),
                  "created_at": self.now}
        self.conn.execute(insert(T_SUB).values(**values))
        return SubscriptionView(sub_id, tenant, url, tuple(events), stack_id, secret, int(last),
                                self.now)

    def subscriptions(self, tenant: str | None = None, *,
                      lock: bool = False) -> list[SubscriptionView]:
        """A tenant's subscriptions (every tenant's when None), oldest first."""
        query = select(T_SUB).order_by(T_SUB.c.created_at, T_SUB.c.id)
        if tenant is not None:
            query = query.where(T_SUB.c.tenant == tenant)
        if lock:
            query = dialect.lock(self.conn, query)
        return [subscription_view(r, self.sealer) for r in self.conn.execute(query)]

    def subscription(self, tenant: str, sub_id: str) -> SubscriptionView | None:
        row = self.conn.execute(select(T_SUB).where(
            T_SUB.c.tenant == tenant, T_SUB.c.id == sub_id)).first()
        return subscription_view(row, self.sealer) if row is not None else None

    def delete_subscription(self, tenant: str, sub_id: str) -> bool:
        """Remove a subscription and its deliveries (pending ones are not sent)."""
        if self.subscription(tenant, sub_id) is None:
            return False
        self.conn.execute(delete(T_DELIVERY).where(T_DELIVERY.c.subscription_id == sub_id))
        self.conn.execute(delete(T_SUB).where(T_SUB.c.id == sub_id))
        return True

    # fan-out ------------------------------------------------------------------------------
    def max_event_id(self) -> int:
        return int(self.conn.execute(select(func.max(T_EVENT.c.id))).scalar() or 0)

    def stack_level_events(self, after: int, upto: int, tenant: str, stack_id: str | None,
                           resource_type: str) -> list[tuple[EventView, StackView]]:
        """A tenant's events of ``resource_type`` (the stacks' own) in ``(after, upto]``."""
        query = (select(T_EVENT, T_STACK).join(T_STACK, T_STACK.c.id == T_EVENT.c.stack_id)
                 .where(T_EVENT.c.id > after, T_EVENT.c.id <= upto,
                        T_EVENT.c.resource_type == resource_type, T_STACK.c.tenant == tenant)
                 .order_by(T_EVENT.c.id))
        if stack_id is not None:
            query = query.where(T_EVENT.c.stack_id == stack_id)
        width = len(T_EVENT.c)
        return [(event_view(Row(T_EVENT, r[:width])),
                 stack_view(Row(T_STACK, r[width:]), self.sealer))
                for r in self.conn.execute(query)]

    def add_deliveries(self, sub_id: str, last_event_id: int,
                       items: Sequence[NewDelivery]) -> None:
        """Record deliveries due now and move the subscription's cursor past their events."""
        if items:
            self.conn.execute(insert(T_DELIVERY), [
                {"subscription_id": d.subscription_id, "event_id": d.event_id,
                 "event_type": d.event_type, "body": d.body, "attempts": 0,
                 "next_attempt_at": self.now, "delivered_at": None, "last_error": ""}
                for d in items])
        self.conn.execute(update(T_SUB).where(T_SUB.c.id == sub_id)
                          .values(last_event_id=last_event_id))

    # delivery -----------------------------------------------------------------------------
    def claim_deliveries(self, lease: float, limit: int
                         ) -> list[tuple[DeliveryView, SubscriptionView]]:
        """Due deliveries, each pushed ``lease`` seconds ahead so that no one else sends it
        meanwhile (compare-and-swap on its due time); oldest due first."""
        rows = self.conn.execute(
            select(T_DELIVERY, T_SUB).join(T_SUB, T_SUB.c.id == T_DELIVERY.c.subscription_id)
            .where(T_DELIVERY.c.delivered_at.is_(None),
                   T_DELIVERY.c.next_attempt_at.is_not(None),
                   T_DELIVERY.c.next_attempt_at <= self.now)
            .order_by(T_DELIVERY.c.next_attempt_at, T_DELIVERY.c.id).limit(limit)).all()
        width = len(T_DELIVERY.c)
        claimed: list[tuple[DeliveryView, SubscriptionView]] = []
        for r in rows:
            delivery = delivery_view(Row(T_DELIVERY, r[:width]))
            done = self.conn.execute(update(T_DELIVERY).where(
                T_DELIVERY.c.id == delivery.id,
                T_DELIVERY.c.next_attempt_at == delivery.next_attempt_at,
            ).values(next_attempt_at=self.now + lease))
            if done.rowcount == 1:
                claimed.append((delivery, subscription_view(Row(T_SUB, r[width:]), self.sealer)))
        return claimed

    def delivery_attempted(self, delivery_id: int, *, delivered: bool, error: str,
                           next_attempt_at: float | None) -> None:
        """Count an attempt: delivered, or failed with its error and the next try (None: no
        more tries)."""
        self.conn.execute(update(T_DELIVERY).where(T_DELIVERY.c.id == delivery_id).values(
            attempts=T_DELIVERY.c.attempts + 1, last_error=error,
            delivered_at=self.now if delivered else None,
            next_attempt_at=None if delivered else next_attempt_at))

    def deliveries(self, sub_id: str) -> list[DeliveryView]:
        """A subscription's deliveries, oldest first (the delivery log)."""
        return [delivery_view(r) for r in self.conn.execute(
            select(T_DELIVERY).where(T_DELIVERY.c.subscription_id == sub_id)
            .order_by(T_DELIVERY.c.id))]

    def next_delivery_due(self) -> float | None:
        """When the earliest undelivered delivery is due, if any."""
        value = self.conn.execute(select(func.min(T_DELIVERY.c.next_attempt_at)).where(
            T_DELIVERY.c.delivered_at.is_(None))).scalar()
        return float(value) if value is not None else None
