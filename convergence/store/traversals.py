"""Traversals: one walk of a stack's plan, and the counter of the nodes it has left.

Callers: composed into ``transactions.Tx``; reached through the ports' ``Traversals`` protocol
by the engine (planning, counting finished nodes off, ending) and the services (a new
traversal supersedes the running one). A traversal is PLANNING, then RUNNING, then COMPLETE,
FAILED or SUPERSEDED; each change is a compare-and-swap on its state.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import bindparam, func, insert, select, update

from convergence.ports.views import (
    PARKED,
    PLANNING,
    RUNNING,
    SKIPPED,
    SUPERSEDED,
    StackView,
    TraversalView,
)
from convergence.store import dialect
from convergence.store.lean import Lean
from convergence.store.rows import (
    STACK_WITHOUT_OUTPUTS,
    T_NODE,
    T_STACK,
    T_TRAV,
    Row,
    TxPart,
    keyed,
    stack_view,
    traversal_view,
)

# What every batch reads first, and the counter it takes its nodes off: built once (building
# a statement costs more than running it). The stack's outputs are left out (read as null):
# no batch reads them, and a big group's nested stack keeps a list of its members there that
# every batch of its update would otherwise decode, a cost growing with the group.
_TRAV_AND_STACK = Lean(select(T_TRAV, *STACK_WITHOUT_OUTPUTS)
                       .join(T_STACK, T_STACK.c.id == T_TRAV.c.stack_id)
                       .where(T_TRAV.c.id == bindparam("trav")))
_COUNTED = {
    "nodes_remaining": T_TRAV.c.nodes_remaining - bindparam("finished"),
    "nodes_failed": T_TRAV.c.nodes_failed + bindparam("failed"),
    "progressed_at": bindparam("_now"),
}
_COUNT_DONE = Lean(update(T_TRAV).where(T_TRAV.c.id == bindparam("trav")).values(_COUNTED)
                   .returning(T_TRAV.c.nodes_remaining))
_COUNT_FAILED = Lean(update(T_TRAV).where(T_TRAV.c.id == bindparam("trav")).values({
    **_COUNTED, "failure": func.coalesce(func.nullif(T_TRAV.c.failure, ""), bindparam("why")),
}).returning(T_TRAV.c.nodes_remaining))


class TraversalQueries(TxPart):
    def insert_traversal(self, stack_id: str, generation: int, action: str,
                         template_id: str | None, deadline: float | None,
                         observe: bool = False) -> str:
        tid = str(uuid.uuid4())
        self.conn.execute(insert(T_TRAV).values(
            id=tid, stack_id=stack_id, generation=generation, action=action,
            template_id=template_id, state=PLANNING, nodes_total=0, nodes_remaining=0,
            nodes_failed=0, failure="", deadline=deadline, created_at=self.now,
            observe=observe))
        return tid

    def traversal_and_stack(self, traversal_id: str
                            ) -> tuple[TraversalView | None, StackView | None]:
        """Both in one query: what every batch starts by reading. The stack's ``outputs``
        are not read (empty in the view)."""
        rows = _TRAV_AND_STACK.rows(self.conn, {"trav": traversal_id})
        if not rows:
            return None, None
        row = rows[0]
        n = len(T_TRAV.c)
        trav = traversal_view(Row(T_TRAV, row[:n]))
        return trav, stack_view(Row(T_STACK, row[n:]), self.sealer)

    def traversal(self, traversal_id: str, *, lock: bool = False) -> TraversalView | None:
        query = select(T_TRAV).where(T_TRAV.c.id == traversal_id)
        if lock:
            query = dialect.lock_no_key(self.conn, query)
        row = self.conn.execute(query).first()
        return traversal_view(row) if row is not None else None

    def supersede_traversals(self, stack_id: str, keep: str) -> None:
        """Stop the stack's unfinished traversals but ``keep``; their parked nodes are done
        waiting (skipped: nothing stays parked once its traversal is gone)."""
        running = [r.id for r in self.conn.execute(select(T_TRAV.c.id).where(
            T_TRAV.c.stack_id == stack_id, T_TRAV.c.id != keep,
            T_TRAV.c.state.in_((PLANNING, RUNNING))))]
        for traversal_id in running:  # nodes before the traversal: the order of every lock
            self._unpark(traversal_id)
        self.conn.execute(update(T_TRAV).where(
            T_TRAV.c.stack_id == stack_id, T_TRAV.c.id != keep,
            T_TRAV.c.state.in_((PLANNING, RUNNING)),
        ).values(state=SUPERSEDED, finished_at=self.now))

    def start_running(self, traversal_id: str, total: int) -> bool:
        result = self.conn.execute(update(T_TRAV).where(
            T_TRAV.c.id == traversal_id, T_TRAV.c.state == PLANNING,
        ).values(state=RUNNING, nodes_total=total, nodes_remaining=total,
                 progressed_at=self.now))
        return result.rowcount == 1

    def count_added(self, traversal_id: str, added: int) -> None:
        """Nodes added to a running traversal's plan (cleanups of what it replaced)."""
        self.conn.execute(update(T_TRAV).where(T_TRAV.c.id == traversal_id).values(
            nodes_total=T_TRAV.c.nodes_total + added,
            nodes_remaining=T_TRAV.c.nodes_remaining + added))

    def count_done(self, traversal_id: str, done: int, failed: int, failure: str) -> int:
        """Take finished nodes off the traversal's counter; returns what remains."""
        params: dict[str, Any] = {"trav": traversal_id, "finished": done + failed,
                                  "failed": failed, "_now": self.now}
        if failure:
            params["why"] = failure
        (row,) = (_COUNT_FAILED if failure else _COUNT_DONE).rows(self.conn, params)
        return int(row.nodes_remaining)

    def end_traversal(self, traversal_id: str, state: str,
                      from_state: str | None = RUNNING) -> bool:
        """End a traversal (only from ``from_state``; None: from any state); its parked
        nodes are done waiting."""
        self._unpark(traversal_id)
        where = [T_TRAV.c.id == traversal_id]
        if from_state is not None:
            where.append(T_TRAV.c.state == from_state)
        result = self.conn.execute(update(T_TRAV).where(*where)
                                   .values(state=state, finished_at=self.now))
        return result.rowcount == 1

    def _unpark(self, traversal_id: str) -> None:
        self.conn.execute(update(T_NODE).where(
            keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.state == PARKED,
        ).values(state=SKIPPED, updated_at=self.now))

    def traversal_counts(self) -> dict[tuple[str, str], int]:
        """Traversals by (action, state) since the database was created (metrics)."""
        query = select(T_TRAV.c.action, T_TRAV.c.state, func.count()) \
            .group_by(T_TRAV.c.action, T_TRAV.c.state)
        return {(str(a), str(s)): int(n) for a, s, n in self.conn.execute(query)}
