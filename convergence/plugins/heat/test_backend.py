"""OS::Heat::TestResource's backend: what the resource "creates", shared by every worker.

The plugin (``test_resource.py``) declares this backend under :data:`TEST_ENTITIES`; the
registry builds it once per runtime with :func:`build`, from the store's ``test_entities``
table (``convergence.ports.entity_tables``; its own migration, 0012), and the plugin finds it
in ``ctx.backends``. Kept apart from the engine's tables so that tests can count what really
exists: an entity created twice or left behind is a visible bug. Unit tests use the in-memory
twin instead (``test_entities.MemoryTestEntities``); tests and tools inspect this one through
``registry.backends[TEST_ENTITIES]``.

``CONVERGENCE_TEST_BACKEND_LATENCY``: seconds each change takes to answer after it took effect
(a slow cloud API; default 0), read once when the backend is built. It is the window in which
a crash leaves a change the engine never heard of (the fault tests and the soak set it).

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
from typing import ParamSpec, Protocol, TypeVar

from convergence.plugins.base import PluginHost, RetryLater
from convergence.ports.entity_tables import EntityTable, Guard, TableUnavailable

# The backend's name in ``ctx.backends``, and its table's in the store.
TEST_ENTITIES = "test_entities"
LATENCY_VARIABLE = "CONVERGENCE_TEST_BACKEND_LATENCY"
OUTAGE_RETRY_SECONDS = 2.0

P = ParamSpec("P")
R = TypeVar("R")


class TestEntities(Protocol):
    """The backend of OS::Heat::TestResource: entities keyed by id, owned by a record."""

    def find(self, owner: str) -> tuple[str, str] | None:
        """The live entity of ``owner`` as (id, value), if any."""
        ...

    # ``guard``: called right before the change is made (it raises to prevent it): the
    # engine's lease check, as close to the change as the backend can put it.
    def create(self, owner: str, value: str, *, guard: Guard | None = None) -> str: ...

    def update(self, entity_id: str, value: str, *, guard: Guard | None = None) -> None: ...

    def delete(self, entity_id: str, *, guard: Guard | None = None) -> None: ...

    def get(self, entity_id: str) -> str | None:
        """The value of a live entity, or None when it does not exist."""
        ...


def build(host: PluginHost) -> TableTestEntities | None:
    """The backend on the host's ``test_entities`` table; None if its store keeps none."""
    table = None if host.entity_tables is None else host.entity_tables.table(TEST_ENTITIES)
    if table is None:
        return None
    latency = float(host.environ.get(LATENCY_VARIABLE) or 0.0)
    return TableTestEntities(table, host.now, latency)


def _api(call: Callable[P, R]) -> Callable[P, R]:
    """A call of the backend's API: its table unavailable is what a cloud API that does not
    answer is, a transient error to retry (the engine calls again; creates adopt)."""
    @functools.wraps(call)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return call(*args, **kwargs)
        except TableUnavailable as exc:
            raise RetryLater(f"the test entity backend did not answer ({exc})",
                             OUTAGE_RETRY_SECONDS) from exc
    return wrapped


class TableTestEntities:
    """:class:`TestEntities` on an entity table: one transaction per call."""

    __test__ = False  # not a pytest test class

    def __init__(self, table: EntityTable, now: Callable[[], float] = time.time,
                 latency: float = 0.0) -> None:
        self._table = table
        self._now = now
        # A slow API: each change is committed at once and answered this many seconds later,
        # which is the window in which a crash leaves a change the engine never heard of.
        self.latency = latency

    def _answer(self) -> None:
        if self.latency > 0:
            time.sleep(self.latency)

    @_api
    def find(self, owner: str) -> tuple[str, str] | None:
        return self._table.find(owner)

    @_api
    def create(self, owner: str, value: str, *, guard: Guard | None = None) -> str:
        entity_id = str(uuid.uuid4())
        self._table.insert(entity_id, owner, value, self._now(), guard=guard)
        self._answer()
        return entity_id

    @_api
    def update(self, entity_id: str, value: str, *, guard: Guard | None = None) -> None:
        found = self._table.set_value(entity_id, value, guard=guard)
        self._answer()
        if not found:
            raise KeyError(entity_id)

    @_api
    def delete(self, entity_id: str, *, guard: Guard | None = None) -> None:
        self._table.mark_deleted(entity_id, self._now(), guard=guard)
        self._answer()

    @_api
    def get(self, entity_id: str) -> str | None:
        return self._table.value(entity_id)

    # inspection, for tests and tools ------------------------------------------------------
    def live(self) -> dict[str, tuple[str, str]]:
        """The live entities: id -> (owner, value)."""
        return self._table.live()

    def created_count_prefix(self, prefix: str) -> int:
        """How many entities were ever created by owners under ``prefix`` (a stack)."""
        return self._table.count(owner_prefix=prefix)

    def created_count(self, owner: str | None = None) -> int:
        """How many entities were ever created (for ``owner``), deleted ones included."""
        return self._table.count(owner=owner)
