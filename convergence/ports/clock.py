"""Time, as a seam: the system clock, or a clock tests move by hand.

Callers: ``convergence.runtime`` builds a :class:`SystemClock` (tests pass a
:class:`ManualClock`) and hands it out: the store stamps leases and deadlines with ``now()``
(``Store.clock``, which the engine's steps and lease keeper read too); plugins measure their
waits with it (``PluginHost.now``); the in-process dispatcher waits for delayed work with
``sleep_until``, as do the services' waits for a stack to settle (``Runtime.clock``). With a
:class:`ManualClock` waiting jumps straight to the due time, so a scenario with minutes of
simulated waits runs in milliseconds and its outcome does not depend on the machine's speed.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...

    def sleep_until(self, when: float, interrupt: threading.Event | None = None) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def sleep_until(self, when: float, interrupt: threading.Event | None = None) -> None:
        delay = when - time.time()
        if delay <= 0:
            return
        if interrupt is not None:
            interrupt.wait(delay)
        else:
            time.sleep(delay)


class ManualClock:
    """A clock that moves only when told to, or when someone waits on it."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def step_back(self, seconds: float) -> None:
        """Go back in time, as a system clock stepped back by NTP does (and as the start of
        one transaction may read an earlier time than another that committed before it)."""
        with self._lock:
            self._now -= seconds

    def sleep_until(self, when: float, interrupt: threading.Event | None = None) -> None:
        with self._lock:
            if when > self._now:
                self._now = when
