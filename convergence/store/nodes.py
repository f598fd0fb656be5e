"""Nodes: a traversal's plan as rows, each with the count of predecessors it still waits for.

Callers: composed into ``transactions.Tx``; reached through the ports' ``Nodes`` protocol by
the engine: a plan is written once (``insert_nodes``), then each batch marks its nodes
finished and releases their successors (``finish_nodes``, ``release_successors``), one
statement per chunk of nodes, which keeps a traversal linear in its resources.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import and_, bindparam, case, func, select, update

from convergence.ports.store import NewNode
from convergence.ports.views import DONE, NODE_STATES, PARKED, READY, SKIPPED, WAITING, NodeView
from convergence.store import dialect
from convergence.store.lean import Lean
from convergence.store.rows import T_NODE, TxPart, chunks, keyed, node_state, node_view

_COLUMNS = ("traversal_id", "seq", "record_id", "name", "phase", "pending", "state",
            "successors", "updated_at")

# The statements of every batch, built once (building one costs more than running it).
_TRAV = keyed(T_NODE.c.traversal_id, bindparam("trav"))
_SEQS = T_NODE.c.seq.in_(bindparam("seqs", expanding=True))
_NODES = Lean(select(T_NODE).where(_TRAV, _SEQS))
_FINISH = Lean(update(T_NODE).where(
    _TRAV, _SEQS, node_state().in_((WAITING, READY, PARKED)),
).values(state=bindparam("_state"), updated_at=bindparam("_now")).returning(*T_NODE.c))
# Rows locked in seq order before their counters go down (PostgreSQL only).
_LOCK_SEQS = Lean(select(T_NODE.c.seq).where(_TRAV, _SEQS).order_by(T_NODE.c.seq)
                  .with_for_update())
_LEFT = T_NODE.c.pending - bindparam("amount")
_RELEASE = Lean(update(T_NODE).where(_TRAV, _SEQS).values(
    pending=_LEFT,
    state=case((and_(_LEFT <= 0, T_NODE.c.state == WAITING), READY), else_=T_NODE.c.state),
    updated_at=bindparam("_now"),
).returning(*T_NODE.c))


class NodeQueries(TxPart):
    def insert_nodes(self, traversal_id: str, nodes: Sequence[NewNode]) -> None:
        now = self.now
        stamp = repr(now)

        def row(n: NewNode) -> dict[str, Any]:
            return {"traversal_id": traversal_id, "seq": n.seq, "record_id": n.record_id,
                    "name": n.name, "phase": n.phase, "pending": n.pending,
                    "state": READY if n.pending == 0 else WAITING,
                    "successors": list(n.successors), "updated_at": now}

        def line(n: NewNode) -> str:
            # Written field by field, no per-value dispatch: a 10,000-resource plan is 20,000
            # lines, and a generic formatter cost a third of the plan's transaction.
            return "\t".join((
                traversal_id, str(n.seq), "\\N" if n.record_id is None else str(n.record_id),
                dialect.copy_text(n.name), n.phase, str(n.pending),
                READY if n.pending == 0 else WAITING,
                json.dumps(list(n.successors), separators=(",", ":")), stamp))

        dialect.bulk_insert(self.conn, T_NODE, nodes, _COLUMNS, row=row, line=line)

    def nodes(self, traversal_id: str, seqs: Iterable[int]) -> list[NodeView]:
        out: list[NodeView] = []
        for chunk in chunks(sorted(set(seqs))):
            rows = _NODES.rows(self.conn, {"trav": traversal_id, "seqs": chunk})
            out.extend(node_view(r) for r in rows)
        return out

    def ready_nodes(self, traversal_id: str) -> list[int]:
        rows = self.conn.execute(select(T_NODE.c.seq).where(
            keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.state == READY))
        return [r.seq for r in rows]

    def current_nodes_of(self, traversal_id: str, record_ids: Iterable[int]) -> list[int]:
        """The ready nodes of a traversal that work on these records (handover)."""
        out: list[int] = []
        for chunk in chunks(sorted(set(record_ids))):
            rows = self.conn.execute(select(T_NODE.c.seq).where(
                keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.record_id.in_(chunk),
                node_state() == READY))
            out.extend(r.seq for r in rows)
        return out

    def converged_in_place(self, traversal_id: str, record_ids: Iterable[int]) -> set[int]:
        """Of these records, those a DONE converge node of the traversal works on: converged
        and kept (a replaced record's converge node moved to its new version)."""
        out: set[int] = set()
        for chunk in chunks(sorted(set(record_ids))):
            rows = self.conn.execute(select(T_NODE.c.record_id).where(
                keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.record_id.in_(chunk),
                T_NODE.c.phase == "converge", node_state() == DONE))
            out.update(r.record_id for r in rows)
        return out

    def node_states(self, traversal_id: str) -> dict[str, int]:
        # Each state's nodes by ``ix_nodes_state``: no index begins with the traversal.
        rows = self.conn.execute(select(T_NODE.c.state, func.count()).where(
            T_NODE.c.state.in_(NODE_STATES), keyed(T_NODE.c.traversal_id, traversal_id),
        ).group_by(T_NODE.c.state))
        return {state: count for state, count in rows}

    def set_node_record(self, traversal_id: str, seq: int, record_id: int) -> None:
        self.conn.execute(update(T_NODE).where(
            keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.seq == seq,
        ).values(record_id=record_id))

    def add_cleanup_node(self, traversal_id: str, after: int, record_id: int,
                         name: str) -> bool:
        """A cleanup node for ``record_id`` (replaced while the traversal runs, so its plan has
        none) that waits for node ``after``. Its seq is ``-record_id``: planned seqs count up
        from 0 and a record is replaced once, so it is unique with no lock to take."""
        found = self.conn.execute(select(T_NODE.c.seq).where(
            keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.record_id == record_id,
            T_NODE.c.phase == "cleanup")).first()
        if found is not None:
            return False
        before = self.conn.execute(select(T_NODE.c.successors).where(
            keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.seq == after)).first()
        if before is None:
            return False
        self.conn.execute(T_NODE.insert().values(
            traversal_id=traversal_id, seq=-record_id, record_id=record_id, name=name,
            phase="cleanup", pending=1, state=WAITING, successors=[], updated_at=self.now))
        self.conn.execute(update(T_NODE).where(
            keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.seq == after,
        ).values(successors=[*(before.successors or []), -record_id]))
        return True

    def finish_nodes(self, traversal_id: str, seqs: Sequence[int],
                     state: str) -> list[NodeView]:
        """Mark nodes DONE or FAILED; returns those that were not finished already."""
        changed: list[NodeView] = []
        for chunk in chunks(sorted(set(seqs))):
            rows = _FINISH.rows(self.conn, {"trav": traversal_id, "seqs": chunk,
                                            "_state": state, "_now": self.now})
            changed.extend(node_view(r) for r in rows)
        return changed

    def park_nodes(self, traversal_id: str, seqs: Sequence[int],
                   wake_at: Mapping[int, float] | None = None) -> list[int]:
        """Park ready nodes whose step waits on an outside event (until ``wake_at[seq]`` at
        the latest, when given: then the sweeper wakes them); returns those woken while
        their step ran (the event came first): they stay ready, to be stepped again now."""
        deadlines = wake_at or {}
        by_deadline: dict[float | None, list[int]] = {}
        for seq in sorted(set(seqs)):
            by_deadline.setdefault(deadlines.get(seq), []).append(seq)
        woken: list[int] = []
        for deadline, group in by_deadline.items():
            for chunk in chunks(group):
                rows = self.conn.execute(update(T_NODE).where(
                    keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.seq.in_(chunk),
                    node_state() == READY,
                ).values(state=case((T_NODE.c.woken, READY), else_=PARKED), woken=False,
                         wake_at=deadline, updated_at=self.now,
                         ).returning(T_NODE.c.seq, T_NODE.c.state))
                woken.extend(r.seq for r in rows if r.state == READY)
        return sorted(woken)

    def wake_nodes(self, traversal_id: str, record_ids: Iterable[int]) -> list[int]:
        """The event the nodes of these records wait on came: parked ones are ready again
        (returned, to be offered); ready ones (their step running) are marked woken, so
        that the park their step records does not hold."""
        woken: list[int] = []
        for chunk in chunks(sorted(set(record_ids))):
            rows = self.conn.execute(update(T_NODE).where(
                keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.record_id.in_(chunk),
                node_state().in_((READY, PARKED)),
            ).values(woken=T_NODE.c.state == READY, state=READY, updated_at=self.now,
                     ).returning(T_NODE.c.seq, T_NODE.c.woken))
            woken.extend(r.seq for r in rows if not r.woken)
        return sorted(woken)

    def release_successors(self, traversal_id: str,
                           counts: Mapping[int, int]) -> list[NodeView]:
        """Decrement successors' counters; returns the ones that became ready, as they are
        now, in seq order (what claiming them reads: no second look).

        Rows are locked in ascending order first, so that two workers finishing nodes with
        common successors (fan-in) queue up rather than deadlock.
        """
        seqs = sorted(counts)
        if not seqs:
            return []
        by_amount: dict[int, list[int]] = {}
        for seq in seqs:
            by_amount.setdefault(counts[seq], []).append(seq)
        if dialect.locks_rows(self.conn) and len(seqs) > 1:  # one row: its update locks it
            for chunk in chunks(seqs):
                _LOCK_SEQS.rows(self.conn, {"trav": traversal_id, "seqs": chunk})
        ready: list[NodeView] = []
        for amount, group in by_amount.items():
            for chunk in chunks(group):
                rows = _RELEASE.rows(self.conn, {"trav": traversal_id, "seqs": chunk,
                                                 "amount": amount, "_now": self.now})
                # RETURNING gives the new values: became ready now, or was ready already?
                ready.extend(node_view(r) for r in rows if r.state == READY and r.pending == 0)
        return sorted(ready, key=lambda n: n.seq)

    def skip_descendants(self, traversal_id: str, seqs: Iterable[int]) -> int:
        """Nodes that can never run because something before them failed: SKIPPED."""
        frontier = set(seqs)
        skipped = 0
        seen: set[int] = set()
        while frontier:
            nodes = self.nodes(traversal_id, frontier)
            seen |= frontier
            nxt: set[int] = set()
            for n in nodes:
                # Negative seqs are cleanups of versions replaced while the traversal ran,
                # released even after a failure (the accountant does): never skipped.
                nxt.update(s for s in n.successors if s not in seen and s >= 0)
            if not nxt:
                break
            targets = [n.seq for n in self.nodes(traversal_id, nxt)
                       if n.state in (WAITING, READY)]
            if targets:
                for chunk in chunks(sorted(targets)):
                    self.conn.execute(update(T_NODE).where(
                        keyed(T_NODE.c.traversal_id, traversal_id), T_NODE.c.seq.in_(chunk),
                    ).values(state=SKIPPED, updated_at=self.now))
                skipped += len(targets)
            frontier = set(targets)
        return skipped
