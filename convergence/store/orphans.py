"""The bookkeeping of orphans: what a step made after its lease was taken over.

A worker that wakes up past its lease (frozen, paused, too slow) may already be inside its
call to the cloud: no check on its side can stop a create that was on its way. Its result is
then refused (fenced off), and what it made is named by no record. The engine notes it here
(``note_orphans``), in the transaction that refuses the result; the sweeper
(:mod:`convergence.engine.orphans`) takes the record's lease (``claim_orphan``), has the
resource's plugin remove it unless the record names it by then (its new holder adopted it),
and ends with ``orphan_removed`` or ``give_back_orphan``.

Callers: composed into ``transactions.Tx``; reached through the ports' ``Orphans`` protocol.
Each method does one thing in the transaction it is called in.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, insert, select, update

from convergence.ports.views import Claim, NewOrphan, Orphan
from convergence.store.rows import T_ORPHAN, T_RES, TxPart


class OrphanQueries(TxPart):
    def note_orphans(self, orphans: Sequence[NewOrphan]) -> None:
        if orphans:
            self.conn.execute(insert(T_ORPHAN), [
                {"record_id": o.record_id, "stack_id": o.stack_id, "name": o.name,
                 "type": o.type, "physical_id": o.physical_id, "noted_at": self.now,
                 "attempts": 0}
                for o in orphans])

    def pending_orphans(self, limit: int) -> list[Orphan]:
        """The orphans not removed yet, oldest first."""
        rows = self.conn.execute(select(T_ORPHAN).order_by(T_ORPHAN.c.id).limit(limit))
        return [Orphan(r.id, r.record_id, r.stack_id, r.name, r.type, r.physical_id,
                       r.attempts) for r in rows]

    def claim_orphan(self, orphan: Orphan, holder: str, until: float) -> Claim | None:
        """Lease the orphan's record to ``holder`` (None: someone holds it; try later).

        A record that names the orphan adopted it: the orphan is forgotten. A record gone (its
        stack or the resource deleted since) leaves nobody to act on the owner key but us.
        """
        row = self.conn.execute(select(T_RES.c.physical_id, T_RES.c.lease_owner,
                                       T_RES.c.lease_expires, T_RES.c.action, T_RES.c.status)
                                .where(T_RES.c.id == orphan.record_id)).first()
        if row is None:
            return Claim()
        if row.physical_id == orphan.physical_id:
            self.conn.execute(delete(T_ORPHAN).where(T_ORPHAN.c.id == orphan.id))
            return Claim(adopted=True)
        if row.lease_owner is not None:
            return None
        # Both checks again, in the statement: a holder may have come and gone since the read.
        # A poll watch is nobody's, and is put back when the lease ends. The fencing token is
        # left as it is: the sweeper writes nothing to the record, and a poll on its way (which
        # names the token it expects) must still find it, once the lease is free again.
        taken = self.conn.execute(update(T_RES).where(
            T_RES.c.id == orphan.record_id, T_RES.c.lease_owner.is_(None),
            T_RES.c.physical_id.is_distinct_from(orphan.physical_id),
        ).values(lease_owner=holder, lease_expires=until))
        if taken.rowcount != 1:
            return None
        return Claim(held=True, watch=row.lease_expires, action=row.action, status=row.status)

    def orphan_removed(self, orphan: Orphan, claimed: Claim, holder: str) -> None:
        """The orphan is removed: forget it, and let go of its record."""
        self.conn.execute(delete(T_ORPHAN).where(T_ORPHAN.c.id == orphan.id))
        self._let_go_of_orphan(orphan, claimed, holder)

    def give_back_orphan(self, orphan: Orphan, claimed: Claim, holder: str) -> None:
        """The orphan could not be removed this time: let go of its record; try again later."""
        self.conn.execute(update(T_ORPHAN).where(T_ORPHAN.c.id == orphan.id)
                          .values(attempts=T_ORPHAN.c.attempts + 1))
        self._let_go_of_orphan(orphan, claimed, holder)

    def _let_go_of_orphan(self, orphan: Orphan, claimed: Claim, holder: str) -> None:
        if claimed.held:
            self.conn.execute(update(T_RES).where(
                T_RES.c.id == orphan.record_id, T_RES.c.lease_owner == holder,
            ).values(lease_owner=None, lease_expires=claimed.watch))

    def count_orphans(self) -> int:
        return int(self.conn.execute(select(func.count()).select_from(T_ORPHAN)).scalar_one())
