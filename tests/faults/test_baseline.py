"""No fault: the workload of the fault tier converges and every invariant holds.

The control experiment for every other module here: if this fails, the harness (or the
engine without faults) is wrong, not the recovery mechanisms. One stack of each shape is
created, updated twice (the second update sent while the first runs), and one is deleted.
"""

from __future__ import annotations

from tests.faults.cluster import FaultCluster
from tests.faults.conftest import settle
from tests.faults.workload import SHAPES, Workload


def test_workload_converges_without_faults(cluster: FaultCluster, workload: Workload) -> None:
    stacks = [workload.create(shape, size=12) for shape in SHAPES]
    for t in stacks:
        workload.update(t)
        workload.update(t, patch=True)  # on top of the running update
    workload.delete(stacks[0])
    settle(cluster, stacks)
