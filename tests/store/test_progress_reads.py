"""The read behind a request's progress: a few names of the stack's resources in progress
(``Tx.names_in_status``), on SQLite: what it answers, and that it is read from
``ix_resources_stack_status`` alone (the plan of the very statement the store sends), so that
it costs the same on a stack of any size.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from convergence.store.db import make_engine
from convergence.store.migrate import upgrade
from convergence.store.transactions import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    url = f"sqlite:///{tmp_path / 'progress.db'}"
    upgrade(url)
    engine = make_engine(url)
    made = Store(engine)
    with made.begin() as tx:
        for sid in ("s1", "s2"):
            tx.insert_stack(sid, "t", sid, timeout_mins=None, disable_rollback=False)
            ids = tx.insert_records(sid, [(f"r{i:02}", "OS::Heat::None") for i in range(30)])
            for name in ("r25", "r03", "r17", "r09", "r11"):  # in progress
                tx.set_record_state(ids[name], "CREATE", "IN_PROGRESS", "")
        # A second version of r03 in progress beside the first: the name is told once.
        old = tx.records_by_id([ids["r03"]])[ids["r03"]]
        new = tx.insert_replacement(old, old.fencing_token, "OS::Heat::None")
        assert new is not None
        tx.set_record_state(new, "CREATE", "IN_PROGRESS", "")
    yield made
    engine.dispose()


def test_the_first_names_in_progress_in_name_order_each_once(store: Store) -> None:
    with store.read() as tx:
        assert tx.names_in_status("s1", "IN_PROGRESS", 3) == ["r03", "r09", "r11"]
        assert tx.names_in_status("s1", "IN_PROGRESS", 10) == ["r03", "r09", "r11", "r17",
                                                               "r25"]
        assert tx.names_in_status("s2", "IN_PROGRESS", 2) == ["r03", "r09"]
        assert tx.names_in_status("s1", "FAILED", 3) == []
        assert tx.names_in_status("nope", "IN_PROGRESS", 3) == []


def test_it_is_read_from_the_status_index_alone(store: Store) -> None:
    sent: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
                executemany: bool) -> None:
        sent.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        with store.read() as tx:
            tx.names_in_status("s1", "IN_PROGRESS", 4)
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)
    statement, parameters = sent[-1]
    raw = store.engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("EXPLAIN QUERY PLAN " + statement, parameters)
        plan = " | ".join(str(row[-1]) for row in cursor.fetchall())
    finally:
        raw.close()
    assert plan == "SEARCH resources USING COVERING INDEX ix_resources_stack_status " \
        "(stack_id=? AND status=?)", plan
