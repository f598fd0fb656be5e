"""Requests on top of each other on the integration tier: a real ``convergence api`` process on
the ``cluster`` (PostgreSQL, Redis, two workers) and several clients at once
(``tests/writers.py``).

Two clients PATCH different parameters of one stack 15 times each, at the same time: every
accepted PATCH counts, so both parameters end at their writer's last value, in the stack and
in its resources (PostgreSQL once ended with ``a = 13, b = 15``: two merges started from one
copy). Several clients creating one stack name at once get one stack and 409s (the name look-up
and the insert once raced).
"""

from __future__ import annotations

from tests import writers
from tests.integration.conftest import Cluster, run_api


def test_two_writers_patching_at_once_lose_nothing(cluster: Cluster) -> None:
    with run_api(cluster, "writers") as api:
        result = writers.run_two_writers(api.url, cluster.settings.database_url)
    assert writers.writer_problems(result) == [], result


def test_racing_creates_of_one_name_make_one_stack(cluster: Cluster) -> None:
    with run_api(cluster, "race") as api:
        statuses, stacks = writers.race_creates(api.url)
    assert statuses == [201] + [409] * (len(statuses) - 1)
    assert len(stacks) == 1
