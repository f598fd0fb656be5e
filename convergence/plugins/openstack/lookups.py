"""Short-lived memory of the cloud's reference objects (flavors, images, networks, subnets)
a process looks up over and over: a thousand servers of one flavor on one network ask for
that flavor, image, network and subnet a thousand times each.

Callers: :class:`~convergence.plugins.openstack.clouds.Clouds` gives every connection it makes
one :class:`Lookups` (:func:`of`); the resource types look their references up through
:func:`cached`. What is kept is what a look-up answered, for ``ttl`` seconds (a renamed
network, a flavor deleted and made again, is seen within that), never a refusal or an
absence; the objects are read, never changed. Thread-safe: the in-process dispatcher's
threads share connections.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")
TTL = 10.0  # seconds a look-up's answer is trusted
ATTRIBUTE = "convergence_lookups"  # where a connection carries its Lookups


class Lookups:
    """Answers of look-ups by key, each kept ``ttl`` seconds."""

    def __init__(self, ttl: float = TTL, now: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._now = now
        self._kept: dict[Hashable, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, look: Callable[[], T], ttl: float | None = None) -> T:
        now = self._now()
        with self._lock:
            found = self._kept.get(key)
            if found is not None and found[0] > now:
                return found[1]  # type: ignore[no-any-return]
        value = look()  # outside the lock: a slow cloud holds no other thread up
        if value is not None:
            with self._lock:
                if len(self._kept) > 10_000:  # a bound, not a policy: start over
                    self._kept.clear()
                self._kept[key] = (now + (self.ttl if ttl is None else ttl), value)
        return value


def of(conn: Any) -> Lookups | None:
    """The lookups a connection carries (None: one not made by ``Clouds``)."""
    found = getattr(conn, ATTRIBUTE, None)
    return found if isinstance(found, Lookups) else None


def cached(conn: Any, key: Hashable, look: Callable[[], T], ttl: float | None = None) -> T:
    """``look()``, or what it answered within the last few seconds (``ttl``; default
    :data:`TTL`) on this connection."""
    lookups = of(conn)
    return look() if lookups is None else lookups.get(key, look, ttl)
