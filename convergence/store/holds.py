"""Holds on stacks: which process is driving a stack's work in embedded mode, until when.

Callers: :mod:`convergence.holds` (the process that runs a stack's traversal on its own
in-process dispatcher takes and renews the hold) and ``convergence.services`` (a command that
finds the stack in progress asks whether anyone live still holds it before resuming it).

A hold is a row of the ``sweeps`` table, the table of jobs one process at a time runs, named
``stack:<stack id>``: a holder and a deadline. A holder that stops lets go (the row is
deleted); one that dies stops renewing, and its hold is nobody's once the deadline passed.
"""

from __future__ import annotations

from sqlalchemy import case, delete, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from convergence.store.repository import Tx
from convergence.store.sweeps import T_SWEEP

PREFIX = "stack:"


def _name(stack_id: str) -> str:
    return PREFIX + stack_id


def hold(tx: Tx, stack_id: str, holder: str, until: float) -> bool:
    """Take or renew ``holder``'s hold on the stack until ``until``; False when another
    holder's hold has not run out."""
    name = _name(stack_id)
    free = or_(T_SWEEP.c.held_until.is_(None), T_SWEEP.c.held_until < tx.now,
               T_SWEEP.c.holder == holder)
    taken = tx.conn.execute(update(T_SWEEP).where(T_SWEEP.c.name == name, free).values(
        started_at=case((T_SWEEP.c.holder == holder, T_SWEEP.c.started_at), else_=tx.now),
        holder=holder, held_until=until))
    if taken.rowcount == 1:
        return True
    dialect = postgresql if tx.conn.dialect.name == "postgresql" else sqlite
    inserted = tx.conn.execute(dialect.insert(T_SWEEP).values(
        name=name, holder=holder, held_until=until, started_at=tx.now, runs=0,
    ).on_conflict_do_nothing(index_elements=["name"]))
    return inserted.rowcount == 1


def holder_of(tx: Tx, stack_id: str) -> str | None:
    """Who holds the stack now (None: nobody, or a holder whose hold ran out)."""
    row = tx.conn.execute(select(T_SWEEP.c.holder).where(
        T_SWEEP.c.name == _name(stack_id), T_SWEEP.c.held_until >= tx.now)).first()
    return None if row is None else row.holder


def release(tx: Tx, stack_id: str, holder: str) -> bool:
    """Let go of ``holder``'s hold on the stack (nothing if someone else holds it now)."""
    done = tx.conn.execute(delete(T_SWEEP).where(T_SWEEP.c.name == _name(stack_id),
                                                 T_SWEEP.c.holder == holder))
    return bool(done.rowcount)
