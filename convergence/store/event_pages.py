"""Pages of one stack's events: Heat's event list answered by one indexed query.

Callers: ``convergence.services.list_events`` (the API's ``GET .../events`` and
``.../resources/{name}/events``, and the CLI's ``event list``). What the caller asks for is an
:class:`EventQuery`: the filters, the order, a ``marker`` (the event the page starts after) and
a ``limit``. The database filters, orders and cuts the page, so a page of 100 events costs the
same on a stack of 100 events as on one of 100,000:

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
instead (``repository.of_stack`` says why and how).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, or_, select

from convergence.store.page_filters import any_of, status_is
from convergence.store.repository import T_EVENT, Tx, _event, of_stack
from convergence.store.views import EventView

TIME_KEYS = frozenset({"event_time", "created_at"})
SORT_KEYS = ("event_time", "created_at", "resource_type")  # Heat's, and one alias


@dataclass(frozen=True, slots=True)
class EventQuery:
    """One page of a stack's events. A filter given several values matches any of them;
    an empty filter matches every event."""

    limit: int | None = None  # None: every event after the marker
    marker: int | None = None  # the page starts after this event (in the page's order)
    # False: the marker is only a position in the log, which need not be an event of the
    # stack (the long-poll's ``marker=0``); True: it must be one, else there is no page.
    strict_marker: bool = True
    descending: bool = False
    by_type: bool = False  # order by (resource_type, id) rather than by id
    resource_names: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    # Each a status (``COMPLETE``) or, as the events show it, ``ACTION_STATUS``.
    statuses: tuple[str, ...] = ()
    resource_types: tuple[str, ...] = ()
    physical_ids: tuple[str, ...] = ()


def sorts_by_type(keys: Sequence[str]) -> bool:
    """Whether Heat's ``sort_keys`` (each one of :data:`SORT_KEYS`) order by resource type
    first: keys after a time key change nothing, the id being unique."""
    for key in keys:
        if key in TIME_KEYS:
            return False
        if key == "resource_type":
            return True
    return False


def page(tx: Tx, stack_id: str, query: EventQuery) -> list[EventView] | None:
    """The page's events, in its order; None when the marker must be an event of the stack
    and is not."""
    t = T_EVENT
    stack, lead = of_stack(tx.conn, stack_id)
    statement = select(t).where(stack, *_filters(query))
    if query.marker is not None:
        found = tx.conn.execute(select(t.c.resource_type).where(
            t.c.id == query.marker, t.c.stack_id == stack_id)).first()
        if found is None and query.strict_marker:
            return None
        statement = statement.where(_after(query, query.marker,
                                           found.resource_type if found else None))
    keys = [*lead, t.c.resource_type, t.c.id] if query.by_type else [*lead, t.c.id]
    statement = statement.order_by(*(k.desc() if query.descending else k for k in keys))
    if query.limit is not None:
        statement = statement.limit(query.limit)
    return [_event(r) for r in tx.conn.execute(statement)]


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
