"""Keeping leases while steps run: renewal, and knowing when one is lost.

A batch claims its records for ``lease_seconds``. Most batches are done in milliseconds; one
whose steps wait on a slow cloud call could outlive its leases, and then another worker would
take them over while this one is still acting. :class:`LeaseKeeper` renews the leases of the
batches in hand from one daemon thread, every third of a lease, and tells a step whether its
lease is still good before it calls the cloud: a worker that was frozen (SIGSTOP, a VM paused,
a long GC) past its lease finds out when it wakes, and skips the call rather than act on a
resource someone else now holds. Its writes would be refused anyway (fencing); this keeps its
actions out of the cloud too.

Owned by the engine's context (:mod:`convergence.engine.context`, one keeper per engine): the
batch runner holds an owner's leases while its batches run, the claims add to them
(:mod:`~convergence.engine.claim`, :mod:`~convergence.engine.batch`), the steps ask
:meth:`LeaseKeeper.good`; the orphan reaper (:mod:`convergence.engine.orphans`) holds its own,
and the worker process revokes them all when it lets go (``Engine.leases``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from convergence.ports.store import Store

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Held:
    ids: set[int] = field(default_factory=set)
    # Being let go of: their batch's results are being recorded (the commit releases them).
    leaving: set[int] = field(default_factory=set)
    good_until: float = 0.0  # by this process's clock: the lease as last confirmed


class LeaseKeeper:
    def __init__(self, store: Store, lease_seconds: float,
                 clock: Callable[[], float] | None = None) -> None:
        self._store = store
        self._lease = lease_seconds
        self._clock = clock or store.clock
        self._held: dict[str, _Held] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    @contextmanager
    def holding(self, owner: str) -> Iterator[None]:
        """While the block runs, ``owner``'s leases (see :meth:`add`) are renewed."""
        with self._lock:
            self._held[owner] = _Held(good_until=self._clock() + self._lease)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="lease-keeper",
                                                daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._held.pop(owner, None)

    def add(self, owner: str, ids: Iterable[int]) -> None:
        """Records ``owner`` just claimed (good, until renewed, for a lease from the start of
        :meth:`holding`, which is no later than the claim)."""
        with self._lock:
            held = self._held.get(owner)
            if held is not None:
                held.ids.update(ids)

    def leaving(self, owner: str, ids: Iterable[int]) -> None:
        """Records ``owner`` is about to let go of (their batch is being recorded): still
        renewed until :meth:`drop`, but a renewal that finds them released already does not
        take them for lost."""
        with self._lock:
            held = self._held.get(owner)
            if held is not None:
                held.leaving.update(ids)

    def drop(self, owner: str, ids: Iterable[int]) -> None:
        """Records ``owner`` let go of (their batch was recorded): no longer renewed."""
        with self._lock:
            held = self._held.get(owner)
            if held is not None:
                held.ids.difference_update(ids)
                held.leaving.difference_update(ids)

    def revoke(self) -> None:
        """Every lease in hand is gone from now on (the process is letting go of them)."""
        with self._lock:
            for held in self._held.values():
                held.good_until = 0.0

    def good(self, owner: str) -> bool:
        """Whether ``owner``'s leases are still good by the last renewal (a step asks before
        it calls the cloud)."""
        with self._lock:
            held = self._held.get(owner)
            return held is None or self._clock() < held.good_until

    def _loop(self) -> None:
        while True:
            self._wake.wait(max(self._lease / 3.0, 0.05))
            self._wake.clear()
            with self._lock:
                if not self._held:  # idle: the next batch starts the thread again
                    self._thread = None
                    return
            try:
                self.renew()
            except Exception:  # the database may be back at the next turn
                log.exception("renewing leases failed")

    def renew(self) -> None:
        """Push every held lease ``lease_seconds`` ahead (only the ones still ours)."""
        with self._lock:
            held = {owner: set(h.ids) for owner, h in self._held.items() if h.ids}
        started = time.monotonic()
        for owner, ids in held.items():
            with self._store.begin() as tx:
                until = tx.now + self._lease
                kept = tx.renew_leases(ids, owner, until)
            with self._lock:
                mine = self._held.get(owner)
                if mine is None:
                    continue
                # Not renewed and still in hand (not let go of by its batch meanwhile).
                lost = (ids - kept) & (mine.ids - mine.leaving)
                if not lost:
                    mine.good_until = until
                else:
                    mine.good_until = 0.0  # taken over: nothing more for this owner to do
                    log.warning("leases of %s were taken over (%d of %d kept)", owner,
                                len(ids) - len(lost), len(ids))
        if time.monotonic() - started > self._lease / 3.0:
            log.warning("renewing leases took %.1fs", time.monotonic() - started)
