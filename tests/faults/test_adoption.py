"""A step killed between the cloud call and its database write: adopted, not duplicated.

A worker runs with ``CONVERGENCE_TEST_BACKEND_LATENCY=2``: each test-backend call takes effect
at once and answers two seconds later. As soon as an entity exists whose record (the
``resources`` row named by the entity's owner) has no ``physical_id`` yet and is leased by that
worker, the worker is killed (``kill -9``). After recovery the record's physical id is that
very entity and it is the only one its owner ever had: the step that took over found it by its
owner and adopted it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.faults.cluster import FaultCluster, WorkerProcess, wait_for
from tests.faults.conftest import settle
from tests.faults.workload import Workload

ROUNDS = 2


def _unrecorded(cluster: FaultCluster, worker: WorkerProcess, stack_id: str) -> list[Any]:
    """Entities of the stack whose record has no physical id and is leased by ``worker``."""
    assert worker.process is not None
    start = f"{worker.node}:{worker.process.pid}."
    rows = cluster.query(
        "SELECT e.id, e.owner, r.id AS record, r.lease_owner FROM test_entities e "
        "JOIN resources r ON e.owner = r.stack_id || '/' || r.id::text "
        "WHERE r.stack_id = :s AND r.physical_id IS NULL AND e.deleted_at IS NULL "
        "AND r.lease_owner IS NOT NULL", s=stack_id)
    return [r for r in rows if r.lease_owner.startswith(start)]


@contextlib.contextmanager
def _alone(cluster: FaultCluster, worker: WorkerProcess) -> Iterator[None]:
    """Every other live worker stopped (SIGSTOP) while the block runs, so that ``worker``
    takes the stack's steps: which worker fetches which message is otherwise luck, and on a
    loaded machine the others could take every one before ``worker`` fetched any."""
    others = [w.process.pid for w in cluster.live_workers()
              if w is not worker and w.process is not None]
    for pid in others:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in others:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGCONT)


def _round(cluster: FaultCluster, workload: Workload, name: str) -> None:
    slow = cluster.start_worker(name, CONVERGENCE_TEST_BACKEND_LATENCY="2")
    try:
        cluster.wait_ready([slow])
        with _alone(cluster, slow):
            t = workload.create("wide", size=20)
            assert t.id is not None
            stack_id = t.id
            caught = wait_for(lambda: _unrecorded(cluster, slow, stack_id), 60)
            if not caught:
                pytest.fail(f"never caught {slow.node} between a create and its write\n"
                            f"{slow.tail()}", pytrace=False)
            slow.hold = True  # not started again: the kill is the point
            fault = cluster.kill9(slow)
        settle(cluster, [t], [fault])
        for entity in caught:
            ever = cluster.query("SELECT id, deleted_at FROM test_entities WHERE owner = :o",
                                 o=entity.owner)
            record = cluster.query("SELECT physical_id FROM resources WHERE id = :r",
                                   r=entity.record)
            assert [e.id for e in ever] == [entity.id], \
                f"{entity.owner}: entities ever created {[tuple(e) for e in ever]}"
            assert record and record[0].physical_id == entity.id, \
                f"{entity.owner}: the record has {record}, the entity is {entity.id}"
    finally:
        cluster.retire(slow)


def test_create_interrupted_after_the_cloud_call_is_adopted(cluster: FaultCluster,
                                                            workload: Workload) -> None:
    for i in range(ROUNDS):
        _round(cluster, workload, f"adopt{i}")
