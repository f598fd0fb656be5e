"""A plan with nothing to do, on PostgreSQL: the delete of a stack whose create was never
planned (superseded, or its API died before sending the plan) has no records, so no nodes.
Plans are written with COPY there, which must not be handed an empty body (it reads an empty
line as a row, and the plan failed on every retry: the stack stayed DELETE_IN_PROGRESS)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from convergence.engine.engine import Engine
from convergence.engine.traversals import begin_traversal
from convergence.plugins.registry import PluginRegistry
from convergence.ports.views import RUNNING
from convergence.ports.work import FINISH, Work
from convergence.store.db import make_engine
from convergence.store.migrate import upgrade
from convergence.store.transactions import Store
from tests.conftest_services import postgres_url, require_postgres, reset_postgres_schema

PG_DATABASE = "convergence_test_empty_plan"


@pytest.fixture
def store() -> Iterator[Store]:
    require_postgres()
    url = postgres_url(PG_DATABASE)
    reset_postgres_schema(url)
    upgrade(url)
    engine = make_engine(url)
    yield Store(engine)
    engine.dispose()


def test_a_delete_with_nothing_to_delete_is_planned(store: Store) -> None:
    with store.begin() as tx:
        tx.insert_stack("s1", "t", "s1", timeout_mins=None, disable_rollback=True)
        stack = tx.stack("s1")
        assert stack is not None
        traversal_id = begin_traversal(tx, stack, "DELETE", None)
    engine = Engine(store, PluginRegistry.from_entry_points())
    assert engine.plan(traversal_id) == [Work(FINISH, traversal_id)]
    with store.begin() as tx:
        trav = tx.traversal(traversal_id)
        assert trav is not None and trav.state == RUNNING and trav.nodes_total == 0
    engine.finish(traversal_id)
    with store.begin() as tx:
        stack = tx.stack("s1")
        assert stack is not None and stack.stack_status == "DELETE_COMPLETE"
