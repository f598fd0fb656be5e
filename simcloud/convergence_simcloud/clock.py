"""The simulated cloud's time: the clock protocol it reads, and the system clock by default.

Callers: ``convergence_simcloud.state.SimCloud`` takes a :class:`Clock` (the system clock
unless given) and reads every timestamp, token expiry and clock-driven state machine (a
server's build, a volume's phases, a fault rule's delay) from its ``now()``. Tests hand it a
clock they move by hand instead (the engine's ``convergence.ports.clock.ManualClock`` fits,
since a protocol is matched by shape). The protocol is this package's own, not imported from
the engine, so that the simulated cloud is a distribution of its own that depends on nothing
of Convergence.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """What the simulated cloud asks of a clock: the time, in seconds since the epoch."""

    def now(self) -> float: ...


class SystemClock:
    """The wall clock."""

    def now(self) -> float:
        return time.time()
