"""A prefork node's pool processes, seen from its main process: signal, kill, watch them.

The main process signals them, kills them, and watches for those that die.

Caller: the worker's life (``convergence.workers.process.WorkerProcess``): it tells the pool
processes of a stopping node to finish the step in hand (:func:`signal_children`), kills
those still running after the grace period (:func:`kill_children`), and runs a
:class:`PoolWatch` while the node runs. The pool is billiard's (Celery's process pool).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable

from billiard.process import active_children

from convergence.background import Loop
from convergence.workers.procfs import exited

POOL_WATCH_SECONDS = 0.5  # how often a prefork node looks for pool processes that died


def signal_children(signum: int = signal.SIGTERM) -> None:
    """Send ``signum`` to every pool process billiard knows of."""
    for child in active_children():
        with contextlib.suppress(OSError):
            os.kill(child.pid, signum)


def kill_children(join_seconds: float = 5.0) -> None:
    """SIGKILL every pool process still alive, and wait a while for each to end."""
    children = active_children()
    for child in children:
        with contextlib.suppress(OSError):
            os.kill(child.pid, signal.SIGKILL)
    for child in children:
        child.join(join_seconds)


class PoolWatch(Loop):
    """In a prefork node's main process: a pool process that exits while the node runs
    (``kill -9``, the OOM killer) leaves its leases; billiard starts another process and
    re-queues the message, and ``on_exit(pid)`` lets go of the leases at once, with a "taken
    over" event, rather than after they run out. Exited means gone or a zombie: nothing of it
    can act any more. Stopped when the node stops: its let-go then hands everything over."""

    def __init__(self, on_exit: Callable[[int], None],
                 period: float = POOL_WATCH_SECONDS) -> None:
        super().__init__("pool-watch", on_error_wait=period)
        self._on_exit = on_exit
        self._period = period
        self._known: set[int] = set()

    def turn(self, stop: threading.Event) -> float:
        # The pool's processes as billiard knows them; whether one is dead is asked of the
        # system, since billiard may not have reaped it yet (or another reaper did).
        self._known |= {c.pid for c in active_children() if c.pid is not None}
        for pid in sorted(p for p in self._known if exited(p)):
            if stop.is_set():
                break
            self._known.discard(pid)
            self._on_exit(pid)
        return self._period
