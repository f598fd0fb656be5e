"""Holding the stacks this process drives, so that other processes can tell it is alive.

In embedded mode the work of a request runs in the process that waits for it (the CLI's own,
on its in-process dispatcher). Another command on the same database that finds the stack in
progress must tell a stack some live process is driving (leave it be: show it as it is) from
one whose process died or was interrupted (resume it). While a process drives a stack it holds
it (``Tx.hold_stack``): a row with a deadline ``seconds`` ahead, renewed every third of that
from a daemon thread, so a process busy in a long step still renews. Leaving the block lets
go; a process killed with SIGKILL simply stops renewing, and its hold runs out.

Callers: ``convergence.runtime.open_runtime`` builds one :class:`StackHolds` per runtime
(``Runtime.holds``); ``convergence.services.running.holding`` holds a stack with it while
this process drives the stack's work (the CLI's embedded mode: ``convergence.cli.progress``).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from convergence.ports.store import Store

log = logging.getLogger(__name__)


def holder_id() -> str:
    """This process, as a holder: host, pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class StackHolds:
    """The stacks one process drives, held in the database while it does."""

    def __init__(self, store: Store, seconds: float, holder: str | None = None) -> None:
        self.store = store
        self.seconds = seconds
        self.holder = holder or holder_id()
        self._held: Counter[str] = Counter()  # stack id -> blocks holding it
        # Taken around every write too: a renewal never lands after the release it raced.
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextmanager
    def holding(self, stack_id: str) -> Iterator[bool]:
        """Hold the stack while the block runs. Yields whether this process holds it now;
        False: another live process does (it is taken over at a renewal once that one lets
        go or dies)."""
        with self._lock:
            self._held[stack_id] += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="stack-holds",
                                                daemon=True)
                self._thread.start()
        try:
            with self._lock:
                taken = self._take(stack_id)
            yield taken
        finally:
            with self._lock:
                self._held[stack_id] -= 1
                if self._held[stack_id] <= 0:
                    del self._held[stack_id]
                    self._release(stack_id)

    def renew(self) -> None:
        """Push the hold of every stack in hand ``seconds`` ahead (or take it, if its holder
        let go or died meanwhile)."""
        with self._lock:
            for stack_id in list(self._held):
                self._take(stack_id)

    def _loop(self) -> None:
        while True:
            time.sleep(max(self.seconds / 3.0, 0.05))
            with self._lock:
                if not self._held:  # nothing held: the next block starts the thread again
                    self._thread = None
                    return
            self.renew()

    def _take(self, stack_id: str) -> bool:
        try:
            with self.store.begin() as tx:
                return tx.hold_stack(stack_id, self.holder, tx.now + self.seconds)
        except Exception:  # the database may take it at the next renewal
            log.exception("could not hold stack %s", stack_id)
            return False

    def _release(self, stack_id: str) -> None:
        try:
            with self.store.begin() as tx:
                tx.release_stack_hold(stack_id, self.holder)
        except Exception:  # then the hold runs out by itself
            log.exception("could not let go of stack %s", stack_id)
