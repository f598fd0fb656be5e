"""The store: every query the engine and the services make, and nothing else.

``Store`` opens transactions (``with store.begin() as tx``); ``Tx`` offers the primitives a
step, the planner and the services compose inside one transaction. Queries are Core
statements on the model tables, batched where a step handles many nodes at once: claiming
leases, loading records, decrementing successors and writing events are one statement per
batch, not per node, which is what keeps a traversal linear and cheap per resource.

Writes to a resource record are fenced: they carry the fencing token the writer got when it
claimed the record, and are refused (not applied) when a later claim bumped the token.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from sqlalchemy import (
    Connection,
    Engine,
    Table,
    and_,
    any_,
    bindparam,
    case,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import array as pg_array
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError, IntegrityError

from convergence.errors import Conflict
from convergence.store import models as m
from convergence.store.db import READ_ONLY
from convergence.store.views import (
    COMPLETE,
    DONE,
    FAILED,
    PLANNING,
    READY,
    RUNNING,
    SKIPPED,
    SUPERSEDED,
    WAITING,
    EventView,
    NewEvent,
    NodeView,
    RecordChange,
    RecordOutline,
    RecordView,
    StackView,
    TemplateContent,
    TraversalView,
)
from convergence.store.webhook_views import DeliveryView, NewDelivery, SubscriptionView
from convergence.store.worker_views import WorkerInfo, WorkerView

T_STACK = cast(Table, m.StackRow.__table__)
T_TEMPLATE = cast(Table, m.TemplateRow.__table__)
R = TypeVar("R")

T_RES = cast(Table, m.ResourceRow.__table__)
T_TRAV = cast(Table, m.TraversalRow.__table__)
T_NODE = cast(Table, m.NodeRow.__table__)
T_EVENT = cast(Table, m.EventRow.__table__)

_CHUNK = 500  # IN-lists are split so no statement grows without bound


def _copy_text(value: str) -> str:
    """A value in COPY's text format."""
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n") \
        .replace("\r", "\\r")


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def template_id(content: TemplateContent) -> str:
    """The content address of a desired state."""
    canonical = json.dumps(
        {"text": content.text, "files": dict(content.files),
         "environments": list(content.environments), "parameters": dict(content.parameters)},
        sort_keys=True, separators=(",", ":"), default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _stack(row: Any) -> StackView:
    return StackView(
        id=row.id, name=row.name, tenant=row.tenant, generation=row.generation,
        observed_generation=row.observed_generation, traversal_id=row.traversal_id,
        template_id=row.template_id, rollback_template_id=row.rollback_template_id,
        action=row.action, status=row.status, status_reason=row.status_reason,
        outputs=row.outputs or {}, timeout_mins=row.timeout_mins,
        disable_rollback=row.disable_rollback, created_at=row.created_at,
        updated_at=row.updated_at, deleted_at=row.deleted_at,
    )


def _traversal(row: Any) -> TraversalView:
    return TraversalView(
        id=row.id, stack_id=row.stack_id, generation=row.generation, action=row.action,
        template_id=row.template_id, state=row.state, nodes_total=row.nodes_total,
        nodes_remaining=row.nodes_remaining, nodes_failed=row.nodes_failed,
        failure=row.failure, deadline=row.deadline,
    )


def _record(row: Any) -> RecordView:
    return RecordView(
        id=row.id, stack_id=row.stack_id, name=row.name, type=row.type,
        physical_id=row.physical_id, action=row.action, status=row.status,
        status_reason=row.status_reason, template_id=row.template_id,
        generation=row.generation, requires=tuple(row.requires or ()), replaces=row.replaces,
        replaced_by=row.replaced_by, properties=row.properties or {},
        attributes=row.attributes or {}, reference_id=row.reference_id,
        operation=row.operation, fencing_token=row.fencing_token, lease_owner=row.lease_owner,
        created_at=row.created_at, updated_at=row.updated_at,
        deletion_policy=row.deletion_policy,
    )


def _node(row: Any) -> NodeView:
    return NodeView(
        traversal_id=row.traversal_id, seq=row.seq, record_id=row.record_id, name=row.name,
        phase=row.phase, pending=row.pending, state=row.state,
        successors=tuple(row.successors or ()), updated_at=row.updated_at,
    )


def _event(row: Any) -> EventView:
    return EventView(
        id=row.id, stack_id=row.stack_id, generation=row.generation,
        resource_name=row.resource_name, physical_resource_id=row.physical_resource_id,
        resource_type=row.resource_type, action=row.action, status=row.status,
        reason=row.reason, created_at=row.created_at,
    )


def of_stack(conn: Connection, stack_id: str) -> tuple[Any, tuple[Any, ...]]:
    """The condition that selects a stack's events, and the order keys to put before ``id``
    (or ``resource_type, id``) so that the database reads them along an index led by
    ``stack_id`` (``ix_events_stack``, ``ix_events_stack_resource``, ...), from the marker on.

    PostgreSQL, given ``stack_id = x ... ORDER BY id LIMIT n``, may walk the primary key and
    filter instead: its estimate assumes a big stack's events are spread evenly along the ids,
    but the newest events of a stack that went quiet lie behind every other stack's since (a
    stack with 100,000 events among 1,000,000: 900,000 rows walked for a page of 100). Written
    ``stack_id = ANY(ARRAY[x]) ... ORDER BY stack_id, id``, the order is one only an index led
    by ``stack_id`` gives (an ``= ANY`` does not make ``stack_id`` a constant of the order, as
    ``=`` does), and the index still seeks to the stack and the marker. SQLite picks the index
    by itself."""
    if conn.dialect.name != "postgresql":
        return T_EVENT.c.stack_id == stack_id, ()
    return T_EVENT.c.stack_id == any_(pg_array([stack_id])), (T_EVENT.c.stack_id,)


class _Row:
    """Attribute access to a slice of a joined row, by the columns of one table."""

    def __init__(self, table: Table, values: Sequence[Any]) -> None:
        self.__dict__.update(zip(table.c.keys(), values, strict=True))


class Tx:
    """One transaction's worth of primitives. Obtained from ``Store.begin``."""

    def __init__(self, conn: Connection, now: float) -> None:
        self.conn = conn
        self.now = now
        self._postgres = conn.dialect.name == "postgresql"

    # templates ----------------------------------------------------------------------------
    def put_template(self, content: TemplateContent, description: str | None = None) -> str:
        """Store a desired state once (its id is its hash); ``description``: its template's,
        kept beside it for the stack list."""
        tid = template_id(content)
        exists = self.conn.execute(select(T_TEMPLATE.c.id).where(T_TEMPLATE.c.id == tid))
        if exists.first() is None:
            # Two requests of one content (two stacks made from one template) may both find
            # it missing: the second insert does nothing rather than fail on the key.
            dialect_insert = pg_insert if self._postgres else sqlite_insert
            self.conn.execute(dialect_insert(T_TEMPLATE).values(
                id=tid, text=content.text, files=dict(content.files),
                environments=list(content.environments), parameters=dict(content.parameters),
                created_at=self.now, description=description,
            ).on_conflict_do_nothing(index_elements=["id"]))
        return tid

    def template_descriptions(self, tids: Iterable[str]) -> dict[str, str | None]:
        """The description of each template, in one query per chunk of ids (None: stored
        before descriptions were)."""
        found: dict[str, str | None] = {}
        for chunk in _chunks(sorted(set(tids))):
            rows = self.conn.execute(select(T_TEMPLATE.c.id, T_TEMPLATE.c.description)
                                     .where(T_TEMPLATE.c.id.in_(chunk)))
            found.update({row.id: row.description for row in rows})
        return found

    def template(self, tid: str) -> TemplateContent:
        row = self.conn.execute(select(T_TEMPLATE).where(T_TEMPLATE.c.id == tid)).one()
        return TemplateContent(row.text, row.files or {}, tuple(row.environments or ()),
                               row.parameters or {})

    # stacks -------------------------------------------------------------------------------
    def insert_stack(self, stack_id: str, tenant: str, name: str, *, timeout_mins: int | None,
                     disable_rollback: bool) -> None:
        """Raises Conflict when the tenant has a live stack of that name (the unique index
        decides, so two creates racing on one name cannot both pass a look-up first)."""
        try:
            self.conn.execute(insert(T_STACK).values(
                id=stack_id, name=name, tenant=tenant, generation=0, observed_generation=0,
                action="INIT", status="COMPLETE", status_reason="", outputs={},
                timeout_mins=timeout_mins, disable_rollback=disable_rollback,
                created_at=self.now, updated_at=self.now))
        except IntegrityError as exc:
            if not _name_taken(exc):
                raise
            raise Conflict(f"The Stack ({name}) already exists.") from None

    def stack(self, stack_id: str, *, lock: bool = False) -> StackView | None:
        query = select(T_STACK).where(T_STACK.c.id == stack_id)
        if lock and self._postgres:
            # FOR NO KEY UPDATE: it queues writers of the row, but not the foreign-key checks
            # of rows that refer to it (a FOR UPDATE here deadlocks with a step whose writes
            # re-check its records' key to the stack while this waits for its traversal).
            query = query.with_for_update(key_share=True)
        row = self.conn.execute(query).first()
        return _stack(row) if row is not None else None

    def find_stack(self, tenant: str, name_or_id: str) -> StackView | None:
        live = T_STACK.c.deleted_at.is_(None)
        row = self.conn.execute(select(T_STACK).where(
            T_STACK.c.tenant == tenant,
            or_(and_(T_STACK.c.name == name_or_id, live), T_STACK.c.id == name_or_id),
        ).order_by(T_STACK.c.created_at.desc())).first()
        return _stack(row) if row is not None else None

    def stacks(self, tenant: str, *, include_deleted: bool = False) -> list[StackView]:
        query = select(T_STACK).where(T_STACK.c.tenant == tenant)
        if not include_deleted:
            query = query.where(T_STACK.c.deleted_at.is_(None))
        return [_stack(r) for r in self.conn.execute(query.order_by(T_STACK.c.created_at))]

    def update_stack(self, stack_id: str, **values: Any) -> None:
        self.conn.execute(update(T_STACK).where(T_STACK.c.id == stack_id)
                          .values(updated_at=self.now, **values))

    def finish_stack(self, stack_id: str, traversal_id: str, **values: Any) -> bool:
        """Set the outcome, only if this traversal is still the stack's current one."""
        result = self.conn.execute(update(T_STACK).where(
            T_STACK.c.id == stack_id, T_STACK.c.traversal_id == traversal_id,
        ).values(updated_at=self.now, **values))
        return result.rowcount == 1

    # traversals ---------------------------------------------------------------------------
    def insert_traversal(self, stack_id: str, generation: int, action: str,
                         template_id: str | None, deadline: float | None) -> str:
        tid = str(uuid.uuid4())
        self.conn.execute(insert(T_TRAV).values(
            id=tid, stack_id=stack_id, generation=generation, action=action,
            template_id=template_id, state=PLANNING, nodes_total=0, nodes_remaining=0,
            nodes_failed=0, failure="", deadline=deadline, created_at=self.now))
        return tid

    def traversal_and_stack(self, traversal_id: str
                            ) -> tuple[TraversalView | None, StackView | None]:
        """Both in one query: what every batch starts by reading."""
        joined = select(T_TRAV, T_STACK).join(T_STACK, T_STACK.c.id == T_TRAV.c.stack_id) \
            .where(T_TRAV.c.id == traversal_id)
        row = self.conn.execute(joined).first()
        if row is None:
            return None, None
        n = len(T_TRAV.c)
        trav = _traversal(_Row(T_TRAV, row[:n]))
        return trav, _stack(_Row(T_STACK, row[n:]))

    def traversal(self, traversal_id: str, *, lock: bool = False) -> TraversalView | None:
        query = select(T_TRAV).where(T_TRAV.c.id == traversal_id)
        if lock and self._postgres:
            # FOR NO KEY UPDATE: it queues writers of the row, but not the foreign-key checks
            # of rows that refer to it (a FOR UPDATE here deadlocks with a step whose writes
            # re-check its records' key to the stack while this waits for its traversal).
            query = query.with_for_update(key_share=True)
        row = self.conn.execute(query).first()
        return _traversal(row) if row is not None else None

    def supersede_traversals(self, stack_id: str, keep: str) -> None:
        self.conn.execute(update(T_TRAV).where(
            T_TRAV.c.stack_id == stack_id, T_TRAV.c.id != keep,
            T_TRAV.c.state.in_((PLANNING, RUNNING)),
        ).values(state=SUPERSEDED, finished_at=self.now))

    def start_running(self, traversal_id: str, total: int) -> bool:
        result = self.conn.execute(update(T_TRAV).where(
            T_TRAV.c.id == traversal_id, T_TRAV.c.state == PLANNING,
        ).values(state=RUNNING, nodes_total=total, nodes_remaining=total))
        return result.rowcount == 1

    def count_done(self, traversal_id: str, done: int, failed: int, failure: str) -> int:
        """Take finished nodes off the traversal's counter; returns what remains."""
        values: dict[str, Any] = {
            "nodes_remaining": T_TRAV.c.nodes_remaining - (done + failed),
            "nodes_failed": T_TRAV.c.nodes_failed + failed,
        }
        if failure:
            values["failure"] = func.coalesce(func.nullif(T_TRAV.c.failure, ""), failure)
        return int(self.conn.execute(update(T_TRAV).where(T_TRAV.c.id == traversal_id)
                                     .values(**values)
                                     .returning(T_TRAV.c.nodes_remaining)).scalar_one())

    def end_traversal(self, traversal_id: str, state: str,
                      from_state: str | None = RUNNING) -> bool:
        """End a traversal (only from ``from_state``; None: from any state)."""
        where = [T_TRAV.c.id == traversal_id]
        if from_state is not None:
            where.append(T_TRAV.c.state == from_state)
        result = self.conn.execute(update(T_TRAV).where(*where)
                                   .values(state=state, finished_at=self.now))
        return result.rowcount == 1

    # records ------------------------------------------------------------------------------
    def records(self, stack_id: str) -> list[RecordView]:
        rows = self.conn.execute(select(T_RES).where(T_RES.c.stack_id == stack_id)
                                 .order_by(T_RES.c.id))
        return [_record(r) for r in rows]

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
        for chunk in _chunks(sorted(set(ids))):
            for r in self.conn.execute(select(T_RES).where(T_RES.c.id.in_(chunk))):
                out[r.id] = _record(r)
        return out

    def tokens(self, ids: Iterable[int]) -> dict[int, int]:
        out: dict[int, int] = {}
        for chunk in _chunks(sorted(set(ids))):
            rows = self.conn.execute(select(T_RES.c.id, T_RES.c.fencing_token)
                                     .where(T_RES.c.id.in_(chunk)))
            out.update({r.id: r.fencing_token for r in rows})
        return out

    def heads(self, stack_id: str, names: Iterable[str]) -> dict[str, RecordView]:
        """The newest unreplaced record of each name."""
        out: dict[str, RecordView] = {}
        for chunk in _chunks(sorted(set(names))):
            rows = self.conn.execute(select(T_RES).where(
                T_RES.c.stack_id == stack_id, T_RES.c.name.in_(chunk),
                T_RES.c.replaced_by.is_(None)).order_by(T_RES.c.id))
            for r in rows:
                out[r.name] = _record(r)
        return out

    def insert_records(self, stack_id: str, items: Sequence[tuple[str, str]],
                       policies: Mapping[str, str | None] | None = None) -> dict[str, int]:
        """New (never created) records for resources; returns their ids by name.
        ``policies``: each one's deletion policy, from its definition (a record carries it
        from the start, so that a crash before its first result cannot lose a Retain)."""
        if not items:
            return {}
        chosen = policies or {}
        rows: list[dict[str, Any]] = [
            {"stack_id": stack_id, "name": name, "type": rtype, "action": "INIT",
             "status": "COMPLETE", "status_reason": "", "generation": 0, "requires": [],
             "properties": {}, "attributes": {}, "fencing_token": 0,
             "deletion_policy": chosen.get(name), "created_at": self.now, "updated_at": self.now}
            for name, rtype in items]
        ids: dict[str, int] = {}
        for chunk in _chunks(rows):
            result = self.conn.execute(insert(T_RES).returning(T_RES.c.id, T_RES.c.name), chunk)
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

    def claim(self, record_ids: Sequence[int], owner: str,
              until: float) -> dict[int, int]:
        """Lease records to ``owner``; returns the fencing token of each one it now holds."""
        tokens: dict[int, int] = {}
        for chunk in _chunks(sorted(set(record_ids))):
            self.conn.execute(update(T_RES).where(
                T_RES.c.id.in_(chunk),
                # Nobody's (a poll watch is nobody's), or already ours. An expired lease of
                # someone else is the sweeper's to take over, which says so in an event.
                or_(T_RES.c.lease_owner.is_(None), T_RES.c.lease_owner == owner),
            ).values(lease_owner=owner, lease_expires=until,
                     fencing_token=T_RES.c.fencing_token + 1))
            rows = self.conn.execute(select(T_RES.c.id, T_RES.c.fencing_token).where(
                T_RES.c.id.in_(chunk), T_RES.c.lease_owner == owner,
                T_RES.c.lease_expires == until))
            tokens.update({r.id: r.fencing_token for r in rows})
        return tokens

    def claim_records(self, record_ids: Sequence[int], owner: str,
                      until: float) -> dict[int, RecordView]:
        """Lease records to ``owner`` and return them as claimed (token included): one
        statement per chunk, for the records nobody else holds."""
        claimed: dict[int, RecordView] = {}
        for chunk in _chunks(sorted(set(record_ids))):
            rows = self.conn.execute(update(T_RES).where(
                T_RES.c.id.in_(chunk),
                # Nobody's (a poll watch is nobody's), or already ours. An expired lease of
                # someone else is the sweeper's to take over, which says so in an event.
                or_(T_RES.c.lease_owner.is_(None), T_RES.c.lease_owner == owner),
            ).values(lease_owner=owner, lease_expires=until,
                     fencing_token=T_RES.c.fencing_token + 1).returning(*T_RES.c))
            claimed.update({r.id: _record(r) for r in rows})
        return claimed

    def apply(self, change: RecordChange) -> bool:
        """Write what a step learned, fenced; releases the lease. False if fenced off."""
        where = and_(T_RES.c.id == change.record_id, T_RES.c.fencing_token == change.token)
        if change.delete:
            result = self.conn.execute(delete(T_RES).where(where))
        else:
            stamp = {"updated_at": self.now} if change.values else {}
            result = self.conn.execute(update(T_RES).where(where).values(
                lease_owner=None, lease_expires=None, **stamp, **change.values))
        return result.rowcount == 1

    def apply_many(self, changes: Sequence[RecordChange]) -> set[int]:
        """Apply many fenced changes with few statements; returns the record ids applied.

        The tokens are read (and on PostgreSQL locked) first, in id order; changes whose token
        is stale are dropped; the rest are written with one executemany per shape of change.
        """
        ids = sorted({c.record_id for c in changes})
        current: dict[int, int] = {}
        for chunk in _chunks(ids):
            query = select(T_RES.c.id, T_RES.c.fencing_token).where(T_RES.c.id.in_(chunk)) \
                .order_by(T_RES.c.id)
            if self._postgres:
                query = query.with_for_update()
            current.update({r.id: r.fencing_token for r in self.conn.execute(query)})
        valid = [c for c in changes if current.get(c.record_id) == c.token]
        deletes = sorted({c.record_id for c in valid if c.delete})
        for chunk in _chunks(deletes):
            self.conn.execute(delete(T_RES).where(T_RES.c.id.in_(chunk)))
        shapes: dict[tuple[tuple[str, ...], bool], list[dict[str, Any]]] = {}
        for c in valid:
            if c.delete:
                continue
            keys = tuple(sorted(c.values))
            row = {"_id": c.record_id, **c.values}
            if c.watch is not None:
                row["_watch"] = self.now + c.watch
            shapes.setdefault((keys, c.watch is not None), []).append(row)
        for (keys, watched), rows in shapes.items():
            values: dict[str, Any] = {k: bindparam(k) for k in keys}
            values.update(lease_owner=None,
                          lease_expires=bindparam("_watch") if watched else None)
            if keys:  # only releasing the lease is not a change of the resource
                values["updated_at"] = self.now
            stmt = update(T_RES).where(T_RES.c.id == bindparam("_id")).values(values)
            self.conn.execute(stmt, rows)
        return {c.record_id for c in valid}

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
        for chunk in _chunks(sorted(set(record_ids))):
            rows = self.conn.execute(update(T_RES).where(
                T_RES.c.id.in_(chunk), T_RES.c.status == "IN_PROGRESS",
                or_(T_RES.c.lease_owner.is_(None), T_RES.c.lease_expires < self.now),
            ).values(status="FAILED", status_reason=reason, operation=None,
                     lease_owner=None, lease_expires=None, updated_at=self.now
                     ).returning(*T_RES.c))
            failed.extend(_record(r) for r in rows)
        return failed

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

    def current_nodes_of(self, traversal_id: str, record_ids: Iterable[int]) -> list[int]:
        """The ready nodes of a traversal that work on these records (handover)."""
        out: list[int] = []
        for chunk in _chunks(sorted(set(record_ids))):
            rows = self.conn.execute(select(T_NODE.c.seq).where(
                T_NODE.c.traversal_id == traversal_id, T_NODE.c.record_id.in_(chunk),
                T_NODE.c.state == READY))
            out.extend(r.seq for r in rows)
        return out

    def release(self, record_ids: Iterable[int], owner: str) -> None:
        for chunk in _chunks(sorted(set(record_ids))):
            self.conn.execute(update(T_RES).where(
                T_RES.c.id.in_(chunk), T_RES.c.lease_owner == owner,
            ).values(lease_owner=None, lease_expires=None))

    def renew_leases(self, record_ids: Iterable[int], owner: str, until: float) -> int:
        """Push the leases ``owner`` still holds on these records to ``until``; how many it
        still held (fewer: some were taken over)."""
        kept = 0
        for chunk in _chunks(sorted(set(record_ids))):
            kept += self.conn.execute(update(T_RES).where(
                T_RES.c.id.in_(chunk), T_RES.c.lease_owner == owner,
            ).values(lease_expires=until)).rowcount
        return kept

    # nodes --------------------------------------------------------------------------------
    def insert_nodes(self, traversal_id: str, nodes: Sequence[Any]) -> None:
        if not nodes:  # a plan with nothing to do (COPY would read an empty line as a row)
            return
        if self._postgres:
            self._copy_nodes(traversal_id, nodes)
            return
        rows = [{"traversal_id": traversal_id, "seq": n.seq, "record_id": n.record_id,
                 "name": n.name, "phase": n.phase, "pending": n.pending,
                 "state": READY if n.pending == 0 else WAITING,
                 "successors": list(n.successors), "updated_at": self.now} for n in nodes]
        for chunk in _chunks(rows, 1000):
            self.conn.execute(insert(T_NODE), chunk)

    def _copy_nodes(self, traversal_id: str, nodes: Sequence[Any]) -> None:
        """PostgreSQL's COPY: a plan's rows in one round trip (several times faster than
        multi-row INSERTs for a 10,000-resource plan)."""
        columns = ("traversal_id", "seq", "record_id", "name", "phase", "pending", "state",
                   "successors", "updated_at")
        lines = []
        for n in nodes:
            record = "\\N" if n.record_id is None else str(n.record_id)
            state = READY if n.pending == 0 else WAITING
            lines.append("\t".join((
                traversal_id, str(n.seq), record, _copy_text(n.name), n.phase, str(n.pending),
                state, json.dumps(list(n.successors), separators=(",", ":")),
                repr(self.now))))
        data = io.StringIO("\n".join(lines) + "\n")
        raw = self.conn.connection.dbapi_connection
        assert raw is not None
        cur = raw.cursor()
        try:
            cur.copy_expert(
                f"COPY nodes ({', '.join(columns)}) FROM STDIN", data)
        finally:
            cur.close()

    def nodes(self, traversal_id: str, seqs: Iterable[int]) -> list[NodeView]:
        out: list[NodeView] = []
        for chunk in _chunks(sorted(set(seqs))):
            rows = self.conn.execute(select(T_NODE).where(
                T_NODE.c.traversal_id == traversal_id, T_NODE.c.seq.in_(chunk)))
            out.extend(_node(r) for r in rows)
        return out

    def lease_expiry(self, record_ids: Iterable[int]) -> float | None:
        """When the latest of these records' leases runs out (None: none is held)."""
        latest: float | None = None
        for chunk in _chunks(sorted(set(record_ids))):
            value = self.conn.execute(select(func.max(T_RES.c.lease_expires)).where(
                T_RES.c.id.in_(chunk), T_RES.c.lease_owner.is_not(None))).scalar()
            if value is not None and (latest is None or value > latest):
                latest = float(value)
        return latest

    def ready_nodes(self, traversal_id: str) -> list[int]:
        rows = self.conn.execute(select(T_NODE.c.seq).where(
            T_NODE.c.traversal_id == traversal_id, T_NODE.c.state == READY))
        return [r.seq for r in rows]

    def node_states(self, traversal_id: str) -> dict[str, int]:
        rows = self.conn.execute(select(T_NODE.c.state, func.count()).where(
            T_NODE.c.traversal_id == traversal_id).group_by(T_NODE.c.state))
        return {state: count for state, count in rows}

    def set_node_record(self, traversal_id: str, seq: int, record_id: int) -> None:
        self.conn.execute(update(T_NODE).where(
            T_NODE.c.traversal_id == traversal_id, T_NODE.c.seq == seq,
        ).values(record_id=record_id))

    def finish_nodes(self, traversal_id: str, seqs: Sequence[int],
                     state: str) -> list[NodeView]:
        """Mark nodes DONE or FAILED; returns those that were not finished already."""
        changed: list[NodeView] = []
        for chunk in _chunks(sorted(set(seqs))):
            rows = self.conn.execute(update(T_NODE).where(
                T_NODE.c.traversal_id == traversal_id, T_NODE.c.seq.in_(chunk),
                T_NODE.c.state.in_((WAITING, READY)),
            ).values(state=state, updated_at=self.now).returning(*T_NODE.c))
            changed.extend(_node(r) for r in rows)
        return changed

    def release_successors(self, traversal_id: str, counts: Mapping[int, int]) -> list[int]:
        """Decrement successors' counters; returns the ones that became ready.

        Rows are locked in ascending order first, so that two workers finishing nodes with
        common successors (fan-in) queue up rather than deadlock.
        """
        seqs = sorted(counts)
        if not seqs:
            return []
        by_amount: dict[int, list[int]] = {}
        for seq in seqs:
            by_amount.setdefault(counts[seq], []).append(seq)
        for chunk in _chunks(seqs):
            if self._postgres:
                self.conn.execute(select(T_NODE.c.seq).where(
                    T_NODE.c.traversal_id == traversal_id, T_NODE.c.seq.in_(chunk),
                ).order_by(T_NODE.c.seq).with_for_update())
        ready: list[int] = []
        for amount, group in by_amount.items():
            left = T_NODE.c.pending - amount
            for chunk in _chunks(group):
                rows = self.conn.execute(update(T_NODE).where(
                    T_NODE.c.traversal_id == traversal_id, T_NODE.c.seq.in_(chunk),
                ).values(
                    pending=left,
                    state=case((and_(left <= 0, T_NODE.c.state == WAITING), READY),
                               else_=T_NODE.c.state),
                    updated_at=self.now,
                ).returning(T_NODE.c.seq, T_NODE.c.pending, T_NODE.c.state))
                # RETURNING gives the new values: became ready now, or was ready already?
                ready.extend(r.seq for r in rows if r.state == READY and r.pending == 0)
        return sorted(ready)

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
                nxt.update(s for s in n.successors if s not in seen)
            if not nxt:
                break
            targets = [n.seq for n in self.nodes(traversal_id, nxt)
                       if n.state in (WAITING, READY)]
            if targets:
                for chunk in _chunks(sorted(targets)):
                    self.conn.execute(update(T_NODE).where(
                        T_NODE.c.traversal_id == traversal_id, T_NODE.c.seq.in_(chunk),
                    ).values(state=SKIPPED, updated_at=self.now))
                skipped += len(targets)
            frontier = set(targets)
        return skipped

    # events -------------------------------------------------------------------------------
    def add_events(self, stack_id: str, traversal_id: str | None, generation: int,
                   events: Sequence[NewEvent]) -> None:
        if not events:
            return
        rows = [{"stack_id": stack_id, "traversal_id": traversal_id, "generation": generation,
                 "resource_name": e.resource_name, "physical_resource_id": e.physical_resource_id,
                 "resource_type": e.resource_type, "action": e.action, "status": e.status,
                 "reason": e.reason, "created_at": self.now} for e in events]
        for chunk in _chunks(rows, 1000):
            self.conn.execute(insert(T_EVENT), chunk)

    def events(self, stack_id: str, after: int = 0, limit: int | None = None) -> list[EventView]:
        """The stack's events after the id ``after``, oldest first (the event streams)."""
        stack, lead = of_stack(self.conn, stack_id)
        query = select(T_EVENT).where(stack, T_EVENT.c.id > after) \
            .order_by(*lead, T_EVENT.c.id)
        if limit:
            query = query.limit(limit)
        return [_event(r) for r in self.conn.execute(query)]

    # statistics (metrics) -------------------------------------------------------------------
    def ping(self) -> None:
        """A trivial query: raises when the database does not answer."""
        self.conn.execute(select(1))

    def stack_counts(self) -> dict[str, int]:
        """Live (not deleted) stacks by ``ACTION_STATUS``, over every tenant."""
        query = select(T_STACK.c.action, T_STACK.c.status, func.count()) \
            .where(T_STACK.c.deleted_at.is_(None)) \
            .group_by(T_STACK.c.action, T_STACK.c.status)
        return {f"{a}_{s}": int(n) for a, s, n in self.conn.execute(query)}

    def traversal_counts(self) -> dict[tuple[str, str], int]:
        """Traversals by (action, state) since the database was created."""
        query = select(T_TRAV.c.action, T_TRAV.c.state, func.count()) \
            .group_by(T_TRAV.c.action, T_TRAV.c.state)
        return {(str(a), str(s)): int(n) for a, s, n in self.conn.execute(query)}

    def project_events(self, tenant: str, after: int = 0,
                       limit: int | None = None) -> list[EventView]:
        """The events of all the tenant's stacks (deleted ones too) after the id ``after``, in
        id order: a range scan of the events' primary key, filtered by the tenant's stacks."""
        stacks = select(T_STACK.c.id).where(T_STACK.c.tenant == tenant)
        query = select(T_EVENT).where(T_EVENT.c.id > after, T_EVENT.c.stack_id.in_(stacks)) \
            .order_by(T_EVENT.c.id)
        if limit:
            query = query.limit(limit)
        return [_event(r) for r in self.conn.execute(query)]

    def stacks_by_id(self, ids: Iterable[str]) -> dict[str, StackView]:
        """The stacks (deleted ones too) with these ids."""
        found: dict[str, StackView] = {}
        for chunk in _chunks(sorted(set(ids)), _CHUNK):
            for row in self.conn.execute(select(T_STACK).where(T_STACK.c.id.in_(chunk))):
                found[row.id] = _stack(row)
        return found

    # marking and forgetting (mark-unhealthy, abandon) ----------------------------------------
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

    def forget_records(self, stack_id: str) -> int:
        """Remove every resource record of a stack (the cloud is not touched)."""
        return int(self.conn.execute(delete(T_RES).where(T_RES.c.stack_id == stack_id))
                   .rowcount)


    # notification webhooks (convergence.webhooks) --------------------------------------------
    def insert_subscription(self, sub_id: str, tenant: str, url: str, events: Sequence[str],
                            stack_id: str | None, secret: str) -> SubscriptionView:
        """A new subscription; it is notified of events committed from now on only."""
        last = self.conn.execute(select(func.max(T_EVENT.c.id))).scalar() or 0
        values = {"id": sub_id, "tenant": tenant, "url": url, "events": list(events),
                  "stack_id": stack_id, "secret": secret, "last_event_id": int(last),
                  "created_at": self.now}
        self.conn.execute(insert(T_SUB).values(**values))
        return SubscriptionView(sub_id, tenant, url, tuple(events), stack_id, secret, int(last),
                                self.now)

    def subscriptions(self, tenant: str | None = None, *,
                      lock: bool = False) -> list[SubscriptionView]:
        """A tenant's subscriptions (every tenant's when None), oldest first."""
        query = select(T_SUB).order_by(T_SUB.c.created_at, T_SUB.c.id)
        if tenant is not None:
            query = query.where(T_SUB.c.tenant == tenant)
        if lock:
            query = query.with_for_update()
        return [_subscription(r) for r in self.conn.execute(query)]

    def subscription(self, tenant: str, sub_id: str) -> SubscriptionView | None:
        row = self.conn.execute(select(T_SUB).where(
            T_SUB.c.tenant == tenant, T_SUB.c.id == sub_id)).first()
        return _subscription(row) if row is not None else None

    def delete_subscription(self, tenant: str, sub_id: str) -> bool:
        """Remove a subscription and its deliveries (pending ones are not sent)."""
        if self.subscription(tenant, sub_id) is None:
            return False
        self.conn.execute(delete(T_DELIVERY).where(T_DELIVERY.c.subscription_id == sub_id))
        self.conn.execute(delete(T_SUB).where(T_SUB.c.id == sub_id))
        return True

    def max_event_id(self) -> int:
        return int(self.conn.execute(select(func.max(T_EVENT.c.id))).scalar() or 0)

    def stack_level_events(self, after: int, upto: int, tenant: str, stack_id: str | None,
                           resource_type: str) -> list[tuple[EventView, StackView]]:
        """A tenant's events of ``resource_type`` (the stacks' own) in ``(after, upto]``."""
        query = (select(T_EVENT, T_STACK).join(T_STACK, T_STACK.c.id == T_EVENT.c.stack_id)
                 .where(T_EVENT.c.id > after, T_EVENT.c.id <= upto,
                        T_EVENT.c.resource_type == resource_type, T_STACK.c.tenant == tenant)
                 .order_by(T_EVENT.c.id))
        if stack_id is not None:
            query = query.where(T_EVENT.c.stack_id == stack_id)
        width = len(T_EVENT.c)
        return [(_event(_Row(T_EVENT, r[:width])), _stack(_Row(T_STACK, r[width:])))
                for r in self.conn.execute(query)]

    def add_deliveries(self, sub_id: str, last_event_id: int,
                       items: Sequence[NewDelivery]) -> None:
        """Record deliveries due now and move the subscription's cursor past their events."""
        if items:
            self.conn.execute(insert(T_DELIVERY), [
                {"subscription_id": d.subscription_id, "event_id": d.event_id,
                 "event_type": d.event_type, "body": d.body, "attempts": 0,
                 "next_attempt_at": self.now, "delivered_at": None, "last_error": ""}
                for d in items])
        self.conn.execute(update(T_SUB).where(T_SUB.c.id == sub_id)
                          .values(last_event_id=last_event_id))

    def claim_deliveries(self, lease: float, limit: int
                         ) -> list[tuple[DeliveryView, SubscriptionView]]:
        """Due deliveries, each pushed ``lease`` seconds ahead so that no one else sends it
        meanwhile (compare-and-swap on its due time); oldest due first."""
        rows = self.conn.execute(
            select(T_DELIVERY, T_SUB).join(T_SUB, T_SUB.c.id == T_DELIVERY.c.subscription_id)
            .where(T_DELIVERY.c.delivered_at.is_(None),
                   T_DELIVERY.c.next_attempt_at.is_not(None),
                   T_DELIVERY.c.next_attempt_at <= self.now)
            .order_by(T_DELIVERY.c.next_attempt_at, T_DELIVERY.c.id).limit(limit)).all()
        width = len(T_DELIVERY.c)
        claimed: list[tuple[DeliveryView, SubscriptionView]] = []
        for r in rows:
            delivery = _delivery(_Row(T_DELIVERY, r[:width]))
            done = self.conn.execute(update(T_DELIVERY).where(
                T_DELIVERY.c.id == delivery.id,
                T_DELIVERY.c.next_attempt_at == delivery.next_attempt_at,
            ).values(next_attempt_at=self.now + lease))
            if done.rowcount == 1:
                claimed.append((delivery, _subscription(_Row(T_SUB, r[width:]))))
        return claimed

    def delivery_attempted(self, delivery_id: int, *, delivered: bool, error: str,
                           next_attempt_at: float | None) -> None:
        """Count an attempt: delivered, or failed with its error and the next try (None: no
        more tries)."""
        self.conn.execute(update(T_DELIVERY).where(T_DELIVERY.c.id == delivery_id).values(
            attempts=T_DELIVERY.c.attempts + 1, last_error=error,
            delivered_at=self.now if delivered else None,
            next_attempt_at=None if delivered else next_attempt_at))

    def deliveries(self, sub_id: str) -> list[DeliveryView]:
        """A subscription's deliveries, oldest first (the delivery log)."""
        return [_delivery(r) for r in self.conn.execute(
            select(T_DELIVERY).where(T_DELIVERY.c.subscription_id == sub_id)
            .order_by(T_DELIVERY.c.id))]

    def next_delivery_due(self) -> float | None:
        """When the earliest undelivered delivery is due, if any."""
        value = self.conn.execute(select(func.min(T_DELIVERY.c.next_attempt_at)).where(
            T_DELIVERY.c.delivered_at.is_(None))).scalar()
        return float(value) if value is not None else None

    # worker heartbeats (convergence.heartbeat) ----------------------------------------------
    def heartbeat(self, worker: WorkerInfo) -> None:
        """Upsert the worker's row with a heartbeat at this transaction's time (a worker
        beating again after a stop is running again)."""
        done = self.conn.execute(update(T_WORKER).where(T_WORKER.c.id == worker.id).values(
            hostname=worker.hostname, pid=worker.pid, kind=worker.kind,
            heartbeat_at=self.now, stopped_at=None))
        if done.rowcount == 0:
            self.conn.execute(insert(T_WORKER).values(
                id=worker.id, hostname=worker.hostname, pid=worker.pid, kind=worker.kind,
                started_at=worker.started_at, heartbeat_at=self.now, stopped_at=None))

    def workers(self, since: float | None = None) -> list[WorkerView]:
        """The workers that beat at or after ``since`` (all when None), oldest first."""
        query = select(T_WORKER).order_by(T_WORKER.c.started_at, T_WORKER.c.id)
        if since is not None:
            query = query.where(T_WORKER.c.heartbeat_at >= since)
        return [_worker(r) for r in self.conn.execute(query)]

    def stop_worker(self, worker_id: str) -> bool:
        """Mark a worker stopped (graceful shutdown); False when it has no row."""
        done = self.conn.execute(update(T_WORKER).where(T_WORKER.c.id == worker_id)
                                 .values(stopped_at=self.now))
        return bool(done.rowcount)


class Store:
    """Opens transactions on one database."""

    def __init__(self, engine: Engine, clock: Callable[[], float] = time.time) -> None:
        self.engine = engine
        self.clock = clock

    @contextmanager
    def begin(self) -> Iterator[Tx]:
        with self.engine.begin() as conn:
            yield Tx(conn, self.clock())

    @contextmanager
    def read(self) -> Iterator[Tx]:
        """A transaction for reading only. On SQLite it takes no write lock (a deferred
        BEGIN reads a snapshot of the WAL), so reads do not queue behind traversals; it must
        not write: a write there could not wait for the lock as ``begin``'s do."""
        with self.engine.connect() as conn:
            conn = conn.execution_options(**{READ_ONLY: True})
            with conn.begin():
                yield Tx(conn, self.clock())

    def transact(self, work: Callable[[Tx], R], attempts: int = 3) -> R:
        """Run ``work`` in a transaction, again (from the start, in a new one) when the
        database chose it as a deadlock's victim or refused to serialize it: what a request
        does must not fail for a lock order it did not pick."""
        for attempt in range(1, attempts + 1):
            try:
                with self.begin() as tx:
                    return work(tx)
            except DBAPIError as exc:
                if attempt == attempts or not _transient(exc):
                    raise
        raise AssertionError("unreachable")


def _name_taken(exc: IntegrityError) -> bool:
    """Whether ``exc`` is the unique index on live stack names refusing a second one."""
    diag = getattr(exc.orig, "diag", None)
    if diag is not None:  # PostgreSQL names the constraint
        return getattr(diag, "constraint_name", None) == "ix_stacks_tenant_live_name"
    return "stacks.tenant, stacks.name" in str(exc.orig)  # SQLite names the columns


def _transient(exc: DBAPIError) -> bool:
    """A deadlock victim or a serialization failure (PostgreSQL's 40P01 and 40001)."""
    return getattr(exc.orig, "pgcode", None) in ("40P01", "40001")


__all__ = ["COMPLETE", "DONE", "FAILED", "SKIPPED", "Store", "Tx", "template_id"]


T_SUB = cast(Table, m.SubscriptionRow.__table__)
T_DELIVERY = cast(Table, m.DeliveryRow.__table__)


def _subscription(row: Any) -> SubscriptionView:
    return SubscriptionView(
        id=row.id, tenant=row.tenant, url=row.url, events=tuple(row.events or ()),
        stack_id=row.stack_id, secret=row.secret, last_event_id=int(row.last_event_id),
        created_at=row.created_at)


def _delivery(row: Any) -> DeliveryView:
    return DeliveryView(
        id=row.id, subscription_id=row.subscription_id, event_id=row.event_id,
        event_type=row.event_type, body=row.body or {}, attempts=row.attempts,
        next_attempt_at=row.next_attempt_at, delivered_at=row.delivered_at,
        last_error=row.last_error or "")


T_WORKER = cast(Table, m.WorkerRow.__table__)


def _worker(row: Any) -> WorkerView:
    return WorkerView(
        id=row.id, hostname=row.hostname, pid=row.pid, kind=row.kind,
        started_at=row.started_at, heartbeat_at=row.heartbeat_at, stopped_at=row.stopped_at)
