"""Resource records and their leases: what each resource is, who works on it, fenced writes.

Callers: composed into ``transactions.Tx``; reached through the ports' ``Records`` protocol by
the engine (planning reads outlines; a batch claims its records, then writes what its steps
learned), the lease keeper (``engine/leases.py`` renews) and the services (show, mark
unhealthy, abandon).

A record is leased to one owner at a time (``claim_records``): the claim bumps its fencing
token. Every write of a step carries the token it got (``apply``, ``apply_many``) and is
refused when a later claim bumped it: a worker that lost its lease cannot overwrite the work
of the one that took it over.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    JSON,
    BindParameter,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql.base import PGDialect

from convergence.ports.views import RecordChange, RecordOutline, RecordValues, RecordView
from convergence.store import dialect
from convergence.store.lean import Lean
from convergence.store.rows import T_RES, TxPart, chunks, keyed, record_view
from convergence.store.sealing import PREFIX, SEALED, Sealer

# The statements of every batch, built once: building one costs more than running it (a
# look-up by key takes ~80 us to run and ~300 us to build) and a batch runs a dozen.
_IDS: BindParameter[Any] = bindparam("ids", expanding=True)
_TOKENS_OF = select(T_RES.c.id, T_RES.c.fencing_token).where(T_RES.c.id.in_(_IDS))
_TOKENS = Lean(_TOKENS_OF)
# FOR UPDATE, in id order (PostgreSQL; SQLite renders no lock: one writer at a time).
_LOCK_TOKENS = Lean(_TOKENS_OF.order_by(T_RES.c.id).with_for_update())
_NEWEST = (keyed(T_RES.c.stack_id, bindparam("stack")),
           T_RES.c.name.in_(bindparam("names", expanding=True)), T_RES.c.replaced_by.is_(None))
_HEADS = Lean(select(T_RES).where(*_NEWEST).order_by(T_RES.c.id))
_HEAD_VALUES = select(T_RES.c.name, T_RES.c.action, T_RES.c.physical_id, T_RES.c.reference_id,
                      T_RES.c.attributes).where(*_NEWEST).order_by(T_RES.c.id)
_CLAIM = Lean(update(T_RES).where(
    T_RES.c.id.in_(_IDS),
    # Nobody's (a poll watch is nobody's), or already ours. An expired lease of someone else
    # is the sweeper's to take over, which says so in an event.
    or_(T_RES.c.lease_owner.is_(None), T_RES.c.lease_owner == bindparam("owner")),
).values(lease_owner=bindparam("owner"), lease_expires=bindparam("until"),
         fencing_token=T_RES.c.fencing_token + 1).returning(*T_RES.c))
_RENEW = update(T_RES).where(
    T_RES.c.id.in_(_IDS), T_RES.c.lease_owner == bindparam("owner"),
).values(lease_expires=bindparam("until")).returning(T_RES.c.id)
_DELETE = Lean(delete(T_RES).where(T_RES.c.id.in_(_IDS)))
# A step that changed nothing (an update's cleanup of a record it keeps) lets its lease go.
_LET_GO = Lean(update(T_RES).where(T_RES.c.id.in_(_IDS))
               .values(lease_owner=None, lease_expires=None))
_FENCE = T_RES.c.fencing_token == bindparam("_token")
_DELETE_FENCED = Lean(delete(T_RES).where(T_RES.c.id == bindparam("_id"), _FENCE))
# apply_many's updates, one per shape of change (the columns it sets, whether it keeps a
# watch, and whether the statement checks the token itself): few shapes recur. Run through
# the driver's cursor (:mod:`convergence.store.lean`).
_APPLIED: dict[tuple[tuple[str, ...], bool, bool], Lean] = {}


def _applying(keys: tuple[str, ...], watched: bool, fenced: bool = False) -> Lean:
    stmt = _APPLIED.get((keys, watched, fenced))
    if stmt is None:
        values: dict[str, Any] = {k: bindparam(k) for k in keys}
        values.update(lease_owner=None,
                      lease_expires=bindparam("_watch") if watched else None)
        if keys:  # only releasing the lease is not a change of the resource
            values["updated_at"] = bindparam("_now")
        where = [T_RES.c.id == bindparam("_id"), *([_FENCE] if fenced else [])]
        stmt = _APPLIED[keys, watched, fenced] = Lean(
            update(T_RES).where(*where).values(values))
    return stmt


# PostgreSQL: apply_many's updates of one shape as one statement whose rows come in one JSON
# parameter (see ``_applying_rows``), by shape.
_APPLIED_ROWS: dict[tuple[tuple[str, ...], bool], Lean] = {}


def _applying_rows(keys: tuple[str, ...], watched: bool) -> Lean:
    """One UPDATE for every change of a shape, on PostgreSQL: the rows are sent as one JSON
    array and read back as a table (``json_to_recordset``). As an ``executemany`` each row
    was an UPDATE of its own, formatted by the driver in Python and parsed and planned by the
    server one by one: a fifth of a worker's time and most of the server's for a wide stack.
    JSON columns travel as their JSON text (None as JSON ``null``, as SQLAlchemy writes it),
    the others as the JSON value of their own type."""
    stmt = _APPLIED_ROWS.get((keys, watched))
    if stmt is None:
        pg = PGDialect()  # type: ignore[no-untyped-call]
        types = {k: "text" if isinstance(T_RES.c[k].type, JSON)
                 else T_RES.c[k].type.compile(dialect=pg) for k in keys}
        sets = [f'"{k}" = x."{k}"::json' if types[k] == "text" else f'"{k}" = x."{k}"'
                for k in keys]
        sets.append("lease_owner = NULL")
        sets.append("lease_expires = x._watch" if watched else "lease_expires = NULL")
        if keys:
            sets.append("updated_at = x._now")
        columns = ", ".join(["_id bigint", "_now double precision", "_watch double precision",
                             *(f'"{k}" {t}' for k, t in types.items())])
        stmt = _APPLIED_ROWS[keys, watched] = Lean(text(
            f"UPDATE resources SET {', '.join(sets)} "
            f"FROM json_to_recordset(CAST(:rows AS json)) AS x({columns}) "
            "WHERE resources.id = x._id"))
    return stmt


# PostgreSQL: new records as one statement a piece, their rows as one JSON parameter. A
# multi-row VALUES of fourteen bound parameters a record, built and bound by SQLAlchemy in
# Python, was two fifths of a worker's time planning a wide stack of 100,000.
_INSERTED_AT_ONCE = 5000
_INSERT_ROWS = text(
    "INSERT INTO resources (stack_id, name, type, action, status, status_reason, generation, "
    "requires, properties, attributes, fencing_token, deletion_policy, created_at, "
    "updated_at) "
    "SELECT :stack, x.n, x.t, 'INIT', 'COMPLETE', '', 0, '[]', '{}', '{}', 0, x.p, :now, :now "
    "FROM ROWS FROM (json_to_recordset(CAST(:rows AS json)) AS (n text, t text, p text)) "
    "WITH ORDINALITY AS x(n, t, p, i) ORDER BY x.i "
    "RETURNING id, name")


class RecordQueries(TxPart):
    # reading ------------------------------------------------------------------------------
    def records(self, stack_id: str) -> list[RecordView]:
        rows = self.conn.execute(select(T_RES).where(T_RES.c.stack_id == stack_id)
                                 .order_by(T_RES.c.id))
        return [record_view(r, self.sealer) for r in rows]

    def record_outlines(self, stack_id: str) -> list[RecordOutline]:
        """What planning needs of every record of a stack, without the heavy columns."""
        rows = self.conn.execute(select(
            T_RES.c.id, T_RES.c.name, T_RES.c.requires, T_RES.c.replaced_by,
            T_RES.c.template_id, T_RES.c.action, T_RES.c.status,
        ).where(T_RES.c.stack_id == stack_id).order_by(T_RES.c.id))
        return [RecordOutline(r.id, r.name, tuple(r.requires or ()), r.replaced_by,
                              r.template_id, r.action, r.status) for r in rows]

    def records_by_id(self, ids: Iterable[int]) -> dict[int, RecordView]:
        out: dict[int, RecordView] = {}
        for chunk in chunks(sorted(set(ids))):
            for r in self.conn.execute(select(T_RES).where(T_RES.c.id.in_(chunk))):
                out[r.id] = record_view(r, self.sealer)
        return out

    def tokens(self, ids: Iterable[int]) -> dict[int, int]:
        out: dict[int, int] = {}
        for chunk in chunks(sorted(set(ids))):
            out.update({r.id: r.fencing_token
                        for r in _TOKENS.rows(self.conn, {"ids": chunk})})
        return out

    def heads(self, stack_id: str, names: Iterable[str]) -> dict[str, RecordView]:
        """The newest unreplaced record of each name."""
        out: dict[str, RecordView] = {}
        for chunk in chunks(sorted(set(names))):
            for r in _HEADS.rows(self.conn, {"stack": stack_id, "names": chunk}):
                out[r.name] = record_view(r, self.sealer)
        return out

    def head_values(self, stack_id: str, names: Iterable[str]) -> dict[str, RecordValues]:
        """What a template reads of the newest unreplaced record of each name: no properties,
        operation or lease (a stack's outputs may name every member of a big group)."""
        out: dict[str, RecordValues] = {}
        for chunk in chunks(sorted(set(names))):
            for r in self.conn.execute(_HEAD_VALUES, {"stack": stack_id, "names": chunk}):
                attributes, reference = r.attributes or {}, r.reference_id
                if SEALED in attributes:
                    attributes = self.sealer.open_members(attributes)
                if reference is not None and reference.startswith(PREFIX):
                    reference = self.sealer.open(reference)
                out[r.name] = RecordValues(r.name, r.action, r.physical_id, reference,
                                           attributes)
        return out

    # making -------------------------------------------------------------------------------
    def insert_records(self, stack_id: str, items: Sequence[tuple[str, str]],
                       policies: Mapping[str, str | None] | None = None) -> dict[str, int]:
        """New (never created) records for resources; returns their ids by name.
        ``policies``: each one's deletion policy, from its definition (a record carries it
        from the start, so that a crash before its first result cannot lose a Retain)."""
        if not items:
            return {}
        chosen = policies or {}
        if dialect.is_postgres(self.conn):
            return self._insert_records_at_once(stack_id, items, chosen)
        rows: list[dict[str, Any]] = [
            {"stack_id": stack_id, "name": name, "type": rtype, "action": "INIT",
             "status": "COMPLETE", "status_reason": "", "generation": 0, "requires": [],
             "properties": {}, "attributes": {}, "fencing_token": 0,
             "deletion_policy": chosen.get(name), "created_at": self.now, "updated_at": self.now}
            for name, rtype in items]
        ids: dict[str, int] = {}
        for chunk in chunks(rows):
            result = self.conn.execute(insert(T_RES).returning(T_RES.c.id, T_RES.c.name), chunk)
            for rid, name in result:
                ids[name] = rid
        return ids

    def _insert_records_at_once(self, stack_id: str, items: Sequence[tuple[str, str]],
                                chosen: Mapping[str, str | None]) -> dict[str, int]:
        """PostgreSQL: the records as one INSERT a piece, their names, types and policies
        sent as one JSON parameter (``_INSERT_ROWS``), ids handed out in the items' order."""
        ids: dict[str, int] = {}
        for piece in chunks(items, _INSERTED_AT_ONCE):
            rows = json.dumps([{"n": name, "t": rtype, "p": chosen.get(name)}
                               for name, rtype in piece])
            result = self.conn.execute(_INSERT_ROWS, {"stack": stack_id, "now": self.now,
                                                      "rows": rows})
            for rid, name in result:
                ids[name] = rid
        return ids

    def insert_replacement(self, old: RecordView, token: int, rtype: str,
                           policy: str | None = None) -> int | None:
        """A new version of ``old`` (fenced on old's token), with the deletion ``policy`` of
        the definition it is made for; None if the fence refused."""
        rid = self.conn.execute(insert(T_RES).values(
            stack_id=old.stack_id, name=old.name, type=rtype, action="INIT", status="COMPLETE",
            status_reason="", generation=0, requires=[], replaces=old.id, properties={},
            attributes={}, fencing_token=0, deletion_policy=policy, created_at=self.now,
            updated_at=self.now,
        ).returning(T_RES.c.id)).scalar_one()
        result = self.conn.execute(update(T_RES).where(
            T_RES.c.id == old.id, T_RES.c.fencing_token == token,
        ).values(replaced_by=rid, updated_at=self.now))
        if result.rowcount != 1:
            self.conn.execute(delete(T_RES).where(T_RES.c.id == rid))
            return None
        return int(rid)

    def restore_records(self, pairs: Sequence[tuple[int, int | None]]) -> None:
        """Make an earlier version current again: for each (restored, superseded) pair the
        restored record is nobody's replaced version any more and the superseded one (if
        there still is one) is."""
        for restored, superseded in pairs:
            self.conn.execute(update(T_RES).where(T_RES.c.id == restored)
                              .values(replaced_by=None, updated_at=self.now))
            if superseded is not None:
                self.conn.execute(update(T_RES).where(T_RES.c.id == superseded)
                                  .values(replaced_by=restored, updated_at=self.now))

    def keep_records(self, record_ids: Sequence[int], template_id: str,
                     generation: int) -> None:
        """Records an update leaves alone (defined alike): converged to its template and
        generation as they are, with no step (so the templates records name stay few)."""
        for chunk in chunks(sorted(set(record_ids))):
            self.conn.execute(update(T_RES).where(T_RES.c.id.in_(chunk)).values(
                template_id=template_id, generation=generation))

    # leases -------------------------------------------------------------------------------
    def claim_records(self, record_ids: Sequence[int], owner: str,
                      until: float) -> dict[int, RecordView]:
        """Lease records to ``owner`` and return them as claimed (token included): one
        statement per chunk, for the records nobody else holds."""
        claimed: dict[int, RecordView] = {}
        for chunk in chunks(sorted(set(record_ids))):
            rows = _CLAIM.rows(self.conn, {"ids": chunk, "owner": owner, "until": until})
            claimed.update({r.id: record_view(r, self.sealer) for r in rows})
        return claimed

    def renew_leases(self, record_ids: Iterable[int], owner: str, until: float) -> set[int]:
        """Push the leases ``owner`` still holds on these records to ``until``; returns the
        records it still held (the others were taken over, or released meanwhile)."""
        kept: set[int] = set()
        for chunk in chunks(sorted(set(record_ids))):
            kept.update(r.id for r in self.conn.execute(
                _RENEW, {"ids": chunk, "owner": owner, "until": until}))
        return kept

    def release(self, record_ids: Iterable[int], owner: str) -> None:
        for chunk in chunks(sorted(set(record_ids))):
            self.conn.execute(update(T_RES).where(
                T_RES.c.id.in_(chunk), T_RES.c.lease_owner == owner,
            ).values(lease_owner=None, lease_expires=None))

    def lease_expiry(self, record_ids: Iterable[int]) -> float | None:
        """When the latest of these records' leases runs out (None: none is held)."""
        latest: float | None = None
        for chunk in chunks(sorted(set(record_ids))):
            value = self.conn.execute(select(func.max(T_RES.c.lease_expires)).where(
                T_RES.c.id.in_(chunk), T_RES.c.lease_owner.is_not(None))).scalar()
            if value is not None and (latest is None or value > latest):
                latest = float(value)
        return latest

    # fenced writes ------------------------------------------------------------------------
    def apply(self, change: RecordChange) -> bool:
        """Write what a step learned, fenced; releases the lease. False if fenced off."""
        return bool(self._apply_one(change))

    def apply_many(self, changes: Sequence[RecordChange]) -> set[int]:
        """Apply many fenced changes with few statements; returns the record ids applied.

        The tokens are read (and on PostgreSQL locked) first, in id order; changes whose token
        is stale are dropped; the rest are written with one executemany per shape of change,
        but for the changes that only let the lease go (an update's cleanup of every record it
        keeps): one UPDATE of them all, not a statement each. One change alone (a chain's hop)
        is one statement that checks the token itself.
        """
        if len(changes) == 1:
            return self._apply_one(changes[0])
        ids = sorted({c.record_id for c in changes})
        current: dict[int, int] = {}
        for chunk in chunks(ids):
            current.update({r.id: r.fencing_token
                            for r in _LOCK_TOKENS.rows(self.conn, {"ids": chunk})})
        valid = [c for c in changes if current.get(c.record_id) == c.token]
        deletes = sorted({c.record_id for c in valid if c.delete})
        for chunk in chunks(deletes):
            _DELETE.count(self.conn, {"ids": chunk})
        let_go = sorted({c.record_id for c in valid
                         if not c.delete and not c.values and c.watch is None})
        for chunk in chunks(let_go):
            _LET_GO.count(self.conn, {"ids": chunk})
        shapes: dict[tuple[tuple[str, ...], bool], list[dict[str, Any]]] = {}
        now = self.now
        for c in valid:
            if c.delete or (not c.values and c.watch is None):
                continue
            keys = tuple(sorted(c.values))
            row = {"_id": c.record_id, "_now": now,
                   **(c.values if c.secret is None else sealed(self.sealer, c))}
            if c.watch is not None:
                row["_watch"] = now + c.watch
            shapes.setdefault((keys, c.watch is not None), []).append(row)
        rows_at_once = dialect.is_postgres(self.conn)
        for (keys, watched), rows in shapes.items():
            if rows_at_once and len(rows) > 1:
                json_keys = [k for k in keys if isinstance(T_RES.c[k].type, JSON)]
                for row in rows:
                    for k in json_keys:
                        row[k] = json.dumps(row[k])
                for chunk in chunks(rows):
                    _applying_rows(keys, watched).count(self.conn, {"rows": json.dumps(chunk)})
            else:
                _applying(keys, watched).many(self.conn, rows)
        return {c.record_id for c in valid}

    def _apply_one(self, c: RecordChange) -> set[int]:
        """One change, written where its token is still the record's (one statement)."""
        row: dict[str, Any] = {"_id": c.record_id, "_token": c.token}
        if c.delete:
            done = _DELETE_FENCED.count(self.conn, row)
        else:
            row.update(c.values if c.secret is None else sealed(self.sealer, c), _now=self.now)
            if c.watch is not None:
                row["_watch"] = self.now + c.watch
            done = _applying(tuple(sorted(c.values)), c.watch is not None, fenced=True) \
                .count(self.conn, row)
        return {c.record_id} if done == 1 else set()

    # abandoning and forgetting (failures, mark-unhealthy, abandon) --------------------------
    def fail_pending_operations(self, stack_id: str, reason: str) -> int:
        """Records waiting on an operation nobody holds: FAILED, operation abandoned."""
        result = self.conn.execute(update(T_RES).where(
            T_RES.c.stack_id == stack_id, T_RES.c.status == "IN_PROGRESS",
            or_(T_RES.c.lease_owner.is_(None), T_RES.c.lease_expires < self.now),
        ).values(status="FAILED", status_reason=reason, operation=None, updated_at=self.now))
        return int(result.rowcount)

    def fail_operations(self, record_ids: Sequence[int], reason: str) -> list[RecordView]:
        """These records, where still waiting on an operation nobody holds: FAILED, their
        operation abandoned (nobody is left to poll it). Returns the records so changed."""
        failed: list[RecordView] = []
        for chunk in chunks(sorted(set(record_ids))):
            rows = self.conn.execute(update(T_RES).where(
                T_RES.c.id.in_(chunk), T_RES.c.status == "IN_PROGRESS",
                or_(T_RES.c.lease_owner.is_(None), T_RES.c.lease_expires < self.now),
            ).values(status="FAILED", status_reason=reason, operation=None,
                     lease_owner=None, lease_expires=None, updated_at=self.now
                     ).returning(*T_RES.c))
            failed.extend(record_view(r, self.sealer) for r in rows)
        return failed

    def set_record_state(self, record_id: int, action: str, status: str,
                         reason: str) -> bool:
        """Set a record's state unless a step holds its lease; bumps its fencing token, so a
        step that claimed it earlier cannot overwrite the change. False if it is held."""
        result = self.conn.execute(update(T_RES).where(
            T_RES.c.id == record_id,
            or_(T_RES.c.lease_owner.is_(None), T_RES.c.lease_expires < self.now),
        ).values(action=action, status=status, status_reason=reason, lease_owner=None,
                 lease_expires=None, fencing_token=T_RES.c.fencing_token + 1,
                 updated_at=self.now))
        return result.rowcount == 1

    def clear_hook(self, record_id: int, hook: str) -> str:
        """Mark the hook a record's step is parked on as cleared: ``"cleared"``; or why not:
        ``"not pending"`` (no such hook waits there), ``"busy"`` (a step holds the record).
        The fencing token is bumped: a step that claimed the record before cannot write the
        hook back as pending."""
        row = self.conn.execute(select(T_RES.c.operation, T_RES.c.fencing_token).where(
            T_RES.c.id == record_id)).first()
        operation = dict(row.operation or {}) if row is not None else {}
        if row is None or operation.get("hook") != hook or operation.get("cleared"):
            return "not pending"
        result = self.conn.execute(update(T_RES).where(
            T_RES.c.id == record_id, T_RES.c.fencing_token == row.fencing_token,
            or_(T_RES.c.lease_owner.is_(None), T_RES.c.lease_expires < self.now),
        ).values(operation={**operation, "cleared": True}, lease_owner=None,
                 lease_expires=None, fencing_token=T_RES.c.fencing_token + 1,
                 updated_at=self.now))
        return "cleared" if result.rowcount == 1 else "busy"

    def forget_records(self, stack_id: str) -> int:
        """Remove every resource record of a stack (the cloud is not touched)."""
        return int(self.conn.execute(delete(T_RES).where(T_RES.c.stack_id == stack_id))
                   .rowcount)


def sealed(sealer: Sealer, change: RecordChange) -> dict[str, Any]:
    """A change's values with those it marks secret sealed (``store/sealing.py``): members
    of its properties (and of its operation's), of its attributes, and its reference."""
    secret, values = change.secret, dict(change.values)
    assert secret is not None
    names = None if secret.all_properties else secret.properties
    if names is None or names:
        if isinstance(values.get("properties"), Mapping):
            values["properties"] = sealer.seal_members(values["properties"], names)
        operation = values.get("operation")
        if isinstance(operation, Mapping) and isinstance(operation.get("properties"), Mapping):
            values["operation"] = {**operation, "properties": sealer.seal_members(
                operation["properties"], names)}
    if (secret.all_attributes or secret.attributes) and \
            isinstance(values.get("attributes"), Mapping):
        values["attributes"] = sealer.seal_members(
            values["attributes"], None if secret.all_attributes else secret.attributes)
    if secret.reference and isinstance(values.get("reference_id"), str):
        values["reference_id"] = sealer.seal(values["reference_id"])
    return values
