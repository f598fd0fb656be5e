"""What a batch reads first (``Tx.traversal_and_stack``) leaves the stack's outputs out, on
both databases: a group's nested stack keeps a list of its members there (its ``refs``, its
``attributes``), and each batch of the group's update or delete decoding it made their cost
grow with the square of the group's size. The stack's own read still has them, and leaves
them out when asked (``outputs=False``, the engine's reads). The outputs' read of records
(``Tx.head_values``) carries only what a template reads of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from convergence.ports.views import RecordChange
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


def test_a_stack_read_without_its_outputs_has_the_rest_of_the_row(store: Store) -> None:
    refs = [f"member-{i}" for i in range(MEMBERS)]
    with store.begin() as tx:
        tx.insert_stack("child", "t", "child", timeout_mins=7, disable_rollback=True)
        tx.update_stack("child", generation=3, action="UPDATE", status="COMPLETE",
                        outputs={"refs": refs})
    with store.begin() as tx:  # locked too (FOR NO KEY UPDATE on PostgreSQL)
        bare, locked = tx.stack("child", outputs=False), tx.stack("child", lock=True,
                                                                   outputs=False)
        whole = tx.stack("child")
    assert bare is not None and locked is not None and whole is not None
    assert bare.outputs == {} and locked.outputs == {}
    assert whole.outputs == {"refs": refs}
    assert bare == locked == dataclasses.replace(whole, outputs={})
    with store.read() as tx:
        assert tx.stack("nope", outputs=False) is None


def test_what_outputs_read_of_records_is_what_their_heads_say(store: Store) -> None:
    names = [f"m{i}" for i in range(MEMBERS)]
    with store.begin() as tx:
        tx.insert_stack("s", "t", "s", timeout_mins=None, disable_rollback=True)
        ids = tx.insert_records("s", [(n, "OS::Heat::None") for n in names])
        claimed = tx.claim_records(list(ids.values()), "me", tx.now + 60)
        tx.apply_many([RecordChange(ids[n], claimed[ids[n]].fencing_token, {
            "action": "CREATE", "status": "COMPLETE", "physical_id": f"p-{n}",
            "reference_id": f"ref-{n}" if i % 2 else None, "attributes": {"out": n},
            "properties": {"value": "x" * 100}}) for i, n in enumerate(names)])
        # m0 replaced: a newer record of the name, being created.
        old = tx.records_by_id([ids["m0"]])[ids["m0"]]
        assert tx.insert_replacement(old, old.fencing_token, "OS::Heat::None") is not None
    with store.read() as tx:
        wanted = [*names, "not-there"]
        heads, values = tx.heads("s", wanted), tx.head_values("s", wanted)
    assert sorted(values) == sorted(heads) == sorted(names)
    for name, head in heads.items():
        got = values[name]
        assert (got.name, got.action, got.physical_id, got.reference_id, got.attributes) == \
            (head.name, head.action, head.physical_id, head.reference_id, head.attributes)
    assert values["m1"].reference_id == "ref-m1" and values["m2"].reference_id is None
    assert values["m1"].attributes == {"out": "m1"} and values["m1"].physical_id == "p-m1"
