"""Workers crash, freeze and stop while traversals of several stacks run.

- ``kill -9`` of a random worker's whole process group (a machine crash), 20 times at random
  instants, with now and then only one pool child killed instead (its Celery main re-queues the
  message); the supervisor starts each worker again. Wide, layered and replacing stacks are
  created and updated throughout, some updates sent on top of running ones. Afterwards every
  invariant of :mod:`tests.faults.invariants` holds, and every resource a killed worker left
  leased has a "taken over" event.
- A worker frozen (SIGSTOP) mid-step past its lease: the others take its resources over (their
  fencing tokens rise); resumed, its late write is refused ("fenced off" in its log) and it
  rejoins (heartbeats again, stays up).
- ``kill -9`` of one pool process holding leases: its node sees it exit and lets go of them
  at once ("exited: taken over"), without waiting for the lease to run out.
- SIGTERM of a worker mid-step: the graceful path. Its resources are claimed again by others
  without waiting for the lease to run out: no "taken over" event for them. With a grace
  period shorter than the step in hand, its pool processes are killed and the node hands
  their resources over ("handed over" events).

To be mid-step for sure, the frozen and stopped workers run with
``CONVERGENCE_TEST_BACKEND_LATENCY``: each backend call takes effect at once and answers two
seconds later, so a lease they hold is a step between a cloud call and its database write.
"""

from __future__ import annotations

import random
import time

import pytest

from tests.faults import invariants
from tests.faults.cluster import Fault, FaultCluster, WorkerProcess, owner_pid, wait_for
from tests.faults.conftest import QUIET_TIMEOUT, SEED, settle
from tests.faults.workload import Tracked, Workload

KILLS = 20
LATENCY = "2"


def _stacks(workload: Workload) -> list[Tracked]:
    return [workload.create("wide", size=30), workload.create("layered", size=12),
            workload.create("replacing", size=8)]


def test_repeated_kill_9(cluster: FaultCluster, workload: Workload) -> None:
    rng = random.Random(SEED)
    stacks = _stacks(workload)
    faults: list[Fault] = []
    kills = 0
    while kills < KILLS:
        time.sleep(rng.uniform(0.3, 1.5))
        if not cluster.live_workers():
            continue
        if rng.random() < 0.15:
            fault = cluster.kill9_child()
            if fault is not None:
                faults.append(fault)
            continue
        faults.append(cluster.kill9())
        kills += 1
        if kills % 4 == 0:  # keep work flowing: an update, sometimes on top of a running one
            workload.update(rng.choice(stacks), patch=rng.random() < 0.5)
    report = settle(cluster, stacks, faults)
    assert not report
    assert sum(1 for f in faults if f.kind == "kill -9") >= KILLS
    left = [f for f in faults if f.held]
    # The faults must have hit work in flight, or the test proves nothing.
    assert left, "no kill found a lease held: the faults missed the traversals"


def _slow_worker(cluster: FaultCluster, name: str, **env: str) -> WorkerProcess:
    worker = cluster.start_worker(name, CONVERGENCE_TEST_BACKEND_LATENCY=LATENCY, **env)
    cluster.wait_ready([worker])
    return worker


def _holding(cluster: FaultCluster, worker: WorkerProcess) -> list[object]:
    held = wait_for(lambda: cluster.leases_of(worker), 60)
    if not held:
        pytest.fail(f"{worker.node} never held a lease\n{worker.tail()}", pytrace=False)
    return list(held)


def _freeze_holding(cluster: FaultCluster, worker: WorkerProcess) -> Fault:
    """Freeze ``worker`` at an instant it holds a lease (its leases read once frozen)."""
    for _ in range(20):
        _holding(cluster, worker)
        fault = cluster.freeze(worker)
        if fault.held:
            return fault
        cluster.thaw(worker)  # it let go in between: try again
    pytest.fail(f"never froze {worker.node} holding a lease\n{worker.tail()}", pytrace=False)


