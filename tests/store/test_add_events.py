"""A batch's events recorded together (``Tx.add_events``), on both databases: every event as
it was given, in its order (ids are handed out in it, and id order is the ledger's), across
the pieces a large batch is sent in. On PostgreSQL the rows travel as one JSON parameter.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from convergence.ports.views import NewEvent
from convergence.store.transactions import Store
from tests.store.conftest import on_database


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    yield from on_database(request)


def test_events_are_recorded_as_given_in_their_order(store: Store) -> None:
    given = [NewEvent(f"r{(i * 7919) % 2500}", None if i % 3 == 0 else f"p-'{i}'\"",
                      "OS::Heat::None", ("CREATE", "UPDATE", "DELETE")[i % 3],
                      ("IN_PROGRESS", "COMPLETE", "FAILED")[i % 2 + (i % 7 == 0)],
                      "" if i % 2 else f"Résumé {i}: \\ \n \u2603")
             for i in range(2500)]  # three pieces of up to 1,000
    with store.begin() as tx:
        tx.insert_stack("s", "t", "s", timeout_mins=None, disable_rollback=True)
        tx.add_events("s", "trav-1", 4, given[:1])
        tx.add_events("s", "trav-1", 4, given[1:])
        now = tx.now
    with store.read() as tx:
        read = tx.events("s")
    assert [(e.resource_name, e.physical_resource_id, e.resource_type, e.action, e.status,
             e.reason) for e in read] == [
        (e.resource_name, e.physical_resource_id, e.resource_type, e.action, e.status,
         e.reason) for e in given]
    assert [e.id for e in read] == sorted(e.id for e in read)
    assert {(e.stack_id, e.generation, e.created_at) for e in read} == {("s", 4, now)}
