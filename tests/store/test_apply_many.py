"""A batch's results written together (``Tx.apply_many``), on both databases: every kind of
change in one call, each fenced by its token. The changes that only let a lease go (an
update's cleanup of each record it keeps: half the nodes of an update) are written by one
statement for them all, and still only where the token is the record's.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from convergence.ports.views import RecordChange
from convergence.store.rows import T_RES
from convergence.store.transactions import Store
from tests.store.conftest import on_database

NAMES = ("kept", "stale", "changed", "gone", "polled", "untouched")


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    yield from on_database(request)


def test_every_kind_of_change_is_fenced_by_its_token(store: Store) -> None:
    with store.begin() as tx:
        tx.insert_stack("s", "t", "s", timeout_mins=None, disable_rollback=True)
        ids = tx.insert_records("s", [(n, "OS::Heat::None") for n in NAMES])
        claimed = tx.claim_records(list(ids.values()), "me", tx.now + 60)
    token = {n: claimed[ids[n]].fencing_token for n in NAMES}
    before = {n: claimed[ids[n]].updated_at for n in NAMES}
    with store.begin() as tx:
        applied = tx.apply_many([
            RecordChange(ids["kept"], token["kept"], {}),
            RecordChange(ids["stale"], token["stale"] - 1, {}),  # its lease was taken over
            RecordChange(ids["changed"], token["changed"], {"physical_id": "p-1"}),
            RecordChange(ids["gone"], token["gone"], {}, delete=True),
            RecordChange(ids["polled"], token["polled"], {}, watch=30.0),
        ])
    assert applied == {ids[n] for n in ("kept", "changed", "gone", "polled")}
    with store.read() as tx:
        rows = {r.name: r for r in tx.records_by_id(ids.values()).values()}
    assert set(rows) == set(NAMES) - {"gone"}
    owners = {n: r.lease_owner for n, r in rows.items()}
    assert owners == {"kept": None, "stale": "me", "changed": None, "polled": None,
                      "untouched": "me"}
    assert rows["changed"].physical_id == "p-1"
    # Letting the lease go is not a change of the resource.
    assert rows["kept"].updated_at == before["kept"]
    assert rows["kept"].fencing_token == token["kept"]


def test_many_records_let_go_at_once_each_only_where_it_is_held(store: Store) -> None:
    with store.begin() as tx:
        tx.insert_stack("s", "t", "s", timeout_mins=None, disable_rollback=True)
        ids = tx.insert_records("s", [(f"r{i}", "OS::Heat::None") for i in range(450)])
        claimed = tx.claim_records(list(ids.values()), "me", tx.now + 60)
    # Every third change carries a token from before a take-over: refused, lease kept.
    changes = [RecordChange(rid, claimed[rid].fencing_token - (i % 3 == 0), {})
               for i, rid in enumerate(sorted(ids.values()))]
    with store.begin() as tx:
        applied = tx.apply_many(changes)
    refused = {c.record_id for i, c in enumerate(changes) if i % 3 == 0}
    assert applied == set(ids.values()) - refused
    with store.read() as tx:
        rows = tx.records_by_id(ids.values())
    assert {rid for rid, r in rows.items() if r.lease_owner == "me"} == refused


def test_many_changes_of_one_shape_are_written_each_with_its_own_values(store: Store) -> None:
    # PostgreSQL sends a shape's rows as one statement (a JSON array read back as a table):
    # every kind of column comes back as written, a JSON null as None, a stale token refused.
    with store.begin() as tx:
        tx.insert_stack("s", "t", "s", timeout_mins=None, disable_rollback=True)
        ids = tx.insert_records("s", [(f"r{i}", "OS::Heat::None") for i in range(30)])
        claimed = tx.claim_records(list(ids.values()), "me", tx.now + 60)
    order = sorted(ids.values())

    def values(i: int) -> dict[str, object]:
        return {"action": "CREATE", "status": "COMPLETE", "status_reason": f"it's \"{i}\"",
                "physical_id": None if i % 4 == 0 else f"p-{i}", "generation": i,
                "properties": {"value": i, "nested": {"list": [i, None, "x"]}, "é": "ü"},
                "attributes": {}, "operation": None, "reference_id": f"ref'{i}"}

    changes = [RecordChange(rid, claimed[rid].fencing_token - (i % 5 == 0), values(i))
               for i, rid in enumerate(order)]
    watched = [RecordChange(rid, claimed[rid].fencing_token,
                            {"operation": {"action": "CREATE", "since": float(i)}},
                            watch=30.0)
               for i, rid in enumerate(order) if i % 5 == 0]
    with store.begin() as tx:
        applied = tx.apply_many(changes)
        now = tx.now
    with store.begin() as tx:
        polled = tx.apply_many(watched)
    assert applied == {rid for i, rid in enumerate(order) if i % 5}
    assert polled == {rid for i, rid in enumerate(order) if i % 5 == 0}
    with store.read() as tx:
        rows = tx.records_by_id(order)
    with store.engine.connect() as connection:
        expires = dict(connection.execute(sa.select(T_RES.c.id, T_RES.c.lease_expires)).all())
    for i, rid in enumerate(order):
        row = rows[rid]
        if i % 5 == 0:  # refused first, then polled: a watch, no other change
            assert (row.action, row.physical_id, row.operation) == (
                "INIT", None, {"action": "CREATE", "since": float(i)})
            assert row.lease_owner is None and expires[rid] == pytest.approx(now + 30.0, abs=5)
            continue
        expected = values(i)
        got = {k: getattr(row, k) for k in expected}
        assert got == expected
        assert row.lease_owner is None and expires[rid] is None
        assert row.updated_at == now


def test_records_made_at_once_start_as_never_created_with_their_policies(store: Store) -> None:
    # PostgreSQL sends the new records' rows as one JSON parameter, in pieces of 5,000.
    items = [(f"r{i}", "OS::Heat::None" if i % 2 else "OS::Nova::Server") for i in range(5003)]
    policies = {"r1": "Retain", "r2": "Snapshot", "r5002": "Delete"}
    with store.begin() as tx:
        tx.insert_stack("s", "t", "s", timeout_mins=None, disable_rollback=True)
        ids = tx.insert_records("s", items, policies)
        now = tx.now
    assert set(ids) == {name for name, _ in items}
    assert [ids[name] for name, _ in items] == sorted(ids.values())  # ids in the items' order
    with store.read() as tx:
        rows = tx.records_by_id(ids.values())
    for name, rtype in items:
        row = rows[ids[name]]
        assert (row.stack_id, row.name, row.type, row.action, row.status, row.status_reason,
                row.generation, row.requires, dict(row.properties), dict(row.attributes),
                row.operation, row.fencing_token, row.lease_owner, row.deletion_policy,
                row.created_at, row.updated_at) == (
            "s", name, rtype, "INIT", "COMPLETE", "", 0, (), {}, {}, None, 0, None,
            policies.get(name), now, now)
