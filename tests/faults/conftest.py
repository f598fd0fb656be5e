"""Fixtures of the fault tier: one :class:`~tests.faults.cluster.FaultCluster` for the tier.

The cluster (a private PostgreSQL cluster and Redis server, three workers, one API process)
runs with short clocks (:data:`~tests.faults.cluster.CI_TIMING`: lease 3 s, sweep 0.5 s) so
that recovery takes seconds. Every test drives stacks of its own through the API and then
calls :func:`settle` (wait until quiet, then check every invariant). Without the PostgreSQL
server binaries or ``redis-server`` the tier skips; in CI it fails (``skip_or_fail``).
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Iterator

import pytest

from tests.conftest_services import skip_or_fail
from tests.faults import invariants
from tests.faults.cluster import CI_TIMING, Fault, FaultCluster
from tests.faults.services import ServiceUnavailable
from tests.faults.workload import Tracked, Workload

# A bound on "quiet" after the last fault: lease + sweep + the work itself (a few traversals of
# 1-3 s actions), with room for a loaded 2-core CI machine. Not a measurement: past it, the
# stacks are stuck and the test fails with what is not settled and the workers' logs.
QUIET_TIMEOUT = float(os.environ.get("CONVERGENCE_FAULTS_QUIET_TIMEOUT", "90"))
BACKEND_LATENCY = "0.2"
# Few nodes per message: more messages (for the message chaos) and work spread over every
# worker (so that a kill finds some in flight).
BATCH_SIZE = "4"
SEED = int(os.environ.get("CONVERGENCE_FAULTS_SEED", "1"))


@pytest.fixture(scope="package")  # gone before the next tier's tests start
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultCluster]:
    folder = tmp_path_factory.mktemp("faults")
    # Every backend call answers 0.2 s late, so that a step holds its lease long enough for
    # a kill to land in it (most steps are otherwise done in milliseconds).
    c = FaultCluster(folder, CI_TIMING, workers=3, seed=SEED,
                     extra_env={"CONVERGENCE_TEST_BACKEND_LATENCY": BACKEND_LATENCY,
                                "CONVERGENCE_BATCH_SIZE": BATCH_SIZE})
    try:
        c.start()
    except ServiceUnavailable as exc:
        c.close()
        skip_or_fail(f"fault tier: {exc}")
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def workload(cluster: FaultCluster, request: pytest.FixtureRequest) -> Iterator[Workload]:
    assert cluster.api is not None
    w = Workload(cluster.api.url, seed=SEED + zlib.crc32(request.node.name.encode()))
    yield w
    w.close()


def settle(cluster: FaultCluster, tracked: list[Tracked],
           faults: list[Fault] | None = None) -> invariants.Report:
    """Wait until quiet, then check every invariant; fail with the evidence otherwise."""
    quiet = invariants.wait_quiet(cluster, tracked, QUIET_TIMEOUT)
    if quiet is not None:
        # Quiet once more a moment later: a late write's log line can come before the commit
        # that notes its orphan, which the sweeper then removes.
        time.sleep(1.0)
        quiet = invariants.wait_quiet(cluster, tracked, QUIET_TIMEOUT)
    if quiet is None:
        pytest.fail(f"not quiet {QUIET_TIMEOUT}s after the last fault:\n"
                    + "\n".join(invariants.unsettled(cluster, tracked)) + "\n"
                    + cluster.logs_tail(15), pytrace=False)
    report = invariants.problems(cluster, tracked, faults)
    if report:
        pytest.fail(f"invariants broken:\n{report}\n{cluster.logs_tail(15)}", pytrace=False)
    return report
