"""The services fail under running traversals: Redis restarted (it keeps nothing on disk, so
every queued message and every unacknowledged one is lost), PostgreSQL sessions killed
(``pg_terminate_backend``) and PostgreSQL itself restarted (``immediate``: a crash).

Each test starts traversals of wide, layered and replacing stacks (and an update on top of a
running one), injects its fault while they run, and checks every invariant of
:mod:`tests.faults.invariants` once quiet: the sweeper re-drives what the lost messages and the
rolled-back transactions left, and nothing is lost, leaked or duplicated.
"""

from __future__ import annotations

import time

from tests.faults.cluster import FaultCluster
from tests.faults.conftest import settle
from tests.faults.workload import Tracked, Workload


def _traversals(workload: Workload) -> list[Tracked]:
    stacks = [workload.create("wide", size=20), workload.create("layered", size=12),
              workload.create("replacing", size=6)]
    time.sleep(1.5)
    workload.update(stacks[1])
    workload.update(stacks[2], patch=True)
    time.sleep(0.5)
    return stacks


def test_redis_restarted(cluster: FaultCluster, workload: Workload) -> None:
    starts = {w.name: w.starts for w in cluster.live_workers()}
    stacks = _traversals(workload)
    faults = [cluster.restart_redis()]
    time.sleep(2)
    workload.update(stacks[0])
    time.sleep(1)
    faults.append(cluster.restart_redis())
    settle(cluster, stacks, faults)
    # The workers rode it out: they reconnected rather than exited (to be started again).
    ended = {w.node: w.tail() for w in cluster.workers.values()
             if w.name in starts and w.starts != starts[w.name]}
    assert not ended, "workers exited when Redis restarted:\n" + "\n".join(ended.values())


def test_postgres_sessions_terminated(cluster: FaultCluster, workload: Workload) -> None:
    stacks = _traversals(workload)
    faults = []
    for _ in range(4):
        faults.append(cluster.terminate_pg_backends())
        time.sleep(0.7)
    settle(cluster, stacks, faults)


def test_postgres_restarted(cluster: FaultCluster, workload: Workload) -> None:
    stacks = _traversals(workload)
    faults = [cluster.restart_pg()]
    time.sleep(2)
    workload.update(stacks[0])
    settle(cluster, stacks, faults)
