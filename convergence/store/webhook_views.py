"""What the store answers about notification webhooks: plain frozen values, no ORM objects.

Callers: ``Tx`` (``store/repository.py``) builds them; ``convergence.webhooks`` and the
subscriptions API (``convergence/api/subscriptions.py``) read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SubscriptionView:
    id: str
    tenant: str
    url: str
    events: tuple[str, ...]
    stack_id: str | None
    secret: str
    last_event_id: int
    created_at: float


@dataclass(frozen=True, slots=True)
class DeliveryView:
    id: int
    subscription_id: str
    event_id: str
    event_type: str
    body: dict[str, Any]
    attempts: int
    next_attempt_at: float | None
    delivered_at: float | None
    last_error: str


@dataclass(frozen=True, slots=True)
class NewDelivery:
    subscription_id: str
    event_id: str
    event_type: str
    body: dict[str, Any]
