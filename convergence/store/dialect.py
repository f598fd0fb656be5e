"""What differs between PostgreSQL and SQLite, in one place: the rest of the store is one code.

Callers: the store's aggregate modules, whenever a statement has to be written differently for
one database: an insert that ignores an existing key, row locks (PostgreSQL's; SQLite locks the
whole database at ``BEGIN IMMEDIATE``, so a writer never needs them), bulk loading by ``COPY``,
the shape of a query that must walk an index led by the stack id, the index that answers
``required_by``, and how each database names a refused unique key or a transient failure.
(The connection itself is configured in ``store/db.py``; the schema's variants are in
``store/models.py`` and the migrations.)
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    Table,
    Text,
    any_,
    bindparam,
    cast,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.dialects.postgresql import array as pg_array
from sqlalchemy.exc import DBAPIError, IntegrityError

from convergence.store.rows import T_REQUIREMENTS, T_RES, keyed

S = TypeVar("S", bound=Select[Any])
T = TypeVar("T")


def is_postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def insert_or_ignore(conn: Connection, table: Table, key: str, values: Mapping[str, Any]) -> bool:
    """Insert a row unless one with its ``key`` exists (then nothing happens, rather than a
    failure on the key); whether it was inserted."""
    dialect = postgresql if is_postgres(conn) else sqlite
    inserted = conn.execute(dialect.insert(table).values(**values)
                            .on_conflict_do_nothing(index_elements=[key]))
    return inserted.rowcount == 1


def locks_rows(conn: Connection) -> bool:
    """Whether a transaction must lock the rows it is about to change (PostgreSQL). SQLite
    runs one writing transaction at a time: its rows need no locks."""
    return is_postgres(conn)


def lock_no_key(conn: Connection, query: S) -> S:
    """The query's rows locked FOR NO KEY UPDATE (on PostgreSQL): it queues writers of the
    rows, but not the foreign-key checks of rows that refer to them (a FOR UPDATE there
    deadlocks with a step whose writes re-check its records' key to the stack while the locker
    waits for its traversal)."""
    return query.with_for_update(key_share=True) if locks_rows(conn) else query


def lock(conn: Connection, query: S) -> S:
    """The query's rows locked FOR UPDATE (on PostgreSQL)."""
    return query.with_for_update() if locks_rows(conn) else query


def lock_unless_locked(conn: Connection, query: S, of: Table) -> S:
    """The query's rows of ``of`` locked FOR NO KEY UPDATE, skipping the rows someone else
    holds locked (on PostgreSQL: a planner holds its traversal's row while it plans)."""
    if not locks_rows(conn):
        return query
    return query.with_for_update(of=of, skip_locked=True, key_share=True)


def copy_text(value: str) -> str:
    """A value in COPY's text format."""
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n") \
        .replace("\r", "\\r")


def bulk_insert(conn: Connection, table: Table, items: Sequence[T], columns: Sequence[str], *,
                row: Callable[[T], Mapping[str, Any]], line: Callable[[T], str],
                batch: int = 1000) -> None:
    """Insert many rows: on PostgreSQL with COPY, in one round trip (several times faster
    than multi-row INSERTs for a 10,000-resource plan), each item written by ``line`` (COPY's
    text format, ``columns`` in order, strings escaped by :func:`copy_text`); elsewhere
    ``batch`` rows per INSERT, each item made a row by ``row``."""
    if not items:  # COPY would read an empty line as a row
        return
    if not is_postgres(conn):
        for start in range(0, len(items), batch):
            conn.execute(table.insert(), [row(item) for item in items[start:start + batch]])
        return
    data = io.StringIO("\n".join(map(line, items)) + "\n")
    raw = conn.connection.dbapi_connection
    assert raw is not None
    cur = raw.cursor()
    try:
        cur.copy_expert(f"COPY {table.name} ({', '.join(columns)}) FROM STDIN", data)
    finally:
        cur.close()


def led_by(conn: Connection, column: ColumnElement[Any],
           value: Any) -> tuple[ColumnElement[bool], tuple[ColumnElement[Any], ...]]:
    """The condition ``column = value``, and the order keys to put before the others so that
    the database reads the rows along an index led by ``column`` (a stack's events along
    ``ix_events_stack``, ``ix_events_stack_resource``, ...), from the marker on.

    PostgreSQL, given ``stack_id = x ... ORDER BY id LIMIT n``, may walk the primary key and
    filter instead: its estimate assumes a big stack's events are spread evenly along the ids,
    but the newest events of a stack that went quiet lie behind every other stack's since (a
    stack with 100,000 events among 1,000,000: 900,000 rows walked for a page of 100). Written
    ``stack_id = ANY(ARRAY[x]) ... ORDER BY stack_id, id``, the order is one only an index led
    by ``stack_id`` gives (an ``= ANY`` does not make ``stack_id`` a constant of the order, as
    ``=`` does), and the index still seeks to the stack and the marker. SQLite picks the index
    by itself."""
    if not is_postgres(conn):
        return column == value, ()
    return column == any_(pg_array([value])), (column,)


def required_by(conn: Connection, stack_id: str, ids: Sequence[int]) -> dict[int, set[str]]:
    """The names of the stack's records whose ``requires`` holds each of ``ids`` (records of
    the stack), each read through an index: on PostgreSQL ``ix_resources_requires``, a GIN
    index on ``requires`` as ``jsonb`` (one look-up per page); on SQLite, which cannot index
    the elements of a JSON list, ``resource_requirements``, the lists as rows, kept by
    triggers (``models.RequirementRow``), by ``ix_resource_requirements_required``."""
    wanted = set(ids)
    users: dict[int, set[str]] = {}
    t = T_RES
    if is_postgres(conn):
        # ``ix_resources_requires``: each probe ``[id]`` is looked up in the GIN index.
        probes = cast(bindparam("probes", [json.dumps([i]) for i in wanted],
                                type_=ARRAY(Text)), ARRAY(JSONB))
        found = conn.execute(select(t.c.name, t.c.requires).where(
            cast(t.c.requires, JSONB).op("@>")(any_(probes)), keyed(t.c.stack_id, stack_id)))
        for name, requires in found:
            for rid in wanted.intersection(int(i) for i in requires or ()):
                users.setdefault(rid, set()).add(name)
    else:
        # ``resource_requirements``, kept by triggers: ``ix_resource_requirements_required``,
        # then each user by its id. Nothing is asked of the users but their ids (a record only
        # requires records of its own stack): given the stack too, SQLite would rather walk
        # the stack's records and probe the rows of each.
        e = T_REQUIREMENTS
        rows = conn.execute(select(e.c.required_id, t.c.name, t.c.stack_id)
                            .select_from(e.join(t, t.c.id == e.c.record_id))
                            .where(e.c.required_id.in_(sorted(wanted))))
        for rid, name, of_stack in rows:
            if of_stack == stack_id:
                users.setdefault(int(rid), set()).add(name)
    return users


def name_taken(exc: IntegrityError) -> bool:
    """Whether ``exc`` is the unique index on live stack names refusing a second one."""
    diag = getattr(exc.orig, "diag", None)
    if diag is not None:  # PostgreSQL names the constraint
        return getattr(diag, "constraint_name", None) == "ix_stacks_tenant_live_name"
    return "stacks.tenant, stacks.name" in str(exc.orig)  # SQLite names the columns


def transient(exc: DBAPIError) -> bool:
    """A deadlock victim or a serialization failure (PostgreSQL's 40P01 and 40001)."""
    return getattr(exc.orig, "pgcode", None) in ("40P01", "40001")
