"""Migrations (``store/migrate.py``, ``store/migrations``): the migrated schema is the models'
schema exactly, on SQLite and on PostgreSQL; upgrading is idempotent and safe to run from
several processes at once; the embedded database migrates itself, PostgreSQL is migrated
explicitly (``convergence db upgrade``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from click.testing import CliRunner

from convergence.cli import cli
from convergence.store.db import (
    current_revisions,
    head_revisions,
    make_engine,
    schema_is_current,
    script_directory,
)
from convergence.store.migrate import (
    SchemaError,
    alembic_config,
    ensure_schema,
    migration_connection,
    upgrade,
)
from convergence.store.models import Base, TestEntityRow
from tests.conftest_services import postgres_url, reset_postgres_schema

PG_DATABASE = "convergence_test_store"
# The newest migration: every upgrade below must end there.
HEAD = "0020"
STORE = Path(__file__).resolve().parents[2] / "convergence" / "store"


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[sa.Engine]:
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


@pytest.fixture(params=["sqlite_engine", "pg_engine"], ids=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest) -> sa.Engine:
    fixture: sa.Engine = request.getfixturevalue(request.param)
    return fixture


def differences(engine: sa.Engine) -> list[object]:
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "compare_server_default": True})
        return list(compare_metadata(context, Base.metadata))


def tables(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def schema_snapshot(engine: sa.Engine) -> dict[str, object]:
    """Tables, columns, keys and indexes as plain comparable data."""
    inspector = sa.inspect(engine)
    return {
        table: (
            [(c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(table)],
            inspector.get_pk_constraint(table),
            sorted(str(fk) for fk in inspector.get_foreign_keys(table)),
            sorted(_index(ix) for ix in inspector.get_indexes(table)),
        )
        for table in inspector.get_table_names()
    }


def _index(ix: object) -> str:
    # A partial index's predicate comes back as a SQL expression object: compare its text.
    assert isinstance(ix, dict)
    options = {k: str(v) for k, v in ix.get("dialect_options", {}).items()}
    return str({**ix, "dialect_options": options})


def downgrade(engine: sa.Engine, revision: str) -> None:
    with migration_connection(engine) as connection:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


def test_one_linear_history() -> None:
    # Two heads would mean two migrations written in parallel and never merged.
    assert head_revisions() == {HEAD}
    assert [s.revision for s in script_directory().walk_revisions()][-1] == "0001"


def test_migrated_schema_matches_the_models(engine: sa.Engine) -> None:
    assert upgrade(engine) == HEAD
    assert differences(engine) == []
    assert tables(engine) == set(Base.metadata.tables) | {"alembic_version"}


def test_upgrade_is_idempotent(engine: sa.Engine) -> None:
    upgrade(engine)
    schema = schema_snapshot(engine)
    assert upgrade(engine) == HEAD
    assert schema_snapshot(engine) == schema
    assert differences(engine) == []


def test_downgrade_to_base_and_back(engine: sa.Engine) -> None:
    upgrade(engine)
    downgrade(engine, "base")
    assert tables(engine) == {"alembic_version"}
    assert current_revisions(engine) == frozenset()
    assert upgrade(engine) == HEAD
    assert differences(engine) == []


_UPGRADE_AT = """
import sys, time
from convergence.store.migrate import upgrade
url, start_at = sys.argv[1], float(sys.argv[2])
time.sleep(max(0.0, start_at - time.time()))
print(upgrade(url))
"""


def test_concurrent_upgrades_from_several_processes_serialise(engine: sa.Engine) -> None:
    """Processes starting together: one migrates, the others wait and find nothing to do."""
    url = engine.url.render_as_string(hide_password=False)
    start_at = time.time() + 3  # after every interpreter has imported SQLAlchemy and Alembic
    processes = [subprocess.Popen([sys.executable, "-c", _UPGRADE_AT, url, str(start_at)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(4)]
    outcomes = [process.communicate(timeout=120) for process in processes]
    assert [(process.returncode, out.strip()) for process, (out, _) in zip(
        processes, outcomes, strict=True)] == [(0, HEAD)] * 4, [err for _, err in outcomes]
    assert differences(engine) == []


def test_concurrent_upgrades_from_several_threads_serialise(sqlite_engine: sa.Engine) -> None:
    threads = 4
    start = threading.Barrier(threads)
    results: list[object] = []

    def work() -> None:
        own = make_engine(sqlite_engine.url.render_as_string(hide_password=False))
        try:
            start.wait()
            results.append(upgrade(own))
        except BaseException as exc:  # compared below
            results.append(exc)
        finally:
            own.dispose()

    # Daemons with a join timeout: a broken lock shows as a failure, not a hung test run.
    workers = [threading.Thread(target=work, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not any(worker.is_alive() for worker in workers)
    assert results == [HEAD] * threads


def test_migrated_sqlite_enforces_foreign_keys_again(sqlite_engine: sa.Engine) -> None:
    # The run turns enforcement off on its connection; the pool must not get it back that way.
    upgrade(sqlite_engine)
    with sqlite_engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        with pytest.raises(sa.exc.IntegrityError):
            connection.exec_driver_sql(
                "INSERT INTO traversals (id, stack_id, generation, action, state, nodes_total, "
                "nodes_remaining, nodes_failed, failure, created_at) "
                "VALUES ('t', 'no such stack', 1, 'CREATE', 'RUNNING', 0, 0, 0, '', 0)")


def test_upgrade_needs_no_repository_checkout(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = alembic_config()
    assert config.config_file_name is None
    assert upgrade(f"sqlite:///{tmp_path / 'elsewhere.db'}") == HEAD


def test_ensure_schema_migrates_embedded_sqlite(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'embedded.db'}")
    try:
        ensure_schema(engine)
        assert schema_is_current(engine)
        ensure_schema(engine)  # nothing to do the second time
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    finally:
        engine.dispose()


def test_ensure_schema_migrates_an_in_memory_database() -> None:
    engine = make_engine("sqlite:///:memory:")
    try:
        ensure_schema(engine)
        assert differences(engine) == []
    finally:
        engine.dispose()


def test_ensure_schema_refuses_a_stale_postgresql(pg_engine: sa.Engine) -> None:
    with pytest.raises(SchemaError, match="convergence db upgrade"):
        ensure_schema(pg_engine)
    assert tables(pg_engine) == set()  # not migrated behind the operator's back
    upgrade(pg_engine)
    ensure_schema(pg_engine)


def test_ensure_schema_refuses_a_schema_from_a_newer_version(sqlite_engine: sa.Engine) -> None:
    upgrade(sqlite_engine)
    with sqlite_engine.begin() as connection:
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(SchemaError, match="newer version"):
        ensure_schema(sqlite_engine)


def test_cli_db_upgrade(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()
    for _ in range(2):
        result = runner.invoke(cli, ["db", "upgrade"], env={"CONVERGENCE_DATABASE_URL": url})
        assert result.exit_code == 0, result.output
        assert result.output.strip() == f"{url}: at revision {HEAD}"


def test_cli_db_upgrade_reports_errors_in_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    result = CliRunner().invoke(cli, ["db", "upgrade", "--revision", "nope"],
                                env={"CONVERGENCE_DATABASE_URL": url})
    assert result.exit_code == 1
    assert "Can't locate revision identified by 'nope'" in result.output


def test_alembic_command_line_with_the_packaged_ini(tmp_path: Path) -> None:
    # A subprocess: the ini configures logging, which should not leak into this test run.
    url = f"sqlite:///{tmp_path / 'dev.db'}"
    env = {**os.environ, "CONVERGENCE_DATABASE_URL": url}
    for arguments in (["upgrade", "head"], ["check"]):
        subprocess.run([sys.executable, "-m", "alembic", "-c", str(STORE / "alembic.ini"),
                        *arguments], env=env, check=True, capture_output=True, cwd=tmp_path)
    engine = make_engine(url)
    try:
        assert schema_is_current(engine)
    finally:
        engine.dispose()


def test_unique_live_names_refuse_a_database_holding_duplicates(engine: sa.Engine) -> None:
    """Two live stacks of one name (what racing creates could leave before 0007): the upgrade
    stops, names them, and changes nothing; once one is deleted it goes through."""
    upgrade(engine, "0006")
    with engine.begin() as conn:
        for sid, deleted in (("s1", None), ("s2", None), ("s3", 5.0)):
            conn.execute(sa.text(
                "INSERT INTO stacks (id, name, tenant, generation, observed_generation, action,"
                " status, status_reason, outputs, disable_rollback, created_at, updated_at,"
                " deleted_at) VALUES (:id, 'web', 't1', 1, 1, 'CREATE', 'COMPLETE', '', '{}',"
                " false, 1.0, 1.0, :deleted)"), {"id": sid, "deleted": deleted})
    with pytest.raises(RuntimeError, match=r"tenant 't1': 'web' \(2 stacks\)"):
        upgrade(engine)
    assert current_revisions(engine) == frozenset({"0006"})
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE stacks SET deleted_at = 9.0 WHERE id = 's2'"))
    assert upgrade(engine) == HEAD


def _legacy_test_entities(engine: sa.Engine) -> None:
    """What 0001 made before ``test_entities`` had a migration of its own (0012), with a row."""
    with engine.begin() as conn:
        TestEntityRow.__table__.create(conn)
        conn.execute(sa.insert(TestEntityRow).values(id="e1", owner="s/1", value="kept",
                                                     created_at=1.0))


def test_test_entities_come_from_a_migration_of_their_own(engine: sa.Engine) -> None:
    upgrade(engine, "0011")
    assert "test_entities" not in tables(engine)
    assert upgrade(engine) == HEAD
    assert "test_entities" in tables(engine)
    downgrade(engine, "0011")
    assert "test_entities" not in tables(engine)


def test_an_existing_database_keeps_its_test_entities(engine: sa.Engine) -> None:
    """A database made when 0001 made the table: the upgrade keeps it and its rows."""
    upgrade(engine, "0011")
    _legacy_test_entities(engine)
    assert upgrade(engine) == HEAD
    assert differences(engine) == []
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT id, owner, value FROM test_entities")).all() == [
            ("e1", "s/1", "kept")]


def test_an_existing_database_downgraded_to_base_leaves_no_test_entities(
        engine: sa.Engine) -> None:
    upgrade(engine, "0011")
    _legacy_test_entities(engine)
    downgrade(engine, "base")
    assert tables(engine) == {"alembic_version"}


def test_an_existing_database_keeps_its_templates_and_their_stacks(engine: sa.Engine) -> None:
    """0018 rebuilds ``templates`` on SQLite (the text last): the rows, and the stacks that
    refer to them, are kept; a template stored before has no shown parameters (NULL)."""
    upgrade(engine, "0017")
    with engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO templates (id, text, files, environments, parameters, created_at,"
            " description) VALUES ('t1', 'heat_template_version: 2018-08-31', '{}', '[]',"
            " '{\"size\": 3}', 1.0, 'kept')"))
        conn.execute(sa.text(
            "INSERT INTO stacks (id, name, tenant, generation, observed_generation, action,"
            " status, status_reason, outputs, disable_rollback, created_at, updated_at,"
            " template_id) VALUES ('s1', 'web', 't1', 1, 1, 'CREATE', 'COMPLETE', '', '{}',"
            " false, 1.0, 1.0, 't1')"))
    assert upgrade(engine) == HEAD
    assert differences(engine) == []
    with engine.connect() as conn:
        assert conn.execute(sa.text(
            "SELECT id, text, description, shown_parameters FROM templates")).all() == [
            ("t1", "heat_template_version: 2018-08-31", "kept", None)]
        assert conn.execute(sa.text("SELECT template_id FROM stacks")).all() == [("t1",)]
        if engine.dialect.name == "sqlite":
            assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []


def test_a_template_text_is_the_last_column_on_sqlite(sqlite_engine: sa.Engine) -> None:
    """SQLite reaches a column after a big text through the text's overflow pages (megabytes
    for a big template): a stack list or show reads only the columns before it. A migration
    that adds a column to ``templates`` must rebuild the table there (as 0018 does)."""
    upgrade(sqlite_engine)
    columns = [c["name"] for c in sa.inspect(sqlite_engine).get_columns("templates")]
    assert columns[-1] == "text"
    assert columns[:-1] == [c.name for c in Base.metadata.tables["templates"].columns
                            if c.name != "text"]


def test_a_stack_outputs_are_its_last_column_on_sqlite(sqlite_engine: sa.Engine) -> None:
    """A group's nested stack keeps its member lists in ``outputs`` (megabytes for a big
    group), and every batch reads its stack: on SQLite the columns it reads come before
    them. 0020 rebuilds ``stacks`` there keeping its rows, its resources' references and the
    unique name of a live stack (a deleted one's name is free again)."""
    upgrade(sqlite_engine, "0019")
    with sqlite_engine.begin() as conn:
        for sid, deleted in (("s1", "NULL"), ("s0", "2.0")):
            conn.execute(sa.text(
                "INSERT INTO stacks (id, name, tenant, generation, observed_generation,"
                " action, status, status_reason, outputs, disable_rollback, created_at,"
                f" updated_at, deleted_at) VALUES ('{sid}', 'web', 't', 1, 1, 'CREATE',"
                f" 'COMPLETE', '', '{{\"refs\": [\"a\"]}}', 0, 1.0, 1.0, {deleted})"))
    assert upgrade(sqlite_engine) == HEAD
    assert differences(sqlite_engine) == []
    columns = [c["name"] for c in sa.inspect(sqlite_engine).get_columns("stacks")]
    assert columns[-1] == "outputs"
    assert columns[:-1] == [c.name for c in Base.metadata.tables["stacks"].columns
                            if c.name != "outputs"]
    with sqlite_engine.begin() as conn:
        assert conn.execute(sa.text("SELECT id, outputs FROM stacks ORDER BY id")).all() == [
            ("s0", '{"refs": ["a"]}'), ("s1", '{"refs": ["a"]}')]
        with pytest.raises(sa.exc.IntegrityError):
            conn.execute(sa.text(
                "INSERT INTO stacks (id, name, tenant, generation, observed_generation,"
                " action, status, status_reason, outputs, disable_rollback, created_at,"
                " updated_at) VALUES ('s2', 'web', 't', 1, 1, 'CREATE', 'COMPLETE', '', '{}',"
                " 0, 1.0, 1.0)"))
