"""Removing orphans: what steps made after their lease was taken over.

A worker frozen past its lease can wake up inside its create call: the cloud makes the thing,
the worker's result is refused (fenced off), and the resource's new holder, which looked for
it before it existed, has made its own. The engine notes the first as an orphan in the
transaction that refuses the result (``Tx.note_orphans``). The sweeper removes
it here, one orphan at a time, each under the lease of its record, so that nobody works on
the resource meanwhile:

- the record names the orphan (its new holder found it and adopted it): it is no orphan, and
  is forgotten;
- someone holds the record: left for a later sweep;
- otherwise the resource's plugin removes it, by its id and nothing else, and an event on the
  resource says so; if the cloud does not answer, the next sweep tries again.

Clouds that take a client token on create need none of this; OpenStack's APIs do not.

Caller: the sweeper (:mod:`convergence.engine.sweeper`), through :func:`reap`; orphans are
noted by the recorder (:mod:`convergence.engine.recording`).
"""

from __future__ import annotations

import logging
from collections import Counter

from convergence.engine.engine import Engine
from convergence.plugins.base import RetryLater
from convergence.ports.views import Claim, NewEvent, Orphan

log = logging.getLogger(__name__)

REMOVED, ADOPTED, WAITING, FAILED = (
    "orphans removed", "orphans adopted", "orphans waiting", "orphans not removed yet")


def reap(engine: Engine, limit: int) -> Counter[str]:
    """Remove (or forget) up to ``limit`` orphans; counts by outcome."""
    with engine.store.begin() as tx:
        found = tx.pending_orphans(limit)
    counts: Counter[str] = Counter()
    holder = f"{engine.worker_id}/orphans"
    for orphan in found:
        counts[_reap(engine, orphan, holder)] += 1
    return counts


def _reap(engine: Engine, orphan: Orphan, holder: str) -> str:
    with engine.store.begin() as tx:
        claimed = tx.claim_orphan(orphan, holder, tx.now + engine.lease_seconds)
        stack = tx.stacks_by_id({orphan.stack_id}).get(orphan.stack_id)
    if claimed is None:
        return WAITING
    if claimed.adopted:
        return ADOPTED
    leases = engine.leases
    with leases.holding(holder):
        if claimed.held:
            leases.add(holder, [orphan.record_id])
        try:
            known = engine.discard(orphan, stack, lambda: leases.good(holder))
        except Exception as exc:
            _give_back(engine, orphan, claimed, holder)
            level = logging.INFO if isinstance(exc, RetryLater) else logging.WARNING
            log.log(level, "orphan %s of record %d (%s) not removed yet: %s",
                    orphan.physical_id, orphan.record_id, orphan.name, exc)
            return FAILED
    if not known:
        _give_back(engine, orphan, claimed, holder)
        log.warning("orphan %s of record %d: no plugin for %s here", orphan.physical_id,
                    orphan.record_id, orphan.type)
        return FAILED
    with engine.store.begin() as tx:
        tx.orphan_removed(orphan, claimed, holder)
        stack = tx.stacks_by_id({orphan.stack_id}).get(orphan.stack_id)
        if stack is not None:
            tx.add_events(stack.id, stack.traversal_id, stack.generation, [NewEvent(
                orphan.name, orphan.physical_id, orphan.type, "DELETE", "COMPLETE",
                f"{orphan.physical_id} removed: made by a step after its lease was taken "
                f"over, and recorded by nobody")])
    log.info("orphan %s of record %d (%s) removed", orphan.physical_id, orphan.record_id,
             orphan.name)
    return REMOVED


def _give_back(engine: Engine, orphan: Orphan, claimed: Claim, holder: str) -> None:
    with engine.store.begin() as tx:
        tx.give_back_orphan(orphan, claimed, holder)
