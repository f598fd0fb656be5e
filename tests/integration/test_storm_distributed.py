"""The autoscaler storm on the integration tier (scenario 6 of the overlapping updates).

The same storm as ``tests/api/test_storm.py`` (``tests/storm.py``), against a real
``convergence api`` process on the ``cluster``: PostgreSQL holds the state, Redis carries the
work and two ``convergence worker`` processes run the traversals while three clients PATCH the
group's ``count``. The end state must be the last accepted request's and no member may have
been created more often than the requests required. How soon the stack converges is printed
by ``benchmarks/storm.py --mode distributed``, never asserted here (the timeout is only a
guard against a stuck stack).
"""

from __future__ import annotations

from tests import storm
from tests.integration.conftest import Cluster, run_api

STUCK_SECONDS = 120.0


def test_autoscaler_storm_distributed(cluster: Cluster) -> None:
    with run_api(cluster, "storm") as api:
        try:
            result = storm.run_storm(api.url, cluster.settings.database_url, seed=6,
                                     timeout=STUCK_SECONDS)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{api.tail()}\n{cluster.logs_tail()}") from None
    print(storm.summary(result))
    assert storm.problems(result) == [], storm.summary(result)
