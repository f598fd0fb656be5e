"""Ended plans are deleted a bounded number of node rows at a time: a plan of a million nodes
goes over several sweeps in short transactions, and its traversal is marked
purged only once none is left.

A real stack created on SQLite, its traversal's node rows read back after each purge.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from convergence.runtime import Runtime, open_runtime
from convergence.services import running, stacks
from convergence.settings import Settings
from tests.engine.harness import TENANT, res, template


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    runtime = open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}"))
    yield runtime
    runtime.store.engine.dispose()


def test_a_plan_is_purged_in_bounded_steps(rt: Runtime) -> None:
    stack = stacks.create_stack(rt, TENANT, "s", template(
        {f"r{i}": res(f"v{i}") for i in range(7)}))
    stack = running.wait_for_stack(rt, TENANT, stack.id)
    assert stack.stack_status == "CREATE_COMPLETE"
    trav = stack.traversal_id
    assert trav is not None
    left = []
    for _ in range(4):
        with rt.store.begin() as tx:
            purged = tx.purge_nodes(tx.now + 1.0, 10, rows=3)
            counts = tx.node_states(trav)
            found = tx.traversal(trav)
        assert found is not None
        left.append((purged, sum(counts.values()), found.nodes_total))
    # 7 nodes: 3, 3, then the last one (and the plan marked purged), then nothing to do.
    assert left == [(3, 4, 7), (3, 1, 7), (1, 0, 0), (0, 0, 0)]
