"""The in-process dispatcher: the engine's steps on a thread pool, no broker needed.

What runs when no broker is configured (the embedded default) and in the fast test tier:
built by ``convergence.runtime.open_runtime``, driven by the API's dispatcher driver
(``convergence.api.app``), by the use cases' waits for a stack to settle (``convergence.services``,
for the CLI's commands) and by the tests and ``benchmarks/engine_scale.py``. It calls the same
``Engine.execute`` a Celery worker calls. Delayed work (polls of pending
operations) waits in a heap keyed by due time; with a manual clock, waiting jumps ahead.

Adversity is a parameter: ``shuffle`` runs due work in random order and ``duplicate``
delivers every item twice, which is how the tests show that steps are order-independent and
idempotent.

A periodic job (the sweeper, see :meth:`InProcessDispatcher.every`) runs between items once
its period has passed, and once more when nothing is left to run, before ``run`` gives up on a
condition that does not hold: work lost by a process that died is found that way.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import logging
import random
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from convergence.ports.clock import Clock
from convergence.ports.work import NODES, Work

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5

# A periodic job: given ``force``, the work it found and when to look again (or None).
Periodic = Callable[[bool], tuple[Sequence[Work], float | None]]


@dataclass(order=True, slots=True)
class _Item:
    due: float
    order: int
    work: Work = None  # type: ignore[assignment]
    attempt: int = 0


class InProcessDispatcher:
    def __init__(self, execute: Callable[[Work], list[Work]], clock: Clock, *,
                 threads: int = 1, shuffle: bool = False, duplicate: bool = False,
                 seed: int | None = None) -> None:
        self._execute = execute
        self._clock = clock
        self._threads = max(1, threads)
        self._shuffle = shuffle
        self._duplicate = duplicate
        self._random = random.Random(seed)
        self._heap: list[_Item] = []
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self.errors: list[BaseException] = []
        self.executed = 0
        self._periodic: Periodic | None = None
        self._period = 0.0
        self._next_periodic = 0.0
        self._recheck_at: float | None = None

    def every(self, period: float, job: Periodic) -> None:
        """Run ``job(force)`` every ``period`` seconds of the clock while work runs, and
        with ``force`` when nothing is left. It returns work, which is dispatched, and when
        it expects to find more (a lease held elsewhere runs out then), or None."""
        self._periodic, self._period = job, period
        self._next_periodic = self._clock.now() + period

    def run_periodic(self, force: bool = False) -> bool:
        """The periodic job, if due (or forced); True if it found work."""
        if self._periodic is None:
            return False
        now = self._clock.now()
        if not force and now < self._next_periodic:
            return False
        self._next_periodic = now + self._period
        try:
            found, self._recheck_at = self._periodic(force)
        except Exception:
            log.exception("the periodic job failed")
            return False
        self.dispatch(self._not_queued(found))
        return bool(found)

    def _not_queued(self, offers: Sequence[Work]) -> list[Work]:
        """The sweeper's offers less what is queued here already. A ready node untouched for
        a lease, a plan not made within a period, a traversal with nothing left but not
        finished: each looks lost to the sweeper, but here it may only be waiting its turn (a
        thousand nested traversals at once queue for minutes), and a second copy was a
        second claim or a read that found it done: most of the transactions of a thousand
        groups' update. What is not queued (a message lost, a process gone) is offered."""
        traversals = {w.traversal_id for w in offers}
        if not traversals:
            return []
        with self._lock:
            queued = {(i.work.kind, i.work.traversal_id, seq) for i in self._heap
                      if i.work.traversal_id in traversals
                      for seq in (i.work.seqs if i.work.kind == NODES else (None,))}
        out: list[Work] = []
        for w in offers:
            if w.kind == NODES:
                seqs = tuple(s for s in w.seqs if (NODES, w.traversal_id, s) not in queued)
                if seqs:
                    out.append(dataclasses.replace(w, seqs=seqs) if seqs != w.seqs else w)
            elif (w.kind, w.traversal_id, None) not in queued:
                out.append(w)
        return out

    def _idle(self, until: Callable[[], bool] | None,
              stop: threading.Event | None) -> bool:
        """Nothing is queued and ``until`` does not hold: True to go on, after a sweep found
        work, or after waiting for the moment it said there may be some (work held by a
        process that is gone comes back when its leases run out)."""
        if until is None or until() or self._periodic is None:
            return False
        if self.run_periodic(True):
            return True
        if self._recheck_at is None:
            return False
        self._clock.sleep_until(max(self._recheck_at, self._next_periodic), stop)
        return not (stop is not None and stop.is_set())

    def dispatch(self, work: Sequence[Work]) -> None:
        now = self._clock.now()
        with self._lock:
            for w in work:
                copies = 2 if self._duplicate else 1
                for _ in range(copies):
                    heapq.heappush(self._heap, _Item(now + w.countdown, next(self._counter), w))

    def drop_pending(self) -> int:
        """Lose every queued item, as a broker that restarted without a disk does; returns
        how many were lost (the sweeper finds their work again in the database)."""
        with self._lock:
            lost = len(self._heap)
            self._heap.clear()
            return lost

    def pending(self) -> int:
        with self._lock:
            return len(self._heap)

    def queued(self) -> list[Work]:
        """The queued work items, soonest first (for tests and tools: what waits to run)."""
        with self._lock:
            return [i.work for i in sorted(self._heap)]

    def _take_due(self, limit: int) -> list[_Item]:
        now = self._clock.now()
        with self._lock:
            if not self._shuffle:
                # Soonest first, straight off the heap: a million-resource plan queues 5,000
                # batches at once, and looking through all of them for each one taken made a
                # traversal's dispatch grow with the square of its size.
                chosen: list[_Item] = []
                while self._heap and len(chosen) < limit and self._heap[0].due <= now:
                    chosen.append(heapq.heappop(self._heap))
                return chosen
            due = [i for i in self._heap if i.due <= now]
            if not due:
                return []
            chosen = self._random.sample(due, min(limit, len(due)))
            ids = {id(i) for i in chosen}
            self._heap = [i for i in self._heap if id(i) not in ids]
            heapq.heapify(self._heap)
            return chosen

    def _next_due(self) -> float | None:
        with self._lock:
            return self._heap[0].due if self._heap else None

    def _run(self, item: _Item) -> None:
        try:
            follow = self._execute(item.work)
        except Exception as exc:  # at-least-once: a failed execution is retried
            log.exception("work %s failed (attempt %d)", item.work, item.attempt + 1)
            if item.attempt + 1 >= MAX_ATTEMPTS:
                self.errors.append(exc)
                return
            with self._lock:
                heapq.heappush(self._heap, _Item(self._clock.now() + 0.1 * (item.attempt + 1),
                                                 next(self._counter), item.work,
                                                 item.attempt + 1))
            return
        self.executed += 1
        self.dispatch(follow)

    def run(self, until: Callable[[], bool] | None = None, max_items: int | None = None,
            stop: threading.Event | None = None) -> bool:
        """Run work until ``until()`` holds or nothing is left; True if ``until`` held."""
        done = 0
        if self._threads == 1:
            while not (stop is not None and stop.is_set()):
                if until is not None and until():
                    return True
                self.run_periodic()
                items = self._take_due(1)
                if not items:
                    nxt = self._next_due()
                    if nxt is None:
                        if self._idle(until, stop):
                            continue
                        return until() if until is not None else True
                    self._clock.sleep_until(nxt, stop)
                    continue
                self._run(items[0])
                done += 1
                if max_items is not None and done >= max_items:
                    return until() if until is not None else False
            return False
        with ThreadPoolExecutor(self._threads, thread_name_prefix="step") as pool:
            running: set[Future[None]] = set()
            while not (stop is not None and stop.is_set()):
                if until is not None and until() and not running:
                    return True
                self.run_periodic()
                room = self._threads - len(running)
                for item in self._take_due(room) if room > 0 else []:
                    running.add(pool.submit(self._run, item))
                if running:
                    finished, running = wait(running, timeout=0.05,
                                             return_when=FIRST_COMPLETED)
                    for f in finished:
                        f.result()
                    continue
                nxt = self._next_due()
                if nxt is None:
                    if self._idle(until, stop):
                        continue
                    return until() if until is not None else True
                self._clock.sleep_until(nxt, stop)
            return False
