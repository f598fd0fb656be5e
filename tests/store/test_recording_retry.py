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

from convergence.runtime import Runtime, open_runtime
from convergence.services import queries, running, stacks
from convergence.settings import Settings
from convergence.store.migrate import upgrade
from tests.conftest_services import (
    TEST_ENCRYPTION_KEYS,
    postgres_url,
    require_postgres,
    reset_postgres_schema,
)
from tests.engine.harness import TENANT, res, template

PG_DATABASE = "convergence_test_recording_retry"


@pytest.fixture
def rt() -> Iterator[Runtime]:
    require_postgres()
    url = postgres_url(PG_DATABASE)
    reset_postgres_schema(url)
    upgrade(url)
    runtime = open_runtime(Settings(database_url=url, lease_seconds=600.0, inline_seconds=0.0,
                                    encryption_keys=TEST_ENCRYPTION_KEYS))
    yield runtime
    runtime.store.engine.dispose()


def _waiting_for_a_lock(rt: Runtime, other_pid: int) -> bool:
    with rt.store.engine.connect() as conn:
        return bool(conn.execute(sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> :other"), {"other": other_pid}).scalar())


def _record_beside(rt: Runtime, stack_id: str, traversal_id: str, hold: str) -> object:
    """Run the traversal's first node while another session holds what ``hold`` locks; once
    the node's recording waits for a lock, that session writes the stack's resources, then
    commits. Returns what ``run_nodes`` returned, or what it raised."""
    rt.engine.plan(traversal_id)
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(rt.engine.run_nodes(traversal_id, [0]))
        except BaseException as exc:  # the callers assert there is none
            outcome.append(exc)

    with rt.store.engine.connect() as other, other.begin():
        # The other session waits longer before it looks for a deadlock: if there is one,
        # the recording is its victim.
        other.execute(sa.text("SET LOCAL deadlock_timeout = '20s'"))
        pid = int(other.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
        other.execute(sa.text(hold), {"s": stack_id, "t": traversal_id})
        worker = threading.Thread(target=run)
        worker.start()
        deadline = time.monotonic() + 30
        while not _waiting_for_a_lock(rt, pid):
            assert time.monotonic() < deadline and worker.is_alive(), outcome
            time.sleep(0.05)
        other.execute(sa.text("UPDATE resources SET updated_at = updated_at "
                              "WHERE stack_id = :s"), {"s": stack_id})
    worker.join(60)
    assert len(outcome) == 1, outcome
    return outcome[0]


def _started(rt: Runtime, name: str, resource: dict[str, object]) -> tuple[str, str]:
    stack = stacks.create_stack(rt, TENANT, name, template({"a": resource}))
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()
    return stack.id, str(stack.traversal_id)


def test_a_recording_chosen_as_deadlock_victim_is_recorded_again(rt: Runtime) -> None:
    # The recording holds the resource row and waits for the traversal's, which the other
    # session holds; then the other session asks for the resource row: a deadlock.
    stack_id, traversal_id = _started(rt, "victim", res("x"))
    outcome = _record_beside(rt, stack_id, traversal_id,
                             "SELECT id FROM traversals WHERE id = :t FOR UPDATE")
    assert not isinstance(outcome, BaseException), outcome
    finished = running.wait_for_stack(rt, TENANT, stack_id, timeout=60)
    assert finished.stack_status == "CREATE_COMPLETE"
    record = next(r for r in queries.list_resources(rt, TENANT, "victim") if r.name == "a")
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
    stack_id, traversal_id = _started(rt, "failing", res("x", fail=True))
    before = _deadlocks(rt)
    outcome = _record_beside(rt, stack_id, traversal_id,
                             "SELECT id FROM stacks WHERE id = :s FOR NO KEY UPDATE")
    assert not isinstance(outcome, BaseException), outcome
    assert _deadlocks(rt) == before
    rt.dispatcher.dispatch(outcome)  # type: ignore[arg-type]
    finished = running.wait_for_stack(rt, TENANT, stack_id, timeout=60)
    assert finished.stack_status == "ROLLBACK_COMPLETE"
