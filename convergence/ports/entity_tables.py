"""Entity tables: the store's storage for plugin backends, as the plugins see it.

A plugin that keeps what it "makes" in the deployment's own database (a backend standing for a
cloud API, as ``OS::Heat::TestResource``'s does) gets an :class:`EntityTable` by name from the
:class:`EntityTables` the runtime hands every plugin (``PluginHost.entity_tables``,
``convergence.plugins.base``). An entity has an id, the owner it was made for (a resource
record's owner key), a value, and when it was made and deleted: deleting keeps the row, so
that what was ever made can be counted.

Implemented by ``convergence.store.entity_tables`` (SQLAlchemy; each table comes from a
migration of its own); used by the plugins' backends (``convergence.plugins.heat.test_backend``).
Each call is one transaction. A ``guard`` is called inside it, right before the change (it
raises to prevent it): the engine's lease check, as close to the change as storage can put it.
Storage that does not answer raises :class:`TableUnavailable`, which a backend turns into what
a cloud API that does not answer means to the engine (``RetryLater``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

Guard = Callable[[], None]


class TableUnavailable(Exception):
    """The table's storage could not be reached (or dropped the connection): transient."""


class EntityTable(Protocol):
    """One table of entities owned by resource records."""

    def find(self, owner: str) -> tuple[str, str] | None:
        """A live entity of ``owner`` as (id, value), if any."""
        ...

    def insert(self, entity_id: str, owner: str, value: str, created_at: float, *,
               guard: Guard | None = None) -> None: ...

    def set_value(self, entity_id: str, value: str, *, guard: Guard | None = None) -> bool:
        """Set the value of a live entity; False when there is none with this id."""
        ...

    def mark_deleted(self, entity_id: str, deleted_at: float, *,
                     guard: Guard | None = None) -> None:
        """Delete a live entity (one already deleted or unknown: nothing happens)."""
        ...

    def value(self, entity_id: str) -> str | None:
        """The value of a live entity, or None when it does not exist."""
        ...

    def live(self) -> dict[str, tuple[str, str]]:
        """Every live entity: id -> (owner, value)."""
        ...

    def count(self, *, owner: str | None = None, owner_prefix: str | None = None) -> int:
        """How many entities were ever made (deleted ones included), of ``owner`` or of the
        owners starting with ``owner_prefix`` if given."""
        ...


class EntityTables(Protocol):
    """The entity tables a store keeps for plugin backends."""

    def table(self, name: str) -> EntityTable | None:
        """The table called ``name``; None when this store keeps no such table."""
        ...
