"""OS::Heat::TestResource's backend in the database, shared by every worker process.

Kept in a table of its own (``test_entities``), apart from the engine's tables, so that tests
can count what really exists: an entity created twice or left behind is a visible bug.

It stands for a cloud API without client tokens, as OpenStack's are: ``create`` makes what it
is told, every time, and never looks for the owner's entity first (nor does its in-memory
twin). Finding and adopting what an interrupted attempt made is the plugin's job (by the
owner key, before it creates), and what a step made after its lease was taken over is the
engine's to remove (orphans). So the find-then-create of a plugin is racy here as it is in a
real cloud: a worker frozen between its INSERT and its COMMIT while the resource's new holder
looks makes a second entity. The engine must and does end with one (its refused result names
it: an orphan, removed by the sweeper), and the tests and the soak, which measure the engine
against this backend, must see that race rather than have the backend hide it. A create made
idempotent by the owner key (a unique index on live entities: it was tried, and reverted) would
also hide an engine that forgot to adopt: ``created_count`` would stop counting its duplicates.
The leak its soak was reverted for was not its doing: a delete that waited finished without
looking for what a lost step made meanwhile, under either create (fixed in the plugin's
``poll``; ``test_a_delete_that_waited_removes_what_a_lost_step_made_meanwhile``).
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable
from typing import ParamSpec, TypeVar, cast

from sqlalchemy import Engine, Table, insert, select, update

from convergence.plugins.base import Guard, RetryLater
from convergence.store.errors import unreachable
from convergence.store.models import TestEntityRow

P = ParamSpec("P")
R = TypeVar("R")
OUTAGE_RETRY_SECONDS = 2.0

T = cast(Table, TestEntityRow.__table__)


def _call(guard: Guard | None) -> None:
    """The caller's last check, inside the transaction, with its connection in hand: nothing
    but the statement itself stands between it and the change."""
    if guard is not None:
        guard()


def _api(call: Callable[P, R]) -> Callable[P, R]:
    """A call of the backend's API: its database unreachable is what a cloud API that does
    not answer is, a transient error to retry (the engine calls again; creates adopt)."""
    @functools.wraps(call)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return call(*args, **kwargs)
        except Exception as exc:
            if unreachable(exc):
                raise RetryLater(f"the test entity backend did not answer "
                                 f"({type(exc).__name__})", OUTAGE_RETRY_SECONDS) from exc
            raise
    return wrapped


class SqlTestEntities:
    __test__ = False

    def __init__(self, engine: Engine, now: Callable[[], float] = time.time,
                 latency: float = 0.0) -> None:
        self._engine = engine
        self._now = now
        # A slow API: each change is committed at once and answered this many seconds later,
        # which is the window in which a crash leaves a change the engine never heard of.
        self._latency = latency

    def _answer(self) -> None:
        if self._latency > 0:
            time.sleep(self._latency)

    @_api
    def find(self, owner: str) -> tuple[str, str] | None:
        with self._engine.begin() as conn:
            row = conn.execute(select(T.c.id, T.c.value).where(
                T.c.owner == owner, T.c.deleted_at.is_(None))).first()
        return (row.id, row.value) if row is not None else None

    @_api
    def create(self, owner: str, value: str, *, guard: Guard | None = None) -> str:
        entity_id = str(uuid.uuid4())
        with self._engine.begin() as conn:
            _call(guard)
            conn.execute(insert(T).values(id=entity_id, owner=owner, value=value,
                                          created_at=self._now()))
        self._answer()
        return entity_id

    @_api
    def update(self, entity_id: str, value: str, *, guard: Guard | None = None) -> None:
        with self._engine.begin() as conn:
            _call(guard)
            result = conn.execute(update(T).where(T.c.id == entity_id, T.c.deleted_at.is_(None))
                                  .values(value=value))
        self._answer()
        if result.rowcount != 1:
            raise KeyError(entity_id)

    @_api
    def delete(self, entity_id: str, *, guard: Guard | None = None) -> None:
        with self._engine.begin() as conn:
            _call(guard)
            conn.execute(update(T).where(T.c.id == entity_id, T.c.deleted_at.is_(None))
                         .values(deleted_at=self._now()))
        self._answer()

    @_api
    def get(self, entity_id: str) -> str | None:
        with self._engine.begin() as conn:
            row = conn.execute(select(T.c.value).where(
                T.c.id == entity_id, T.c.deleted_at.is_(None))).first()
        return row.value if row is not None else None

    # inspection, for tests and tools ------------------------------------------------------
    def live(self) -> dict[str, tuple[str, str]]:
        with self._engine.begin() as conn:
            rows = conn.execute(select(T.c.id, T.c.owner, T.c.value)
                                .where(T.c.deleted_at.is_(None)))
            return {r.id: (r.owner, r.value) for r in rows}

    def created_count_prefix(self, prefix: str) -> int:
        """How many entities were ever created by owners under ``prefix`` (a stack)."""
        with self._engine.begin() as conn:
            return len(conn.execute(select(T.c.id).where(T.c.owner.startswith(prefix))).all())

    def created_count(self, owner: str | None = None) -> int:
        with self._engine.begin() as conn:
            query = select(T.c.id)
            if owner is not None:
                query = query.where(T.c.owner == owner)
            return len(conn.execute(query).all())
