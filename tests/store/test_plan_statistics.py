"""A plan of many nodes is a bulk write: the engine has the database take its figures on the
records and nodes again before the batches run (on PostgreSQL an ANALYZE; SQLite keeps none
the statements rely on). Without figures on the new rows, PostgreSQL took the stack to hold
0.5 % of the records and read each batch's dependencies by scanning the whole stack.

The threshold is lowered here so that small stacks show it: a plan under it leaves the
figures as they were, one over it brings them up to date (``pg_class.reltuples``, which an
ANALYZE of a small table sets to the exact count), unless what it wrote is under a tenth of
what the figures already count (autovacuum's own rule: the figures are still good). On SQLite
the same stacks complete.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from convergence.engine import planning
from convergence.runtime import Runtime, open_runtime
from convergence.services import running, stacks
from convergence.settings import Settings
from tests.conftest_services import TEST_ENCRYPTION_KEYS, fresh_database_url

TENANT = "t"
THRESHOLD = 30


@pytest.fixture(params=["sqlite", "postgresql"])
def rt(request: pytest.FixtureRequest, tmp_path: Path,
       monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    monkeypatch.setattr(planning, "STATISTICS_AFTER_NODES", THRESHOLD)
    runtime = open_runtime(Settings(database_url=fresh_database_url(request, tmp_path),
                                    encryption_keys=TEST_ENCRYPTION_KEYS))
    yield runtime
    runtime.store.engine.dispose()


def _create(rt: Runtime, name: str, size: int) -> None:
    resources = {f"r{i}": {"type": "OS::Heat::None"} for i in range(size)}
    stack = stacks.create_stack(rt, TENANT, name, json.dumps(
        {"heat_template_version": "2018-08-31", "resources": resources}))
    assert running.wait_for_stack(rt, TENANT, stack.id).stack_status == "CREATE_COMPLETE"


def _counted_rows(rt: Runtime) -> float | None:
    """What PostgreSQL's figures say the records table holds (None on SQLite)."""
    if rt.store.engine.dialect.name != "postgresql":
        return None
    with rt.store.engine.connect() as conn:
        return float(conn.execute(text(
            "SELECT reltuples FROM pg_class WHERE relname = 'resources'")).scalar_one())


def test_a_big_plan_brings_the_figures_up_to_date(rt: Runtime) -> None:
    before = _counted_rows(rt)
    _create(rt, "small", THRESHOLD // 3)  # under the threshold: figures as they were
    assert _counted_rows(rt) == before
    _create(rt, "big", THRESHOLD + 5)  # over it, and all of what the figures count
    postgresql = rt.store.engine.dialect.name == "postgresql"
    if postgresql:
        assert _counted_rows(rt) == THRESHOLD // 3 + THRESHOLD + 5
    _create(rt, "bigger", 12 * THRESHOLD)  # over it, and more than a tenth of the count
    if postgresql:
        assert _counted_rows(rt) == THRESHOLD // 3 + 13 * THRESHOLD + 5
    _create(rt, "another", THRESHOLD + 5)  # over it, but under a tenth of the count
    if postgresql:
        assert _counted_rows(rt) == THRESHOLD // 3 + 13 * THRESHOLD + 5
