"""A batch's recording transaction chosen as a deadlock's victim is recorded again at once, on
PostgreSQL, rather than failing its batch and leaving its resources to a lease expiry.

A real deadlock: while the engine records a step (its resource row locked, then waiting for
its traversal's row, which another session holds), the other session asks for the resource
row. PostgreSQL aborts the recording (its deadlock check runs first: the other session's
``deadlock_timeout`` is long); the engine records the batch again once the other session is
done, and the stack converges with no sweep and no lease run out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from convergence import services as sv
from convergence.runtime import Runtime, open_runtime
from convergence.settings import Settings
from convergence.store.migrate import upgrade
from tests.conftest_services import postgres_url, require_postgres, reset_postgres_schema
from tests.engine.harness import TENANT, res, template

PG_DATABASE = "convergence_test_recording_retry"


@pytest.fixture
def rt() -> Iterator[Runtime]:
    require_postgres()
    url = postgres_url(PG_DATABASE)
    reset_postgres_schema(url)
    upgrade(url)
    runtime = open_runtime(Settings(database_url=url, lease_seconds=600.0, inline_seconds=0.0))
    yield runtime
    runtime.store.engine.dispose()


def _waiting_for_a_lock(rt: Runtime, other_pid: int) -> bool:
    with rt.store.engine.connect() as conn:
        return bool(conn.execute(sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> :other"), {"other": other_pid}).scalar())


def test_a_recording_chosen_as_deadlock_victim_is_recorded_again(rt: Runtime) -> None:
    stack = sv.create_stack(rt, TENANT, "victim", template({"a": res("x")}))
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()
    traversal_id = str(stack.traversal_id)
    rt.engine.plan(traversal_id)
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(rt.engine.run_nodes(traversal_id, [0]))
        except BaseException as exc:  # the test asserts there is none
            outcome.append(exc)

    with rt.store.engine.connect() as other:
        with other.begin():
            other.execute(sa.text("SET LOCAL deadlock_timeout = '20s'"))
            pid = int(other.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
            other.execute(sa.text("SELECT id FROM traversals WHERE id = :t FOR UPDATE"),
                          {"t": traversal_id})
            worker = threading.Thread(target=run)
            worker.start()
            deadline = time.monotonic() + 30
            while not _waiting_for_a_lock(rt, pid):  # the recording holds the resource row
                assert time.monotonic() < deadline and worker.is_alive(), outcome
                time.sleep(0.05)
            other.execute(sa.text("UPDATE resources SET updated_at = updated_at "
                                  "WHERE stack_id = :s"), {"s": stack.id})
        worker.join(60)
    assert len(outcome) == 1 and not isinstance(outcome[0], BaseException), outcome
    finished = sv.wait_for_stack(rt, TENANT, stack.id, timeout=60)
    assert finished.stack_status == "CREATE_COMPLETE"
    record = next(r for r in sv.list_resources(rt, TENANT, "victim") if r.name == "a")
    assert (record.action, record.status, record.lease_owner) == ("CREATE", "COMPLETE", None)


def _deadlocks(rt: Runtime) -> int:
    with rt.store.engine.connect() as conn:
        return int(conn.execute(sa.text(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"))
            .scalar_one())


def test_recording_a_failure_locks_the_stack_before_the_resources(rt: Runtime) -> None:
    """The order every transaction keeps: stack, resources, nodes, traversal. A session that
    holds the stack and then writes the stack's resources (``admin reset``, a cancel) while a
    failure is recorded (which rolls the stack back, so it needs the stack) is waited for,
    with no deadlock on the way."""
    stack = sv.create_stack(rt, TENANT, "failing", template({"a": res("x", fail=True)}))
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()
    traversal_id = str(stack.traversal_id)
    rt.engine.plan(traversal_id)
    before = _deadlocks(rt)
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(rt.engine.run_nodes(traversal_id, [0]))
        except BaseException as exc:  # the test asserts there is none
            outcome.append(exc)

    with rt.store.engine.connect() as other:
        with other.begin():
            other.execute(sa.text("SET LOCAL deadlock_timeout = '20s'"))
            pid = int(other.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
            other.execute(sa.text("SELECT id FROM stacks WHERE id = :s FOR NO KEY UPDATE"),
                          {"s": stack.id})
            worker = threading.Thread(target=run)
            worker.start()
            deadline = time.monotonic() + 30
            while not _waiting_for_a_lock(rt, pid):
                assert time.monotonic() < deadline and worker.is_alive(), outcome
                time.sleep(0.05)
            other.execute(sa.text("UPDATE resources SET updated_at = updated_at "
                                  "WHERE stack_id = :s"), {"s": stack.id})
        worker.join(60)
    assert len(outcome) == 1 and not isinstance(outcome[0], BaseException), outcome
    assert _deadlocks(rt) == before
    rt.dispatcher.dispatch(outcome[0])  # type: ignore[arg-type]
    finished = sv.wait_for_stack(rt, TENANT, stack.id, timeout=60)
    assert finished.stack_status == "ROLLBACK_COMPLETE"
