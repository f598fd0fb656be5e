"""Events: what happened to a stack and its resources, recorded and read back in pages.

Callers: composed into ``transactions.Tx``; reached through the ports' ``Events`` protocol.
The engine, the sweeper and the services record events (``add_events``); the event streams
read them after an id (``events``, ``project_events``); Heat's event list reads pages
(``event_page``: ``convergence.services.queries.list_events``, for the API's ``GET .../events`` and
``.../resources/{name}/events``, and the CLI's ``event list``).

A page is answered by one indexed query. What the caller asks for is an
:class:`~convergence.ports.pages.EventQuery`: the filters, the order, a ``marker`` (the event
the page starts after) and a ``limit``. The database filters, orders and cuts the page, so a
page of 100 events costs the same on a stack of 100 events as on one of 100,000:

- The order is the event id, ascending or descending: ids are handed out as events are
  recorded, so id order is time order (``event_time`` and ``created_at`` sort by it; two
  transactions that overlapped may have stamped their events a few milliseconds out of id
  order, and the id is the order every reader, marker and stream agrees on). ``ix_events_stack``
  ``(stack_id, id)`` walks it in both directions, from the marker on (keyset paging: no
  offset, nothing before the marker is read).
- ``resource_name`` (and the resource-scoped listing) walks ``ix_events_stack_resource``
  ``(stack_id, resource_name, id)``, and ``resource_status`` ``ix_events_stack_status``
  ``(stack_id, status, id)``: one resource's events, or the few failures, among many cost no
  more than a whole stack's page.
- The other filters (action, type, physical id, several names or statuses at once) are checked
  on the way along those indexes: cheap when the events they match are common; a rare match
  costs the rows walked past until the page is full.
- ``resource_type`` as a sort key orders by ``(resource_type, id)``: no index serves that
  order, so the database sorts the stack's matching events (a top-N sort) for each page.

On PostgreSQL the statement is shaped so that the planner cannot prefer walking the primary key
instead (``dialect.led_by`` says why and how).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy import ColumnElement, and_, bindparam, insert, or_, select, text

from convergence.ports.pages import EventQuery
from convergence.ports.views import EventView, NewEvent
from convergence.store import dialect
from convergence.store.lean import Lean
from convergence.store.page_filters import any_of, status_is
from convergence.store.rows import T_EVENT, T_STACK, TxPart, chunks, event_view

_INSERT = Lean(insert(T_EVENT).values({c: bindparam(c) for c in (
    "stack_id", "traversal_id", "generation", "resource_name", "physical_resource_id",
    "resource_type", "action", "status", "reason", "created_at")}))
# PostgreSQL: a batch's events in one statement whose rows come as one JSON parameter, read
# back as a table in their order (ids are handed out in it: id order is the ledger's order).
# SQLAlchemy's multi-row VALUES binds six parameters an event, built and bound in Python: a
# fifth of a worker's time on a wide stack.
_INSERT_ROWS = Lean(text(
    "INSERT INTO events (stack_id, traversal_id, generation, created_at, resource_name, "
    "physical_resource_id, resource_type, action, status, reason) "
    "SELECT :stack, :trav, :gen, :now, x.n, x.p, x.t, x.a, x.s, x.r "
    "FROM ROWS FROM (json_to_recordset(CAST(:rows AS json)) "
    "AS (n text, p text, t text, a text, s text, r text)) WITH ORDINALITY "
    "AS x(n, p, t, a, s, r, i) ORDER BY x.i"))


class EventQueries(TxPart):
    def add_events(self, stack_id: str, traversal_id: str | None, generation: int,
                   events: Sequence[NewEvent]) -> None:
        if not events:
            return
        if len(events) > 1 and dialect.is_postgres(self.conn):
            for part in chunks(events, 1000):
                _INSERT_ROWS.count(self.conn, {
                    "stack": stack_id, "trav": traversal_id, "gen": generation,
                    "now": self.now, "rows": json.dumps([
                        {"n": e.resource_name, "p": e.physical_resource_id,
                         "t": e.resource_type, "a": e.action, "s": e.status, "r": e.reason}
                        for e in part])})
            return
        rows = [{"stack_id": stack_id, "traversal_id": traversal_id, "generation": generation,
                 "resource_name": e.resource_name, "physical_resource_id": e.physical_resource_id,
                 "resource_type": e.resource_type, "action": e.action, "status": e.status,
                 "reason": e.reason, "created_at": self.now} for e in events]
        _INSERT.many(self.conn, rows)  # on PostgreSQL: one event

    def events(self, stack_id: str, after: int = 0, limit: int | None = None) -> list[EventView]:
        """The stack's events after the id ``after``, oldest first (the event streams)."""
        stack, lead = dialect.led_by(self.conn, T_EVENT.c.stack_id, stack_id)
        query = select(T_EVENT).where(stack, T_EVENT.c.id > after) \
            .order_by(*lead, T_EVENT.c.id)
        if limit:
            query = query.limit(limit)
        return [event_view(r) for r in self.conn.execute(query)]

    def project_events(self, tenant: str, after: int = 0,
                       limit: int | None = None) -> list[EventView]:
        """The events of all the tenant's stacks (deleted ones too) after the id ``after``, in
        id order: a range scan of the events' primary key, filtered by the tenant's stacks."""
        stacks = select(T_STACK.c.id).where(T_STACK.c.tenant == tenant)
        query = select(T_EVENT).where(T_EVENT.c.id > after, T_EVENT.c.stack_id.in_(stacks)) \
            .order_by(T_EVENT.c.id)
        if limit:
            query = query.limit(limit)
        return [event_view(r) for r in self.conn.execute(query)]

    def event_page(self, stack_id: str, query: EventQuery) -> list[EventView] | None:
        """The page's events, in its order; None when the marker must be an event of the
        stack and is not."""
        t = T_EVENT
        stack, lead = dialect.led_by(self.conn, t.c.stack_id, stack_id)
        statement = select(t).where(stack, *_filters(query))
        if query.marker is not None:
            found = self.conn.execute(select(t.c.resource_type).where(
                t.c.id == query.marker, t.c.stack_id == stack_id)).first()
            if found is None and query.strict_marker:
                return None
            statement = statement.where(_after(query, query.marker,
                                               found.resource_type if found else None))
        keys = [*lead, t.c.resource_type, t.c.id] if query.by_type else [*lead, t.c.id]
        statement = statement.order_by(*(k.desc() if query.descending else k for k in keys))
        if query.limit is not None:
            statement = statement.limit(query.limit)
        return [event_view(r) for r in self.conn.execute(statement)]


def _filters(query: EventQuery) -> list[ColumnElement[bool]]:
    t = T_EVENT
    found = [any_of(t.c.resource_name, query.resource_names),
             any_of(t.c.action, query.actions),
             any_of(t.c.resource_type, query.resource_types),
             any_of(t.c.physical_resource_id, query.physical_ids)]
    if query.statuses:
        found.append(or_(*(status_is(T_EVENT, v) for v in query.statuses)))
    return [f for f in found if f is not None]


def _after(query: EventQuery, marker: int, marker_type: str | None) -> ColumnElement[bool]:
    """Past the marker in the page's order."""
    t = T_EVENT
    if not query.by_type or marker_type is None:
        return t.c.id < marker if query.descending else t.c.id > marker
    if query.descending:
        return or_(t.c.resource_type < marker_type,
                   and_(t.c.resource_type == marker_type, t.c.id < marker))
    return or_(t.c.resource_type > marker_type,
               and_(t.c.resource_type == marker_type, t.c.id > marker))
