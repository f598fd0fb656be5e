"""The database-backed test entity backend (``plugins/heat/test_backend.py`` on the store's
``test_entities`` table) is a cloud without client tokens: its create makes what it is told,
every time, so two creates of one resource that overlap make two entities, and the engine, not
the backend, ends with one.

The overlap is the one a frozen worker makes: its create's INSERT is in, not committed, when
its lease runs out and the resource's new holder looks for the resource's entity by its owner
key, finds nothing, and makes its own. Only PostgreSQL runs the two transactions at once
(SQLite lets one writer in at a time), so the story runs there.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from convergence.engine.engine import Engine
from convergence.engine.sweeper import Sweeper
from convergence.plugins.heat.test_backend import TEST_ENTITIES, TableTestEntities
from convergence.ports.clock import ManualClock
from convergence.ports.views import StackView
from convergence.runtime import Runtime, open_runtime
from convergence.services import running
from convergence.settings import Settings
from convergence.store.db import make_engine
from convergence.store.entity_tables import SqlEntityTables
from convergence.store.migrate import upgrade
from convergence.store.models import TestEntityRow
from tests.conftest_services import TEST_ENCRYPTION_KEYS, postgres_url, reset_postgres_schema
from tests.engine.harness import TENANT, Story, entity_backend, res, template

PG_DATABASE = "convergence_test_entities"
LEASE = 30.0


@pytest.fixture
def pg_url() -> str:
    url = postgres_url(PG_DATABASE)
    reset_postgres_schema(url)
    upgrade(url)
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sa.Engine]:
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else \
        f"sqlite:///{tmp_path / 'entities.db'}"
    upgrade(url)
    engine = make_engine(url)
    yield engine
    engine.dispose()


def test_create_makes_an_entity_every_time_as_a_cloud_does(db: sa.Engine) -> None:
    table = SqlEntityTables(db).table(TEST_ENTITIES)
    assert table is not None
    entities = TableTestEntities(table)
    first = entities.create("s/1", "a")
    second = entities.create("s/1", "b")  # adopting the first is the caller's job
    assert first != second
    assert entities.live() == {first: ("s/1", "a"), second: ("s/1", "b")}
    assert entities.created_count("s/1") == 2
    found = entities.find("s/1")
    assert found is not None and found[0] in (first, second)


@pytest.fixture
def pg_rt(pg_url: str) -> Iterator[Runtime]:
    settings = Settings(database_url=pg_url, batch_size=50, lease_seconds=LEASE,
                        sweep_seconds=5.0, encryption_keys=TEST_ENCRYPTION_KEYS)
    runtime = open_runtime(settings, clock=ManualClock())
    yield runtime
    runtime.store.engine.dispose()


def test_two_creates_of_one_resource_that_overlap_end_with_one_entity(pg_rt: Runtime) -> None:
    rt = pg_rt

    def wait(stack_id: str) -> StackView:
        return running.wait_for_stack(rt, TENANT, stack_id)

    story = Story(rt, "overlap", wait)
    story.create(template({"a": res("x")}))
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()
    traversal_id = str(story.stack().traversal_id)
    rt.engine.plan(traversal_id)
    entities = entity_backend(rt)
    assert isinstance(entities, TableTestEntities)
    clock = rt.clock
    assert isinstance(clock, ManualClock)
    other = Engine(rt.store, rt.registry, worker_id="other-node:1.a:1", lease_seconds=LEASE)
    late = str(uuid.uuid4())

    def frozen_before_commit(owner: str, value: str, *, guard: object = None) -> str:
        del entities.create  # the instance attribute: the class's create again, for the other
        assert callable(guard)
        with rt.store.engine.begin() as conn:
            guard()  # the lease is good when the worker checks, right before its INSERT
            conn.execute(sa.insert(TestEntityRow).values(id=late, owner=owner, value=value,
                                              created_at=clock.now()))
            # Frozen after its INSERT, before its COMMIT, past its lease: the new holder
            # looks for the resource's entity, cannot see this one, and makes its own.
            clock.advance(LEASE + 1)
            with rt.store.begin() as tx:
                assert tx.take_over_expired(10)
            other.run_nodes(traversal_id, [0])
        return late  # committed as the worker wakes up: the cloud made it

    entities.create = frozen_before_commit  # type: ignore[method-assign]
    rt.engine.run_nodes(traversal_id, [0])
    record = story.current()["a"]
    assert record.physical_id is not None and record.physical_id != late
    # Two entities for one resource, as a cloud without client tokens makes them; the late
    # worker's result was refused and what it made noted as an orphan.
    assert sorted(story.entities()) == sorted([late, record.physical_id])
    assert rt.engine.stats.fenced_off == 1
    assert Sweeper(rt.engine, 5.0).sweep(force=True).counts["orphans removed"] == 1
    assert story.finish().stack_status == "CREATE_COMPLETE"
    assert story.entities() == {record.physical_id: "x"}
    # The late entity's story ends with its removal, on the resource it was made for.
    told = [e for e in story.events() if e.physical_resource_id == late]
    assert {e.resource_name for e in told} == {"a"}
    assert (told[-1].action, told[-1].status) == ("DELETE", "COMPLETE")
    assert "recorded by nobody" in told[-1].reason
