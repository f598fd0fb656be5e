"""A batch's statements go in by what the batch names (its seqs, its records, its names), on
both databases, whatever the planner's figures say about the traversal or stack.

PostgreSQL's planner takes a traversal begun after the last ANALYZE to match one row: it
then went in by the traversal alone and filtered a batch's 200 nodes out of the whole plan,
and each batch read the plan. Here a first traversal (and stack) is analysed, a second one
is written after it, and the second one's batch statements are explained: each must look
its rows up by seq (or record, or name), not scan the traversal (or stack) for them. The
statements are the store's own, captured as they run; what they return is checked too.
The tables are small enough to read whole, so PostgreSQL explains them with sequential
scans turned off: the plan then shows the index a big table would be read by.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import event

from convergence.ports.views import DONE, READY, WAITING
from convergence.store.transactions import Store
from tests.store.conftest import on_database

SIZE = 3000  # nodes of each traversal, records of each stack


@dataclass(frozen=True)
class Node:
    seq: int
    name: str
    record_id: int | None
    pending: int
    phase: str = "converge"
    successors: tuple[int, ...] = field(default=())


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    yield from on_database(request)


def _fill(store: Store, stack: str, trav: str, state_of: int) -> dict[str, int]:
    """A stack of SIZE records and a traversal of SIZE nodes on them (pending ``state_of``)."""
    with store.begin() as tx:
        tx.insert_stack(stack, "t", stack, timeout_mins=None, disable_rollback=True)
        ids = tx.insert_records(stack, [(f"r{i:05d}", "OS::Heat::None") for i in range(SIZE)])
        tx.insert_nodes(trav, [Node(i, f"r{i:05d}", ids[f"r{i:05d}"], state_of)
                               for i in range(SIZE)])
    return ids


@pytest.fixture
def analysed(store: Store) -> dict[str, int]:
    """Stack ``a`` and traversal ``ta`` analysed (on PostgreSQL, as its autovacuum does; the
    engine never analyses SQLite); then stack ``b`` and traversal ``tb``, which the figures
    know nothing of. Returns ``b``'s record ids by name."""
    _fill(store, "a", "ta", 0)
    if store.engine.dialect.name == "postgresql":
        with store.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()
    return _fill(store, "b", "tb", 1)


def _explained(store: Store, run: Any) -> tuple[Any, list[str]]:
    """What ``run(tx)`` returns, and the plan of each statement it sent to the nodes or the
    records (one text each)."""
    sent: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
                executemany: bool) -> None:
        sent.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        with store.begin() as tx:
            result = run(tx)
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)
    plans = []
    sqlite = store.engine.dialect.name == "sqlite"
    raw = store.engine.raw_connection()
    try:
        cursor = raw.cursor()
        if not sqlite:
            # Tables this small are best read whole; the question is which index a big
            # one would be read by.
            cursor.execute("SET enable_seqscan = off")
        for statement, parameters in sent:
            if not any(f" {t}" in statement for t in ("nodes", "resources")):
                continue  # the transaction's own (SQLite's BEGIN IMMEDIATE)
            cursor.execute(("EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN ") + statement,
                           parameters)
            plans.append(" | ".join(str(row[-1]).strip() for row in cursor.fetchall()))
    finally:
        raw.rollback()
        raw.close()
    return result, plans


def _by(plan: str, column: str, sqlite: bool) -> bool:
    """Whether the plan looks its rows up by ``column`` (not the key alone, then a filter)."""
    if sqlite:  # SEARCH nodes USING INDEX sqlite_autoindex_nodes_1 (seq=? AND traversal_id=?)
        return re.search(rf"USING .*INDEX \S+ \([^)]*\b{column}=\?", plan) is not None
    # Index Cond: ((seq = ANY ('{...}'::integer[])) AND ((traversal_id)::text = ($0)::text))
    conditions = [p for p in plan.split(" | ") if p.startswith("Index Cond:")]
    return bool(conditions) and all(
        re.search(rf"\(\(?{column}\)?(::\w+)? = ANY", c) is not None for c in conditions)


def test_a_batch_finishes_and_releases_its_nodes_by_seq(store: Store,
                                                        analysed: dict[str, int]) -> None:
    sqlite = store.engine.dialect.name == "sqlite"
    seqs = list(range(1000, 1200))
    finished, plans = _explained(store, lambda tx: tx.finish_nodes("tb", seqs, DONE))
    assert sorted(n.seq for n in finished) == seqs
    assert all(n.state == DONE for n in finished)
    assert plans and all(_by(p, "seq", sqlite) for p in plans), plans

    released, plans = _explained(
        store, lambda tx: tx.release_successors("tb", dict.fromkeys(range(1500, 1700), 1)))
    assert [n.seq for n in released] == list(range(1500, 1700))
    assert all(n.state == READY and n.pending == 0 for n in released)
    assert plans and all(_by(p, "seq", sqlite) for p in plans), plans

    read, plans = _explained(store, lambda tx: tx.nodes("tb", range(2000, 2200)))
    assert [(n.seq, n.state) for n in read] == [(s, WAITING) for s in range(2000, 2200)]
    assert plans and all(_by(p, "seq", sqlite) for p in plans), plans


def test_a_batch_finds_its_nodes_by_record_and_its_records_by_name(
        store: Store, analysed: dict[str, int]) -> None:
    sqlite = store.engine.dialect.name == "sqlite"
    with store.begin() as tx:
        tx.release_successors("tb", dict.fromkeys(range(100, 300), 1))
    records = [analysed[f"r{i:05d}"] for i in range(100, 300)]
    found, plans = _explained(store, lambda tx: tx.current_nodes_of("tb", records))
    assert found == list(range(100, 300))
    assert plans and all(_by(p, "record_id", sqlite) for p in plans), plans

    names = [f"r{i:05d}" for i in range(700, 900)]
    heads, plans = _explained(store, lambda tx: tx.heads("b", names))
    assert {n: r.id for n, r in heads.items()} == {n: analysed[n] for n in names}
    assert plans and all(_by(p, "name", sqlite) for p in plans), plans
