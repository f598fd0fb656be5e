"""Pages of one stack's resources: Heat's resource list answered by indexed queries.

Callers: composed into ``transactions.Tx`` (``Tx.resource_page`` and ``Tx.names_in_status``,
in the ports' ``Records`` protocol); ``convergence.services`` (``resource_page``,
``resource_chunks``), for the API's ``GET .../resources`` and ``.../resources/{name}`` and the
CLI's ``resource list`` and ``resource show``; ``queries.progress_of`` (a few of the resources
in progress, for a request's progress). What the caller asks for is a
:class:`~convergence.ports.pages.ResourceQuery`: the filters, the order, a ``marker`` (the
resource the page starts after) and a ``limit``; the answer is a
:class:`~convergence.ports.pages.ResourcePage`, the records and who requires each.

A listing shows one record per resource name: the version the stack uses. Several versions of
a name live side by side while one replaces another; the one shown is an unreplaced one before
a replaced one, the newest (highest id) among equals. The database picks it: a version is
listed when no other version of its name is preferred to it (``NOT EXISTS``, a probe of
``ix_resources_stack_name`` per row, which holds every version of a name side by side).

The database filters, orders and cuts the page, so a page of 100 costs about the same on a
stack of 100 resources as on one of 100,000:

- The order is the resource name (keyset paging: the page starts after the marker's name; no
  offset, nothing before the marker is read), ascending or descending, along
  ``ix_resources_stack_name`` ``(stack_id, name)``. Names compare as the database collates
  them: code point order with the ``C`` collation (SQLite's, and this project's PostgreSQL);
  a page always continues where the last one ended, whatever the collation.
- ``status`` walks ``ix_resources_stack_status`` ``(stack_id, status, name)`` and ``type``
  ``ix_resources_stack_type`` ``(stack_id, type, name)``: the few failures among many resources
  (``openstack stack failures list``), or a rare type, cost no more than a page. ``name`` is an
  equality on the name index, ``physical_resource_id`` one on ``ix_resources_stack_physical``.
- The other filters (action, several statuses or types at once) are checked on the way along
  the name index: cheap when what they match is common; a rare match costs the rows walked
  past until the page is full.
- Ordered by type, a page walks ``ix_resources_stack_type`` from the marker on. The other sort
  keys (status, creation or update time, physical id) order by ``(key..., name)``: no index
  serves those orders, so the database sorts the stack's matching resources (a top-N sort) for
  each page. The keys are taken in one direction, all ascending or all descending.

``required_by`` (the names of the records built on a record: those whose ``requires`` holds
its id) is read for the page's records only, through an index (``dialect.required_by``: on
PostgreSQL ``ix_resources_requires``, a GIN index on ``requires`` as ``jsonb``; on SQLite
``resource_requirements``, the lists as rows, kept by triggers).

``nested_depth`` is carried for the nested stacks to come: no resource type owns a nested
stack yet, so a listing at any depth is the stack's own resources (see
``convergence.services.queries.resource_chunks``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    FromClause,
    and_,
    bindparam,
    exists,
    func,
    or_,
    select,
    tuple_,
)

from convergence.ports.pages import ResourcePage, ResourceQuery
from convergence.ports.views import RecordView
from convergence.store import dialect
from convergence.store.page_filters import any_of, status_is
from convergence.store.rows import T_RES, TxPart, record_view


class ResourcePageQueries(TxPart):
    def names_in_status(self, stack_id: str, status: str, limit: int) -> list[str]:
        """The names of at most ``limit`` of the stack's records in ``status`` (each name once,
        whichever of its versions it is), in name order: the first entries of
        ``ix_resources_stack_status``, read from the index alone, whatever the stack's
        size."""
        found = self.conn.execute(
            select(T_RES.c.name).where(T_RES.c.stack_id == stack_id, T_RES.c.status == status)
            .distinct().order_by(T_RES.c.name).limit(limit))
        return [str(name) for name, in found]

    def resource_page(self, stack_id: str, query: ResourceQuery,
                      after: RecordView | None = None) -> ResourcePage | None:
        """The page's records, in its order, with who requires each. ``after``: a record the
        page continues after (the last of the page before), in place of the query's marker;
        its values place the page even if it is gone since. None when the order needs the
        marker's values and the marker is not a resource of the stack."""
        if query.limit == 0:
            return ResourcePage(())
        t = T_RES
        keys = _order(query)
        statement = select(t).where(_of_stack(stack_id, query), *_filters(query), LISTED)
        if after is not None or query.marker is not None:
            past = _after(self.conn, stack_id, query, keys, after)
            if past is None:
                return None
            statement = statement.where(past)
        statement = statement.order_by(*(c.desc() if query.descending else c for c, _ in keys))
        if query.limit is not None:
            statement = statement.limit(query.limit)
        records = tuple(record_view(r, self.sealer) for r in self.conn.execute(statement))
        return ResourcePage(records, _required_by(self.conn, stack_id, [r.id for r in records]))


