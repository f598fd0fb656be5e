"""Pages of one stack's resources: Heat's resource list answered by indexed queries.

Callers: ``convergence.services`` (``resource_page``, ``resource_chunks``), for the API's
``GET .../resources`` and ``.../resources/{name}`` and the CLI's ``resource list`` and
``resource show``. What the caller asks for is a :class:`ResourceQuery`: the filters, the
order, a ``marker`` (the resource the page starts after) and a ``limit``; the answer is a
:class:`ResourcePage`, the records and who requires each.

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
its id) is read for the page's records only, through an index: on PostgreSQL
``ix_resources_requires``, a GIN index on ``requires`` as ``jsonb`` (one look-up per page); on
SQLite, which cannot index the elements of a JSON list, ``resource_requirements``, the lists as
rows, kept by triggers (``models.RequirementRow``), by ``ix_resource_requirements_required``.

``nested_depth`` is carried for the nested stacks to come: no resource type owns a nested
stack yet, so a listing at any depth is the stack's own resources (see
``services.resource_chunks``).
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    ColumnElement,
    FromClause,
    Table,
    Text,
    and_,
    any_,
    bindparam,
    cast,
    exists,
    func,
    or_,
    select,
    tuple_,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from convergence.store import models as m
from convergence.store.page_filters import any_of, status_is
from convergence.store.repository import T_RES, Tx, _record
from convergence.store.views import RecordView

T_REQUIREMENTS = typing.cast(Table, m.RequirementRow.__table__)

# What a listing may be ordered by (``sort_keys``: the first key, then the next among equals);
# the name always ends the order (unique among the listed records: nothing after it matters).
SORT_KEYS = ("name", "type", "status", "created_at", "updated_at", "physical_id")

RequiredBy = Mapping[int, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class ResourceQuery:
    """A page of a stack's resources. A filter given several values matches any of them; an
    empty filter matches every resource. Every filter looks at the version of each resource
    the stack uses (the one listed), never at one being replaced."""

    limit: int | None = None  # None: every resource after the marker
    # A resource name: the page starts after it, in the page's order. In name order it is a
    # position, which need not be a resource of the stack (one deleted between two pages still
    # places the next); in another order it must be one (its values place the page).
    marker: str | None = None
    descending: bool = False
    sort_keys: tuple[str, ...] = ()  # each one of SORT_KEYS; () or ("name",): by name
    names: tuple[str, ...] = ()  # Heat's ``name`` (and ``id``: a resource's logical id)
    types: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    # Each a status (``COMPLETE``) or, as the listing shows it, ``ACTION_STATUS``.
    statuses: tuple[str, ...] = ()
    # ``""`` matches a resource with no physical resource yet (listed as ``""``).
    physical_ids: tuple[str, ...] = ()
    nested_depth: int = 0  # levels of nested stacks to list too (none exist yet)

    def __post_init__(self) -> None:
        unknown = [k for k in self.sort_keys if k not in SORT_KEYS]
        if unknown:
            raise ValueError(f"unknown sort keys {unknown}: allowed are {', '.join(SORT_KEYS)}")
        if self.limit is not None and self.limit < 0:
            raise ValueError("limit must not be negative")
        if self.nested_depth < 0:
            raise ValueError("nested_depth must not be negative")


@dataclass(frozen=True, slots=True)
class ResourcePage:
    """The records of a page, in its order, and for each (by record id) the names of the
    records built on it (Heat's ``required_by``, sorted; a name appears once however many of
    its versions require the record)."""

    records: tuple[RecordView, ...]
    required_by: RequiredBy = field(default_factory=dict)

    def users(self, record: RecordView) -> list[str]:
        """``required_by`` of one of the page's records."""
        return list(self.required_by.get(record.id, ()))


def page(tx: Tx, stack_id: str, query: ResourceQuery,
         after: RecordView | None = None) -> ResourcePage | None:
    """The page's records, in its order, with who requires each. ``after``: a record the page
    continues after (the last of the page before), in place of the query's marker; its values
    place the page even if it is gone since. None when the order needs the marker's values and
    the marker is not a resource of the stack."""
    if query.limit == 0:
        return ResourcePage(())
    t = T_RES
    keys = _order(query)
    statement = select(t).where(_of_stack(stack_id, query), *_filters(query), _listed())
    if after is not None or query.marker is not None:
        past = _after(tx, stack_id, query, keys, after)
        if past is None:
            return None
        statement = statement.where(past)
    statement = statement.order_by(*(c.desc() if query.descending else c for c, _ in keys))
    if query.limit is not None:
        statement = statement.limit(query.limit)
    records = tuple(_record(r) for r in tx.conn.execute(statement))
    return ResourcePage(records, _required_by(tx, stack_id, [r.id for r in records]))


def _listed() -> ColumnElement[bool]:
    """The record is the version of its name the stack uses: no other version of the name
    is preferred to it (unreplaced over replaced, then the newest)."""
    r, o = T_RES, T_RES.alias("other")
    preferred = or_(and_(o.c.replaced_by.is_(None), r.c.replaced_by.is_not(None)),
                    and_(o.c.id > r.c.id,
                         or_(o.c.replaced_by.is_(None), r.c.replaced_by.is_not(None))))
    return ~exists().where(o.c.stack_id == r.c.stack_id, o.c.name == r.c.name, preferred)


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


def _after(tx: Tx, stack_id: str, query: ResourceQuery,
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
        found = tx.conn.execute(select(*columns).where(
            T_RES.c.stack_id == stack_id, name == marker, _listed())).first()
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


def _required_by(tx: Tx, stack_id: str, ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
    """``required_by`` of the records ``ids`` (records of the stack): the names of the stack's
    records whose ``requires`` holds each."""
    if not ids:
        return {}
    wanted = set(ids)
    users: dict[int, set[str]] = {}
    t = T_RES
    if tx.conn.dialect.name == "postgresql":
        # ``ix_resources_requires``: each probe ``[id]`` is looked up in the GIN index.
        probes = cast(bindparam("probes", [json.dumps([i]) for i in wanted],
                                type_=ARRAY(Text)), ARRAY(JSONB))
        found = tx.conn.execute(select(t.c.name, t.c.requires).where(
            cast(t.c.requires, JSONB).op("@>")(any_(probes)), t.c.stack_id == stack_id))
        for name, requires in found:
            for rid in wanted.intersection(int(i) for i in requires or ()):
                users.setdefault(rid, set()).add(name)
    else:
        # ``resource_requirements``, kept by triggers: ``ix_resource_requirements_required``,
        # then each user by its id. Nothing is asked of the users but their ids (a record only
        # requires records of its own stack): given the stack too, SQLite would rather walk
        # the stack's records and probe the rows of each.
        e = T_REQUIREMENTS
        rows = tx.conn.execute(select(e.c.required_id, t.c.name, t.c.stack_id)
                               .select_from(e.join(t, t.c.id == e.c.record_id))
                               .where(e.c.required_id.in_(sorted(wanted))))
        for rid, name, of_stack in rows:
            if of_stack == stack_id:
                users.setdefault(int(rid), set()).add(name)
    return {rid: tuple(sorted(names)) for rid, names in users.items()}
