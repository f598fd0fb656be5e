"""An in-memory backend for ``OS::Heat::TestResource``: the :class:`TestEntities` twin.

The table-backed backend (``test_backend.py``, table ``test_entities``) serves real
deployments; this one serves unit tests of plugins and of the engine, which build a
:class:`PluginContext` with it in ``backends["test_entities"]``. Besides the protocol it
records how many entities were ever created per owner, so a test can tell an adopted entity
from a duplicate one, and a leak from a clean delete.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter

from convergence.ports.entity_tables import Guard


class MemoryTestEntities:
    """Entities in a dict, safe to share between the threads of a test's workers."""

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[str, tuple[str, str]] = {}  # id -> (owner, value), in creation order
        self._created: Counter[str] = Counter()

    def find(self, owner: str) -> tuple[str, str] | None:
        """The live entity of ``owner`` as (id, value); the oldest if a bug made several."""
        with self._lock:
            for entity_id, (entity_owner, value) in self._live.items():
                if entity_owner == owner:
                    return entity_id, value
        return None

    def create(self, owner: str, value: str, *, guard: Guard | None = None) -> str:
        # Like a cloud API, creating never looks for an existing entity: adopting one is the
        # caller's job, and created_count is how tests catch a caller that forgot.
        entity_id = str(uuid.uuid4())
        with self._lock:
            if guard is not None:
                guard()
            self._live[entity_id] = (owner, value)
            self._created[owner] += 1
        return entity_id

    def update(self, entity_id: str, value: str, *, guard: Guard | None = None) -> None:
        """Set the value of a live entity; KeyError if there is none with this id."""
        with self._lock:
            if guard is not None:
                guard()
            owner, _ = self._live[entity_id]
            self._live[entity_id] = (owner, value)

    def delete(self, entity_id: str, *, guard: Guard | None = None) -> None:
        """Remove an entity; removing one that is already gone is not an error."""
        with self._lock:
            if guard is not None:
                guard()
            self._live.pop(entity_id, None)

    def get(self, entity_id: str) -> str | None:
        with self._lock:
            entity = self._live.get(entity_id)
        return None if entity is None else entity[1]

    # Inspection helpers for tests.

    def live(self) -> dict[str, tuple[str, str]]:
        """A snapshot of the live entities: id -> (owner, value)."""
        with self._lock:
            return dict(self._live)

    def created_count(self, owner: str) -> int:
        """How many entities were ever created for ``owner``, deleted ones included."""
        with self._lock:
            return self._created[owner]