def _listed() -> ColumnElement[bool]:
    """The record is the version of its name the stack uses: no other version of the name
    is preferred to it (unreplaced over replaced, then the newest)."""
    r, o = T_RES, T_RES.alias("other")
    preferred = or_(and_(o.c.replaced_by.is_(None), r.c.replaced_by.is_not(None)),
                    and_(o.c.id > r.c.id,
                         or_(o.c.replaced_by.is_(None), r.c.replaced_by.is_not(None))))
    return ~exists().where(o.c.stack_id == r.c.stack_id, o.c.name == r.c.name, preferred)


# Built once: it names no value, and building it (an alias of the table, its columns) cost a
# millisecond of every page.
LISTED = _listed()


# Each sort key: the expressions it orders by, and how a listed record gives their values.
# A physical id orders as listed: "" when there is none yet (a NULL would break the keyset).
_KEYS: dict[str, tuple[tuple[ColumnElement[Any], Callable[[RecordView], Any]], ...]] = {
    "name": ((T_RES.c.name, lambda r: r.name),),
    "type": ((T_RES.c.type, lambda r: r.type),),
    "status": ((T_RES.c.action, lambda r: r.action), (T_RES.c.status, lambda r: r.status)),
    "created_at": ((T_RES.c.created_at, lambda r: r.created_at),),
    "updated_at": ((T_RES.c.updated_at, lambda r: r.updated_at),),
    "physical_id": ((func.coalesce(T_RES.c.physical_id, ""), lambda r: r.physical_id or ""),),
}


def _order(query: ResourceQuery) -> list[tuple[ColumnElement[Any], Callable[[RecordView], Any]]]:
    """What the page is ordered by, the name last."""
    keys = list(dict.fromkeys(query.sort_keys))
    if "name" in keys:
        keys = keys[:keys.index("name")]
    return [k for key in [*keys, "name"] for k in _KEYS[key]]


def _after(conn: Connection, stack_id: str, query: ResourceQuery,
           keys: Sequence[tuple[ColumnElement[Any], Callable[[RecordView], Any]]],
           record: RecordView | None) -> ColumnElement[bool] | None:
    """Past ``record``, or else the marker, in the page's order; None when the order needs the
    marker's values and the marker is not a resource of the stack."""
    name = T_RES.c.name
    marker = record.name if record is not None else query.marker
    assert marker is not None
    if len(keys) == 1:
        return name < marker if query.descending else name > marker
    columns = [column for column, _ in keys]
    found: Sequence[Any] | None
    if record is not None:
        found = [value(record) for _, value in keys]
    else:
        found = conn.execute(select(*columns).where(
            T_RES.c.stack_id == stack_id, name == marker, LISTED)).first()
    if found is None:
        return None
    position = tuple_(*(bindparam(None, v, type_=c.type) for c, v in zip(
        columns, found, strict=True)))
    return tuple_(*columns) < position if query.descending else tuple_(*columns) > position


def _of_stack(stack_id: str, query: ResourceQuery) -> ColumnElement[bool]:
    """The stack's records; with a physical id filter, those of the ids asked for, found by
    ``ix_resources_stack_physical`` first (asked for the stack's records in name order, SQLite,
    which keeps no statistics, would rather walk the name index than sort the few matches)."""
    t = T_RES
    if not query.physical_ids:
        return t.c.stack_id == stack_id
    p = T_RES.alias("by_physical")
    return t.c.id.in_(select(p.c.id).where(
        p.c.stack_id == stack_id, or_(*(_physical(p, v) for v in query.physical_ids))))


def _filters(query: ResourceQuery) -> list[ColumnElement[bool]]:
    t = T_RES
    found = [any_of(t.c.name, query.names), any_of(t.c.type, query.types),
             any_of(t.c.action, query.actions)]
    if query.statuses:
        found.append(or_(*(status_is(T_RES, v) for v in query.statuses)))
    return [f for f in found if f is not None]


def _physical(t: FromClause, value: str) -> ColumnElement[bool]:
    column = t.c.physical_id
    if value == "":
        return or_(column.is_(None), column == "")
    return column == value


def _required_by(conn: Connection, stack_id: str,
                 ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
    """``required_by`` of the records ``ids`` (records of the stack): the names of the stack's
    records whose ``requires`` holds each."""
    if not ids:
        return {}
    users = dialect.required_by(conn, stack_id, ids)
    return {rid: tuple(sorted(names)) for rid, names in users.items()}
