"""Leases and fencing on resource records: a writer whose lease was taken over is refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from convergence.ports.clock import ManualClock
from convergence.ports.views import RecordChange
from convergence.store.db import make_engine
from convergence.store.migrate import ensure_schema
from convergence.store.transactions import Store


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> Iterator[Store]:
    engine = make_engine("sqlite:///:memory:")
    ensure_schema(engine)
    yield Store(engine, clock.now)
    engine.dispose()


@pytest.fixture
def record(store: Store) -> int:
    with store.begin() as tx:
        tx.insert_stack("s1", "t", "stack", timeout_mins=None, disable_rollback=True)
        return tx.insert_records("s1", [("web", "OS::Heat::None")])["web"]


def test_a_held_lease_cannot_be_claimed(store: Store, record: int) -> None:
    with store.begin() as tx:
        first = tx.claim_records([record], "worker-a", tx.now + 30)
        second = tx.claim_records([record], "worker-b", tx.now + 30)
    assert record in first and second == {}


def test_an_expired_lease_is_taken_over_and_the_late_writer_is_refused(
        store: Store, record: int, clock: ManualClock) -> None:
    with store.begin() as tx:
        token_a = tx.claim_records([record], "worker-a", tx.now + 30)[record].fencing_token
    clock.advance(31)  # worker-a went silent past its lease
    with store.begin() as tx:
        # Not by a claim: taking over is the sweeper's, which bumps the token and says so.
        assert tx.claim_records([record], "worker-b", tx.now + 30) == {}
        taken = tx.take_over_expired(100)
        assert [(t.record_id, t.owner) for t in taken] == [(record, "worker-a")]
        token_b = tx.claim_records([record], "worker-b", tx.now + 30)[record].fencing_token
    assert token_b == token_a + 2
    with store.begin() as tx:
        applied = tx.apply_many([RecordChange(record, token_a, {"physical_id": "late"})])
        single = tx.apply(RecordChange(record, token_a, {"physical_id": "late"}))
    assert applied == set() and single is False
    with store.begin() as tx:
        assert tx.apply_many([RecordChange(record, token_b, {"physical_id": "p-b"})]) == {record}
        assert tx.records_by_id([record])[record].physical_id == "p-b"
        assert tx.records_by_id([record])[record].lease_owner is None  # released on write


def test_a_fenced_delete_is_refused_too(store: Store, record: int) -> None:
    with store.begin() as tx:
        token = tx.claim_records([record], "a", tx.now + 30)[record].fencing_token
        tx.claim_records([record], "a", tx.now + 30)  # a second claim by the same owner
        assert tx.apply_many([RecordChange(record, token, {}, delete=True)]) == set()
        assert record in tx.records_by_id([record])