def test_frozen_worker_is_fenced_off_and_rejoins(cluster: FaultCluster,
                                                 workload: Workload) -> None:
    slow = _slow_worker(cluster, "frozen")
    try:
        stacks = [workload.create("wide", size=20)]
        fault = _freeze_holding(cluster, slow)
        took = invariants.reclaimed_after(cluster, fault, QUIET_TIMEOUT)
        assert took is not None, "the frozen worker's leases were never taken over:\n" + \
            "\n".join(invariants.unsettled(cluster, stacks))
        time.sleep(1)
        thawed = time.time()
        fenced_before = len(slow.log.read_text(errors="replace").split("fenced off")) - 1
        cluster.thaw(slow)
        fenced = wait_for(lambda: slow.log.read_text(errors="replace").count("fenced off")
                          > fenced_before, 30)
        assert fenced, f"the resumed worker's late write was not refused\n{slow.tail()}"
        beat = wait_for(lambda: cluster.query(
            "SELECT id FROM workers WHERE id LIKE :node AND heartbeat_at > :t",
            node=f"{slow.node}:%", t=thawed), 30)
        assert beat, f"the resumed worker does not heartbeat again\n{slow.tail()}"
        settle(cluster, stacks, [fault])
        assert slow.alive, f"the resumed worker exited\n{slow.tail()}"
    finally:
        cluster.retire(slow)


def _kill_child_holding(cluster: FaultCluster, worker: WorkerProcess) -> Fault:
    """Kill -9 a pool process of ``worker`` at an instant it holds a lease (read once it is
    dead: one that let go in between is not what the test needs, and another is tried)."""
    for _ in range(10):
        held = _holding(cluster, worker)
        pid = owner_pid(str(held[0].lease_owner))  # type: ignore[attr-defined]
        fault = cluster.kill9_child(worker, pid) if pid is not None else None
        if fault is not None and fault.held:
            return fault
    pytest.fail(f"never killed a pool process of {worker.node} holding a lease\n"
                f"{worker.tail()}", pytrace=False)


def test_a_killed_pool_process_has_its_work_taken_over_by_its_node(
        cluster: FaultCluster, workload: Workload) -> None:
    # Its leases last a production lease: none can run out before its node lets go of them,
    # so whoever lets go of them is seen in the events, whatever the machine's speed.
    slow = _slow_worker(cluster, "child-killed", CONVERGENCE_LEASE_SECONDS="30")
    try:
        stacks = [workload.create("wide", size=20)]
        fault = _kill_child_holding(cluster, slow)
        assert invariants.reclaimed_after(cluster, fault, QUIET_TIMEOUT) is not None
        settle(cluster, stacks, [fault])
        worker = next(iter(fault.owners.values())).split("/", 1)[0]
        events = cluster.query("SELECT resource_name, reason FROM events WHERE reason "
                               "LIKE :who", who=f"%{worker} %")
        # Its node saw it exit and let go of its leases: none ran out for the sweeper.
        assert events and all(e.reason == f"{worker} exited: taken over" for e in events), \
            f"{[e.reason for e in events]}\n{slow.tail()}"
        assert slow.alive, f"the worker exited\n{slow.tail()}"
    finally:
        cluster.retire(slow)


# Within the grace period, the steps in hand end at their commit point; past it (a grace
# shorter than a backend call), the pool processes are killed and the node lets go of what
# they held. Either way nothing is left to run out.
@pytest.mark.parametrize("grace", ["", "0.5"], ids=["within-grace", "past-grace"])
def test_sigterm_hands_work_over(cluster: FaultCluster, workload: Workload, grace: str) -> None:
    env = {"CONVERGENCE_SHUTDOWN_GRACE_SECONDS": grace} if grace else {}
    slow = _slow_worker(cluster, "stopped-late" if grace else "stopped", **env)
    try:
        stacks = [workload.create("wide", size=20)]
        _holding(cluster, slow)
        slow.hold = True  # not started again: it was asked to stop
        fault = cluster.sigterm(slow, wait=False)
        assert fault.held, "the worker held nothing when stopped: the test proves nothing"
        took = invariants.reclaimed_after(cluster, fault, QUIET_TIMEOUT)
        assert took is not None, "the stopped worker's resources were not claimed again"
        settle(cluster, stacks)
        events = cluster.query("SELECT stack_id, resource_name, reason FROM events WHERE "
                               "created_at >= :at AND reason ILIKE '%over'", at=fault.at - 1)
        left = {(fault.stacks[r], fault.names[r]) for r in fault.held}
        expired = {(e.stack_id, e.resource_name) for e in events
                   if e.reason.endswith(invariants.TAKEN_OVER)} & left
        assert not expired, f"SIGTERM left leases to run out (taken over): {sorted(expired)}"
        if grace:
            handed = {(e.stack_id, e.resource_name) for e in events
                      if e.reason.endswith(invariants.HANDED_OVER)}
            assert handed & left, f"past the grace, nothing was handed over\n{slow.tail()}"
        print(f"SIGTERM: {len(fault.held)} resources let go of after {took:.2f}s")
    finally:
        cluster.retire(slow)
