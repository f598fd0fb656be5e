"""What the whole suite shares: which tests start processes of their own, and fresh embedded
databases made as copies of one migrated database.

The tiers that start processes of their own (``tests/faults``: private PostgreSQL, Redis and
workers; ``tests/integration``: a session's cluster of workers) are marked ``processes``.
``make test`` runs the other tests in two processes (pytest-xdist), then these, never beside
the others (whose load would squeeze their workers' timing) but two at a time as well: they
mostly wait on their processes (a quarter of a core busy on average), and each test process
has services of its own (a fault test's private PostgreSQL and Redis; a cluster of its own,
with its own database and Redis index). Databases on the shared PostgreSQL server are per
process (``tests.conftest_services.own_name``).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import sqlite3
import tempfile
import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine, make_url

from convergence.store import migrate

HERE = Path(__file__).resolve().parent
PROCESS_TIERS = (HERE / "faults", HERE / "integration")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.path.is_relative_to(tier) for tier in PROCESS_TIERS):
            item.add_marker(pytest.mark.processes)


# A fresh embedded database is migrated once per test process: every other one starts as a
# copy of it (SQLite's backup API, page by page, through SQLite's own locking), which is what
# the same migrations would have written. Migrating from scratch costs ~0.7 s of CPU (table
# rebuilds on SQLite), and most tests open a fresh database or several. The migrations
# themselves are tested where they are the subject (REAL_MIGRATIONS), and by every process
# that migrates a database of its own (the CLI, workers, the API started as a process).
REAL_MIGRATIONS = (HERE / "store" / "test_migrations.py", HERE / "store" / "test_db.py")
_real_upgrade = migrate.upgrade
_copy_lock = threading.Lock()


@functools.cache
def _migrated_copy() -> tuple[Path, str | None]:
    folder = tempfile.mkdtemp(prefix="convergence-schema-")
    atexit.register(shutil.rmtree, folder, True)
    path = Path(folder) / "head.db"
    return path, _real_upgrade(f"sqlite:///{path}")


def _upgrade_by_copy(engine_or_url: Engine | str, revision: str = "head") -> str | None:
    url = make_url(engine_or_url) if isinstance(engine_or_url, str) else engine_or_url.url
    target = url.database
    if revision != "head" or url.get_backend_name() != "sqlite" or not target or \
            target == ":memory:" or target.startswith("file:"):
        return _real_upgrade(engine_or_url, revision)
    with _copy_lock:
        source, head = _migrated_copy()
        copy = sqlite3.connect(target)
        try:
            empty = not copy.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if empty:
                original = sqlite3.connect(source)
                try:
                    original.backup(copy)
                finally:
                    original.close()
        finally:
            copy.close()
    return head if empty else _real_upgrade(engine_or_url, revision)


@pytest.fixture(autouse=True)
def _fresh_databases_by_copy(request: pytest.FixtureRequest,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.path not in REAL_MIGRATIONS:
        monkeypatch.setattr(migrate, "upgrade", _upgrade_by_copy)
