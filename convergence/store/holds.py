"""Holds on stacks: which process is driving a stack's work in embedded mode, until when.

Callers: composed into ``transactions.Tx``; reached through the ports' ``Holds`` protocol by
:mod:`convergence.services.holds` (the process that runs a stack's traversal on its own in-process
dispatcher takes and renews the hold) and ``convergence.services`` (a command that finds the
stack in progress asks whether anyone live still holds it before resuming it).

A hold is a row of the ``sweeps`` table, the table of jobs one process at a time runs, named
``stack:<stack id>``: a holder and a deadline. A holder that stops lets go (the row is
deleted); one that dies stops renewing, and its hold is nobody's once the deadline passed.
"""

from __future__ import annotations

from sqlalchemy import case, delete, or_, select, update

from convergence.store import dialect
from convergence.store.rows import T_SWEEP, TxPart

PREFIX = "stack:"


def _name(stack_id: str) -> str:
    return PREFIX + stack_id


class HoldQueries(TxPart):
    def hold_stack(self, stack_id: str, holder: str, until: float) -> bool:
        """Take or renew ``holder``'s hold on the stack until ``until``; False when another
        holder's hold has not run out."""
        name = _name(stack_id)
        free = or_(T_SWEEP.c.held_until.is_(None), T_SWEEP.c.held_until < self.now,
                   T_SWEEP.c.holder == holder)
        taken = self.conn.execute(update(T_SWEEP).where(T_SWEEP.c.name == name, free).values(
            started_at=case((T_SWEEP.c.holder == holder, T_SWEEP.c.started_at),
                            else_=self.now),
            holder=holder, held_until=until))
        if taken.rowcount == 1:
            return True
        return dialect.insert_or_ignore(self.conn, T_SWEEP, "name", dict(
            name=name, holder=holder, held_until=until, started_at=self.now, runs=0))

    def stack_holder(self, stack_id: str) -> str | None:
        """Who holds the stack now (None: nobody, or a holder whose hold ran out)."""
        row = self.conn.execute(select(T_SWEEP.c.holder).where(
            T_SWEEP.c.name == _name(stack_id), T_SWEEP.c.held_until >= self.now)).first()
        return None if row is None else row.holder

    def release_stack_hold(self, stack_id: str, holder: str) -> bool:
        """Let go of ``holder``'s hold on the stack (nothing if someone else holds it now)."""
        done = self.conn.execute(delete(T_SWEEP).where(T_SWEEP.c.name == _name(stack_id),
                                                       T_SWEEP.c.holder == holder))
        return bool(done.rowcount)
