"""Engines (``store/db.py``) and the statement counter (``store/metrics.py``).

SQLite: the pragmas, transactions that begin with the first statement and take the write lock
at once, and concurrent writers that queue instead of failing. PostgreSQL: the engine options,
and the counter against a real server (skipped without one, failing in CI).
"""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql.psycopg2 import EXECUTEMANY_VALUES_PLUS_BATCH
from sqlalchemy.engine import Connection

from convergence.store import db
from convergence.store.db import make_engine, make_sessionmaker, schema_is_current
from convergence.store.metrics import StatementCounter, StatementCounts
from convergence.store.migrate import upgrade
from convergence.store.models import TemplateRow
from convergence.store.transactions import Store
from tests import conftest_services
from tests.conftest_services import postgres_url, reset_postgres_schema, terminate_session

PG_DATABASE = "convergence_test_store"

metadata = sa.MetaData()
counter_table = sa.Table(
    "counter", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("value", sa.Integer, nullable=False),
)


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Iterator[sa.Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    yield engine
    engine.dispose()


@pytest.fixture
def pg_engine() -> Iterator[sa.Engine]:
    url = postgres_url(PG_DATABASE)
    reset_postgres_schema(url)
    engine = make_engine(url)
    yield engine
    engine.dispose()


def _pragma(connection: Connection, name: str) -> object:
    return connection.exec_driver_sql(f"PRAGMA {name}").scalar()


# --- SQLite ---------------------------------------------------------------------------------


def test_sqlite_creates_the_folder_and_sets_the_pragmas(tmp_path: Path) -> None:
    path = tmp_path / "not" / "yet" / "there.db"
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:
            assert _pragma(connection, "journal_mode") == "wal"
            assert _pragma(connection, "synchronous") == 1  # NORMAL
            assert _pragma(connection, "foreign_keys") == 1
            assert _pragma(connection, "busy_timeout") == 30000
            assert _pragma(connection, "cache_size") == -65536  # 64 MiB
            assert _pragma(connection, "wal_autocheckpoint") == 20000
            assert _pragma(connection, "journal_size_limit") == 32 << 20
        assert path.exists()
    finally:
        engine.dispose()


def test_sqlite_transaction_takes_the_write_lock_at_the_first_statement(
        sqlite_file: sa.Engine) -> None:
    database = sqlite_file.url.database
    assert database is not None
    with sqlite_file.connect() as connection:
        connection.execute(sa.text("SELECT 1"))  # a read only, yet the lock is already ours
        assert connection.connection.driver_connection.in_transaction  # type: ignore[union-attr]
        other = sqlite3.connect(database, timeout=0, isolation_level=None)
        try:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        finally:
            other.close()


def test_sqlite_reads_do_not_queue_behind_a_writer(tmp_path: Path) -> None:
    """An API GET while a traversal holds the write lock: the read sees the last commit at
    once (a deferred transaction on WAL), and never what the writer has not committed."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    engine = make_engine(url)
    # A reader that would have to wait for the write lock fails at once instead of waiting.
    sa.event.listen(engine, "connect", lambda dbapi, _: dbapi.execute("PRAGMA busy_timeout=0"))
    store = Store(engine)
    with store.begin() as tx:
        tx.insert_stack("s1", "t", "first", timeout_mins=None, disable_rollback=False)
    with store.begin() as writer:
        writer.insert_stack("s2", "t", "second", timeout_mins=None, disable_rollback=False)
        with store.read() as reader:
            assert [s.name for s in reader.stacks("t")] == ["first"]
    with store.read() as reader:
        assert [s.name for s in reader.stacks("t")] == ["first", "second"]
    engine.dispose()


def test_sqlite_ddl_is_transactional(sqlite_file: sa.Engine) -> None:
    with sqlite_file.connect() as connection:
        metadata.create_all(connection)
        connection.rollback()
    assert not sa.inspect(sqlite_file).has_table("counter")


def test_sqlite_savepoint_rolls_back_inside_the_transaction(sqlite_file: sa.Engine) -> None:
    metadata.create_all(sqlite_file)
    with sqlite_file.begin() as connection:
        connection.execute(counter_table.insert().values(id=1, value=1))
        savepoint = connection.begin_nested()
        connection.execute(counter_table.insert().values(id=2, value=2))
        savepoint.rollback()
    with sqlite_file.connect() as connection:
        assert connection.execute(sa.select(counter_table.c.id)).scalars().all() == [1]


def test_sqlite_autocommit_connections_skip_begin_and_leave_the_pool_transactional(
        sqlite_file: sa.Engine) -> None:
    metadata.create_all(sqlite_file)
    with sqlite_file.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(counter_table.insert().values(id=1, value=1))
        assert not connection.connection.driver_connection.in_transaction  # type: ignore[union-attr]
    # The same pooled connection again: back to one transaction from the first statement.
    with sqlite_file.connect() as connection:
        connection.execute(counter_table.insert().values(id=2, value=2))
        connection.rollback()
    with sqlite_file.connect() as connection:
        assert connection.execute(sa.select(counter_table.c.id)).scalars().all() == [1]


def test_sqlite_concurrent_read_modify_write_transactions_all_succeed(
        sqlite_file: sa.Engine) -> None:
    """Each transaction reads the counter, then writes it: the lock upgrade that fails with
    "database is locked" under a deferred BEGIN. Exact total: no failure and no lost update."""
    threads, transactions = 4, 50
    metadata.create_all(sqlite_file)
    with sqlite_file.begin() as connection:
        connection.execute(counter_table.insert().values(id=1, value=0))
    start = threading.Barrier(threads)
    failures: list[BaseException] = []

    def work() -> None:
        try:
            start.wait()
            for _ in range(transactions):
                with sqlite_file.begin() as connection:
                    value = connection.execute(sa.select(counter_table.c.value)
                                               .where(counter_table.c.id == 1)).scalar_one()
                    connection.execute(counter_table.update().where(counter_table.c.id == 1)
                                       .values(value=value + 1))
        except BaseException as exc:  # reported below, with the total
            failures.append(exc)

    workers = [threading.Thread(target=work, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not any(worker.is_alive() for worker in workers)
    assert failures == []
    with sqlite_file.connect() as connection:
        total = connection.execute(sa.select(counter_table.c.value)).scalar_one()
    assert total == threads * transactions


def test_sqlite_memory_database_is_shared_by_all_threads() -> None:
    engine = make_engine("sqlite:///:memory:")
    try:
        metadata.create_all(engine)

        def insert() -> None:
            with engine.begin() as connection:
                connection.execute(counter_table.insert().values(id=1, value=7))

        thread = threading.Thread(target=insert)
        thread.start()
        thread.join()
        with engine.connect() as connection:
            assert connection.execute(sa.select(counter_table.c.value)).scalar_one() == 7
            assert _pragma(connection, "foreign_keys") == 1
    finally:
        engine.dispose()


def test_sessions_keep_their_values_after_commit(sqlite_file: sa.Engine) -> None:
    upgrade(sqlite_file)
    sessions = make_sessionmaker(sqlite_file)
    with sessions() as session:
        row = TemplateRow(id="t1", text="heat_template_version: 2018-08-31", created_at=1.0)
        session.add(row)
        session.commit()
        with StatementCounter(sqlite_file) as counter:
            assert (row.text, row.files) == ("heat_template_version: 2018-08-31", {})
            assert counter.snapshot() == StatementCounts()  # nothing was reloaded


def test_sqlite_schema_is_current_only_after_upgrade(sqlite_file: sa.Engine) -> None:
    assert not schema_is_current(sqlite_file)
    upgrade(sqlite_file)
    assert schema_is_current(sqlite_file)


# --- engine options -------------------------------------------------------------------------


def test_postgresql_engine_options() -> None:
    # No server needed: create_engine does not connect.
    engine = make_engine("postgresql+psycopg2://someone:secret@db.invalid/convergence")
    assert not engine.pool._pre_ping  # tested when idle instead (below)
    assert engine.pool.size() == 10  # type: ignore[attr-defined]
    assert engine.dialect.executemany_mode is EXECUTEMANY_VALUES_PLUS_BATCH  # type: ignore[attr-defined]


def _backend(engine: sa.Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(sa.select(sa.func.pg_backend_pid())).scalar_one())


def test_postgresql_a_connection_idle_past_the_window_is_tested_and_replaced(
        pg_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(db, "PING_AFTER_IDLE_SECONDS", 0.0)  # any idle time is past it
    before = _backend(pg_engine)
    terminate_session(pg_engine.url, before)
    after = _backend(pg_engine)  # no error: the test found it dead and it was replaced
    assert after != before


def test_postgresql_a_connection_given_back_within_the_window_is_used_untested(
        pg_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    # Untested: a connection cut meanwhile fails its first statement (no round trip was
    # spent on testing it), the pool replaces it, and the next use gets a new one.
    monkeypatch.setattr(db, "PING_AFTER_IDLE_SECONDS", 3600.0)
    before = _backend(pg_engine)
    terminate_session(pg_engine.url, before)
    with pytest.raises(sa.exc.OperationalError) as failed:
        _backend(pg_engine)
    assert failed.value.connection_invalidated
    assert _backend(pg_engine) != before


def test_bare_postgresql_urls_use_psycopg2() -> None:
    assert make_engine("postgresql://db.invalid/convergence").dialect.driver == "psycopg2"


def test_other_databases_are_refused() -> None:
    with pytest.raises(ValueError, match=r"unsupported database mysql://u:\*\*\*@h/d"):
        make_engine("mysql://u:pw@h/d")


# --- statement counter ----------------------------------------------------------------------


def _known_sequence(engine: sa.Engine) -> None:
    """5 DBAPI calls, 1 commit, 1 rollback; 7 statements on SQLite, 5 on PostgreSQL."""
    with engine.begin() as connection:
        metadata.create_all(connection, checkfirst=False)  # 1 (CREATE TABLE)
        connection.execute(counter_table.insert().values(id=1, value=0))  # 1
        # SQLite: executemany, 3 statements in 1 call. PostgreSQL: SQLAlchemy sends one
        # multi-row INSERT instead, 1 statement.
        connection.execute(counter_table.insert(),
                           [{"id": 2, "value": 0}, {"id": 3, "value": 0}, {"id": 4, "value": 0}])
        connection.execute(sa.select(counter_table))  # 1
    with engine.connect() as connection:
        connection.execute(sa.select(counter_table))  # 1
        connection.rollback()


def test_counter_counts_a_known_sequence_on_sqlite(sqlite_file: sa.Engine) -> None:
    with StatementCounter(sqlite_file) as counter:
        _known_sequence(sqlite_file)
        assert counter.snapshot() == StatementCounts(
            statements=7, cursor_calls=5, transactions=1, rollbacks=1)


def test_counter_counts_a_known_sequence_on_postgresql(pg_engine: sa.Engine) -> None:
    with StatementCounter(pg_engine) as counter:
        _known_sequence(pg_engine)
        # An executemany UPDATE goes through psycopg2's execute_batch: one call, 3 statements.
        with pg_engine.begin() as connection:
            connection.execute(
                counter_table.update().where(counter_table.c.id == sa.bindparam("key"))
                .values(value=sa.bindparam("new")),
                [{"key": 1, "new": 5}, {"key": 2, "new": 5}, {"key": 3, "new": 5}])
        assert counter.snapshot() == StatementCounts(
            statements=5 + 3, cursor_calls=5 + 1, transactions=2, rollbacks=1)


def test_counter_counts_a_multi_row_insert_batch_once(sqlite_file: sa.Engine) -> None:
    metadata.create_all(sqlite_file)
    with StatementCounter(sqlite_file) as counter, sqlite_file.begin() as connection:
        ids = connection.execute(counter_table.insert().returning(counter_table.c.id),
                                 [{"id": i, "value": 0} for i in range(1, 6)]).scalars().all()
        assert sorted(ids) == [1, 2, 3, 4, 5]
        assert counter.snapshot().statements == 1  # INSERT ... VALUES (...) x 5 ... RETURNING


def test_counter_reset_snapshot_and_close(sqlite_file: sa.Engine) -> None:
    counter = StatementCounter(sqlite_file)
    with sqlite_file.begin() as connection:
        connection.execute(sa.text("SELECT 1"))
    before = counter.snapshot()
    assert before == StatementCounts(statements=1, cursor_calls=1, transactions=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        before.statements = 0  # type: ignore[misc]
    with sqlite_file.begin() as connection:
        connection.execute(sa.text("SELECT 1"))
    assert counter.snapshot() - before == StatementCounts(
        statements=1, cursor_calls=1, transactions=1)
    assert counter.snapshot().per(2)["statements"] == 1.0
    counter.reset()
    assert counter.snapshot() == StatementCounts()
    counter.close()
    counter.close()  # idempotent
    with sqlite_file.begin() as connection:
        connection.execute(sa.text("SELECT 1"))
    assert counter.snapshot() == StatementCounts()


def test_counter_is_exact_under_threads(sqlite_file: sa.Engine) -> None:
    threads, transactions = 8, 25
    start = threading.Barrier(threads)
    with StatementCounter(sqlite_file) as counter:

        def work() -> None:
            start.wait()
            for _ in range(transactions):
                with sqlite_file.begin() as connection:
                    connection.execute(sa.text("SELECT 1"))
                    connection.execute(sa.text("SELECT 2"))

        workers = [threading.Thread(target=work, daemon=True) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        assert not any(worker.is_alive() for worker in workers)
        assert counter.snapshot() == StatementCounts(
            statements=2 * threads * transactions, cursor_calls=2 * threads * transactions,
            transactions=threads * transactions)


# --- the shared "PostgreSQL or skip" logic --------------------------------------------------


@pytest.mark.parametrize(("ci", "outcome"), [("", pytest.skip.Exception),
                                             ("true", pytest.fail.Exception)])
def test_unreachable_postgres_skips_outside_ci_and_fails_in_ci(
        monkeypatch: pytest.MonkeyPatch, ci: str, outcome: type[BaseException]) -> None:
    # Port 1: nothing listens there, so the connection is refused at once.
    monkeypatch.setenv("CONVERGENCE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:1/x")
    monkeypatch.setenv("CI", ci)
    conftest_services._unreachable_reason.cache_clear()
    try:
        with pytest.raises(outcome, match=r"PostgreSQL unreachable at 127\.0\.0\.1:1"):
            conftest_services.postgres_url("anything")
    finally:
        conftest_services._unreachable_reason.cache_clear()


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_failed_statement_names_no_value(database: str, tmp_path: Path) -> None:
    # A statement's values may be a stack's hidden parameters: neither the error nor what is
    # logged from it shows them.
    if database == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    else:
        url = postgres_url(PG_DATABASE)
        reset_postgres_schema(url)
        engine = make_engine(url)
    try:
        metadata.create_all(engine)
        with engine.begin() as connection:
            connection.execute(counter_table.insert().values(id=1, value=7))
        with pytest.raises(sa.exc.IntegrityError) as info, engine.begin() as connection:
            connection.execute(counter_table.insert().values(id=1, value=424242))
        assert "424242" not in str(info.value)
        assert "hidden" in str(info.value)  # SQLAlchemy says the parameters were hidden
    finally:
        engine.dispose()
