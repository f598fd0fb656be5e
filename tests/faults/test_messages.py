"""Duplicated and reordered messages: every ~100 ms the Celery queues in Redis are shuffled
and a third of their messages pushed twice (the copy with a fresh delivery tag), while wide,
layered and replacing stacks are created and updated (one update on top of a running one).

Workers empty the queues within milliseconds, so the requests are sent while the whole fleet
is paused, and it is paused now and then for half a second (SIGSTOP, well within the lease),
to let a backlog form for the chaos to work on. Steps are level-based and fenced, so a
duplicate finds its node done (or its record leased) and does nothing, and order never
mattered: every invariant holds once quiet.
"""

from __future__ import annotations

import time

from tests.faults.chaos import MessageChaos
from tests.faults.cluster import FaultCluster
from tests.faults.conftest import SEED, settle
from tests.faults.workload import Workload

PAUSES = 6


def test_duplicated_and_reordered_messages(cluster: FaultCluster, workload: Workload) -> None:
    assert cluster.redis is not None
    client = cluster.redis.client()
    with MessageChaos(client, seed=SEED, period=0.05) as chaos:
        with cluster.paused():  # the requests' plan messages wait for the chaos
            stacks = [workload.create("wide", size=30), workload.create("layered", size=12),
                      workload.create("replacing", size=8)]
            time.sleep(0.5)
        for i in range(PAUSES):
            time.sleep(0.4)
            with cluster.paused():
                if i == 1:
                    workload.update(stacks[0])
                    workload.update(stacks[1], patch=True)
                if i == 3:
                    workload.update(stacks[1])  # on top of the running one
                    workload.update(stacks[2])
                time.sleep(0.5)
    client.close()
    cluster.record_fault("messages duplicated and reordered", f"{chaos.duplicated} copies")
    settle(cluster, stacks)
    assert chaos.duplicated > 0, "the chaos never found a message to duplicate"
    print(f"{chaos.shuffled} queues shuffled, {chaos.duplicated} messages duplicated")
