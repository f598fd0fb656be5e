"""Worker heartbeats in the store: upsert, listing by age, stop, and up/down by a manual clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from convergence.ports.clock import ManualClock
from convergence.ports.views import API, WORKER, WorkerInfo, WorkerView
from convergence.services.operations import list_services
from convergence.store.db import make_engine
from convergence.store.migrate import ensure_schema
from convergence.store.transactions import Store
from convergence.workers.heartbeat import Heartbeat


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> Iterator[Store]:
    engine = make_engine("sqlite:///:memory:")
    ensure_schema(engine)
    yield Store(engine, clock.now)
    engine.dispose()


def info(worker_id: str = "w1", kind: str = WORKER, started_at: float = 0.0) -> WorkerInfo:
    return WorkerInfo(id=worker_id, hostname="host-a", pid=42, kind=kind, started_at=started_at)


def test_heartbeat_upserts_one_row(store: Store, clock: ManualClock) -> None:
    start = clock.now()
    with store.begin() as tx:
        tx.heartbeat(info(started_at=start))
    clock.advance(4)
    with store.begin() as tx:
        tx.heartbeat(info(started_at=start))
        rows = tx.workers()
    assert len(rows) == 1
    row = rows[0]
    assert (row.id, row.hostname, row.pid, row.kind) == ("w1", "host-a", 42, WORKER)
    assert row.started_at == start
    assert row.heartbeat_at == start + 4
    assert row.stopped_at is None


def test_up_and_down_by_heartbeat_age(store: Store, clock: ManualClock) -> None:
    with store.begin() as tx:
        tx.heartbeat(info())
    interval = 5.0
    [row] = store_workers(store)
    assert row.is_up(clock.now(), interval)
    clock.advance(3 * interval - 0.1)
    assert row.is_up(clock.now(), interval)
    clock.advance(0.2)
    assert not row.is_up(clock.now(), interval)
    assert [s["status"] for s in list_services(store, interval)] == ["down"]
    with store.begin() as tx:  # beating again: up again
        tx.heartbeat(info())
    assert [s["status"] for s in list_services(store, interval)] == ["up"]


def store_workers(store: Store, since: float | None = None) -> list[WorkerView]:
    with store.read() as tx:
        return list(tx.workers(since))


def test_workers_since_leaves_out_the_long_silent(store: Store, clock: ManualClock) -> None:
    with store.begin() as tx:
        tx.heartbeat(info("old", started_at=clock.now()))
    clock.advance(100)
    with store.begin() as tx:
        tx.heartbeat(info("new", API, clock.now()))
    assert [w.id for w in store_workers(store)] == ["old", "new"]
    assert [w.id for w in store_workers(store, clock.now() - 50)] == ["new"]


def test_stop_worker_marks_it_down(store: Store, clock: ManualClock) -> None:
    with store.begin() as tx:
        tx.heartbeat(info())
        assert tx.stop_worker("w1")
        assert not tx.stop_worker("nobody")
    [row] = store_workers(store)
    assert row.stopped_at == clock.now()
    assert not row.is_up(clock.now(), 5.0)
    [item] = list_services(store, 5.0)
    assert item["status"] == "down" and item["deleted_at"] is not None


def test_heartbeat_thread_beats_and_marks_stopped(store: Store, clock: ManualClock) -> None:
    beat = Heartbeat(store, info(), interval=0.01)
    beat.start()
    try:
        [row] = store_workers(store)
        assert row.stopped_at is None
    finally:
        beat.stop()
    [row] = store_workers(store)
    assert row.stopped_at is not None
