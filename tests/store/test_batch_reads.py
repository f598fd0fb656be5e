"""What a batch reads first (``Tx.traversal_and_stack``) leaves the stack's outputs out, on
both databases: a group's nested stack keeps a list of its members there (its ``refs``, its
``attributes``), and each batch of the group's update or delete decoding it made their cost
grow with the square of the group's size. The stack's own read still has them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from convergence.store.transactions import Store
from tests.store.conftest import on_database

MEMBERS = 500


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    yield from on_database(request)


def test_a_batch_reads_the_stack_without_its_outputs(store: Store) -> None:
    refs = [f"member-{i}" for i in range(MEMBERS)]
    with store.begin() as tx:
        tx.insert_stack("child", "t", "child", timeout_mins=None, disable_rollback=True)
        trav = tx.insert_traversal("child", 2, "UPDATE", None, None)
        tx.update_stack("child", traversal_id=trav, generation=2, action="UPDATE",
                        status="IN_PROGRESS", outputs={"refs": refs})
    with store.read() as tx:
        traversal, stack = tx.traversal_and_stack(trav)
        whole = tx.stack("child")
    assert traversal is not None and traversal.id == trav and traversal.action == "UPDATE"
    assert stack is not None and whole is not None
    assert (stack.id, stack.traversal_id, stack.generation, stack.stack_status) == \
        ("child", trav, 2, "UPDATE_IN_PROGRESS")
    assert stack.outputs == {}
    assert whole.outputs == {"refs": refs}
    with store.read() as tx:
        assert tx.traversal_and_stack("no-such-traversal") == (None, None)
