"""The database-backed test entity backend: a create is idempotent by its owner key, even when
two creates overlap (a worker frozen between its INSERT and its COMMIT while another worker
took the resource over must not leave a second entity behind)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from convergence.store.db import make_engine
from convergence.store.migrate import upgrade
from convergence.store.test_entities import SqlTestEntities, T
from tests.conftest_services import postgres_url, reset_postgres_schema

PG_DATABASE = "convergence_test_entities"


def _migrated(url: str) -> sa.Engine:
    upgrade(url)
    return make_engine(url)


@pytest.fixture
def pg_engine() -> Iterator[sa.Engine]:
    url = postgres_url(PG_DATABASE)
    reset_postgres_schema(url)
    engine = _migrated(url)
    yield engine
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sa.Engine]:
    if request.param == "postgresql":
        yield request.getfixturevalue("pg_engine")
        return
    engine = _migrated(f"sqlite:///{tmp_path / 'entities.db'}")
    yield engine
    engine.dispose()


def _live(engine: sa.Engine, owner: str) -> list[tuple[str, str]]:
    with engine.begin() as conn:
        return [(r.id, r.value) for r in conn.execute(sa.select(T.c.id, T.c.value).where(
            T.c.owner == owner, T.c.deleted_at.is_(None)))]


def test_a_second_create_for_an_owner_answers_the_live_entity(engine: sa.Engine) -> None:
    entities = SqlTestEntities(engine)
    first = entities.create("s/1", "a")
    assert entities.create("s/1", "b") == first
    assert _live(engine, "s/1") == [(first, "b")]
    entities.delete(first)
    again = entities.create("s/1", "c")  # once deleted, a create makes a new one
    assert again != first and _live(engine, "s/1") == [(again, "c")]


def test_overlapping_creates_end_with_one_entity(pg_engine: sa.Engine) -> None:
    # On PostgreSQL only: SQLite runs one writer at a time, so creates cannot overlap there.
    engine = pg_engine
    entities = SqlTestEntities(engine)
    # A worker frozen after its INSERT, before its COMMIT: its row is invisible to others.
    frozen = engine.connect()
    transaction = frozen.begin()
    frozen.execute(sa.insert(T).values(id="frozen-1", owner="s/2", value="v", created_at=0.0))
    answer: list[str] = []
    other = threading.Thread(target=lambda: answer.append(entities.create("s/2", "v")))
    other.start()
    other.join(1.0)
    assert other.is_alive(), "the other create did not wait for the frozen one"
    transaction.commit()  # the frozen worker wakes up and commits
    frozen.close()
    other.join(10.0)
    assert answer == ["frozen-1"]
    assert _live(engine, "s/2") == [("frozen-1", "v")]
