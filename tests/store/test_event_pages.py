"""Each page of a stack's events is read along an index, in its order (no sort of the stack's
events), on SQLite: the plan of the very statement the store sends, for the event list's pages
(``Tx.event_page``) and for the reads of the event stream and the long-poll
(``Tx.events``, ``Tx.project_events``). PostgreSQL's plans depend on its statistics: the
benchmark ``benchmarks/event_list.py --explain`` prints them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event

from convergence.ports.pages import EventQuery
from convergence.ports.views import NewEvent
from convergence.store.db import make_engine
from convergence.store.migrate import upgrade
from convergence.store.transactions import Store, Tx


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    url = f"sqlite:///{tmp_path / 'events.db'}"
    upgrade(url)
    engine = make_engine(url)
    made = Store(engine)
    with made.begin() as tx:
        for sid in ("s1", "s2"):
            tx.insert_stack(sid, "t", sid, timeout_mins=None, disable_rollback=False)
            tx.add_events(sid, None, 1, [
                NewEvent(f"r{i % 3}", None, "Test::A", "CREATE", ("COMPLETE", "FAILED")[i % 2])
                for i in range(20)])
    yield made
    engine.dispose()


def plan(store: Store, read: Callable[[Tx], Any]) -> str:
    """SQLite's plan of the last statement ``read`` sent."""
    sent: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
                executemany: bool) -> None:
        sent.append((statement, parameters))

    engine: Engine = store.engine
    event.listen(engine, "before_cursor_execute", capture)
    try:
        with store.read() as tx:
            read(tx)
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    statement, parameters = sent[-1]
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("EXPLAIN QUERY PLAN " + statement, parameters)
        return " | ".join(str(row[-1]) for row in cursor.fetchall())
    finally:
        raw.close()


@pytest.mark.parametrize(("query", "index"), [
    (EventQuery(limit=5), "ix_events_stack (stack_id=?)"),
    (EventQuery(limit=5, descending=True), "ix_events_stack (stack_id=?)"),
    (EventQuery(limit=5, marker=30), "ix_events_stack (stack_id=? AND id>?)"),
    (EventQuery(limit=5, marker=30, descending=True), "ix_events_stack (stack_id=? AND id<?)"),
    (EventQuery(limit=5, marker=30, resource_names=("r1",)),
     "ix_events_stack_resource (stack_id=? AND resource_name=? AND id>?)"),
    (EventQuery(limit=5, resource_names=("r1",), descending=True),
     "ix_events_stack_resource (stack_id=? AND resource_name=?)"),
    (EventQuery(limit=5, statuses=("FAILED",)), "ix_events_stack_status (stack_id=? AND status=?)"),
    (EventQuery(limit=5, statuses=("CREATE_FAILED",), marker=30),
     "ix_events_stack_status (stack_id=? AND status=? AND id>?)"),
], ids=repr)
def test_a_page_is_read_along_an_index(store: Store, query: EventQuery, index: str) -> None:
    found = plan(store, lambda tx: tx.event_page("s2", query))
    assert f"SEARCH events USING INDEX {index}" in found, found
    assert "TEMP B-TREE" not in found, found


def test_the_stream_reads_are_indexed(store: Store) -> None:
    one = plan(store, lambda tx: tx.events("s2", 25, 500))
    assert "SEARCH events USING INDEX ix_events_stack (stack_id=? AND id>?)" in one, one
    assert "TEMP B-TREE" not in one, one
    # The tenant's: each of its stacks' events after the marker, along the same index (then
    # merged in id order), never the whole table.
    every = plan(store, lambda tx: tx.project_events("t", 25, 500))
    assert "SEARCH events USING INDEX ix_events_stack (stack_id=? AND id>?)" in every, every
    assert "SCAN events" not in every, every


def test_sorting_by_type_is_a_sort(store: Store) -> None:
    # No index serves (resource_type, id): documented in store/events.py, seen here.
    assert "TEMP B-TREE FOR ORDER BY" in plan(
        store, lambda tx: tx.event_page("s2", EventQuery(limit=5, by_type=True)))
