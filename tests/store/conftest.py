"""Stores on both databases for the store's tests: an in-memory SQLite one, and a PostgreSQL
one in a database of the test module's own (made once per module, its schema reset for each
test), both at the head revision and on a manual clock. A module asks for both with
``@pytest.fixture(params=["sqlite", "postgresql"])`` and ``yield from on_database(request)``."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from convergence.ports.clock import ManualClock
from convergence.store.db import make_engine
from convergence.store.migrate import ensure_schema, upgrade
from convergence.store.transactions import Store
from tests.conftest_services import drop_postgres_database, postgres_url, reset_postgres_schema


@pytest.fixture(scope="module")
def pg_database(request: pytest.FixtureRequest) -> Iterator[str]:
    """A PostgreSQL database of this test module's own, dropped after it."""
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    name = f"convergence_test_{module}_{os.getpid()}"
    yield postgres_url(name)
    drop_postgres_database(name)


def on_database(request: pytest.FixtureRequest) -> Iterator[Store]:
    """The body of a fixture parametrized by database: a store on ``request.param``."""
    if request.param == "sqlite":
        engine = make_engine("sqlite:///:memory:")
        ensure_schema(engine)
    else:
        url = request.getfixturevalue("pg_database")
        reset_postgres_schema(url)
        upgrade(url)
        engine = make_engine(url)
    yield Store(engine, ManualClock().now)
    engine.dispose()
