"""Entity tables on SQLAlchemy: the store's side of ``convergence.ports.entity_tables``.

Callers: ``convergence.runtime`` hands :class:`SqlEntityTables` to every plugin (through
``PluginHost``); a plugin's backend asks it for its table by name
(``convergence.plugins.heat.test_backend``: ``test_entities``, OS::Heat::TestResource's
backend). The tables are declared in ``store/models.py`` like every other, each created by a
migration of its own (``test_entities``: 0012), apart from the engine's tables.

Each call is one transaction; a guard runs inside it, with the connection in hand, right
before the statement, so that nothing but the statement stands between the caller's last check
and the change. A database that cannot be reached raises
:class:`~convergence.ports.entity_tables.TableUnavailable` (see ``store/errors.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar, cast

from sqlalchemy import Engine, Table, func, insert, select, update

from convergence.ports.entity_tables import Guard, TableUnavailable
from convergence.store.errors import unreachable
from convergence.store.models import TestEntityRow

P = ParamSpec("P")
R = TypeVar("R")

# The entity tables this store keeps for plugin backends, by name.
_TABLES: dict[str, Table] = {"test_entities": cast(Table, TestEntityRow.__table__)}


def _call(guard: Guard | None) -> None:
    if guard is not None:
        guard()


def _storage(call: Callable[P, R]) -> Callable[P, R]:
    """The database unreachable is the table's storage unavailable: a transient error."""
    @functools.wraps(call)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return call(*args, **kwargs)
        except Exception as exc:
            if unreachable(exc):
                raise TableUnavailable(type(exc).__name__) from exc
            raise
    return wrapped


class SqlEntityTables:
    """The entity tables of one database."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def table(self, name: str) -> SqlEntityTable | None:
        table = _TABLES.get(name)
        return None if table is None else SqlEntityTable(self._engine, table)


class SqlEntityTable:
    """One entity table (``id``, ``owner``, ``value``, ``created_at``, ``deleted_at``)."""

    def __init__(self, engine: Engine, table: Table) -> None:
        self._engine = engine
        self._t = table

    @_storage
    def find(self, owner: str) -> tuple[str, str] | None:
        t = self._t
        with self._engine.begin() as conn:
            row = conn.execute(select(t.c.id, t.c.value).where(
                t.c.owner == owner, t.c.deleted_at.is_(None))).first()
        return (row.id, row.value) if row is not None else None

    @_storage
    def insert(self, entity_id: str, owner: str, value: str, created_at: float, *,
               guard: Guard | None = None) -> None:
        with self._engine.begin() as conn:
            _call(guard)
            conn.execute(insert(self._t).values(id=entity_id, owner=owner, value=value,
                                                created_at=created_at))

    @_storage
    def set_value(self, entity_id: str, value: str, *, guard: Guard | None = None) -> bool:
        t = self._t
        with self._engine.begin() as conn:
            _call(guard)
            result = conn.execute(update(t).where(t.c.id == entity_id, t.c.deleted_at.is_(None))
                                  .values(value=value))
        return result.rowcount == 1

    @_storage
    def mark_deleted(self, entity_id: str, deleted_at: float, *,
                     guard: Guard | None = None) -> None:
        t = self._t
        with self._engine.begin() as conn:
            _call(guard)
            conn.execute(update(t).where(t.c.id == entity_id, t.c.deleted_at.is_(None))
                         .values(deleted_at=deleted_at))

    @_storage
    def value(self, entity_id: str) -> str | None:
        t = self._t
        with self._engine.begin() as conn:
            row = conn.execute(select(t.c.value).where(
                t.c.id == entity_id, t.c.deleted_at.is_(None))).first()
        return row.value if row is not None else None

    @_storage
    def live(self) -> dict[str, tuple[str, str]]:
        t = self._t
        with self._engine.begin() as conn:
            rows = conn.execute(select(t.c.id, t.c.owner, t.c.value)
                                .where(t.c.deleted_at.is_(None)))
            return {r.id: (r.owner, r.value) for r in rows}

    @_storage
    def count(self, *, owner: str | None = None, owner_prefix: str | None = None) -> int:
        t = self._t
        query = select(func.count()).select_from(t)
        if owner is not None:
            query = query.where(t.c.owner == owner)
        if owner_prefix is not None:
            query = query.where(t.c.owner.startswith(owner_prefix))
        with self._engine.begin() as conn:
            return int(conn.execute(query).scalar_one())
