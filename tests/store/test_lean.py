"""Statements run through the driver's cursor (``store/lean.py``), on both databases: the rows,
values and changes are SQLAlchemy's own for the same statement, whatever the length of its IN
lists; the statement counter sees them; a driver's error comes out as SQLAlchemy's, and a
connection the server dropped is invalidated and replaced."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy import bindparam, insert, select, update

from convergence.store.lean import Lean
from convergence.store.metrics import StatementCounter
from convergence.store.rows import T_NODE, T_RES, T_STACK, T_TRAV
from convergence.store.transactions import Store
from tests.conftest_services import terminate_session
from tests.store.conftest import on_database

_SEQS = T_NODE.c.seq.in_(bindparam("seqs", expanding=True))
_NODES = select(T_NODE).where(T_NODE.c.traversal_id == bindparam("trav"), _SEQS,
                              T_NODE.c.state.in_(("READY", "WAITING"))).order_by(T_NODE.c.seq)
_FINISH = update(T_NODE).where(T_NODE.c.traversal_id == bindparam("trav"), _SEQS).values(
    state=bindparam("_state"), woken=bindparam("_woken"),
    successors=bindparam("_successors"), updated_at=bindparam("_now")).returning(*T_NODE.c)
_TRAV_AND_STACK = select(T_TRAV, T_STACK).join(T_STACK, T_STACK.c.id == T_TRAV.c.stack_id) \
    .where(T_TRAV.c.id == bindparam("trav"))
_NODE_ROW = insert(T_NODE).values({c.name: bindparam(c.name) for c in T_NODE.c})


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    yield from on_database(request)


def _node(seq: int, **values: object) -> dict[str, object]:
    return {"traversal_id": "t1", "seq": seq, "record_id": seq, "name": f"r'{seq}é",
            "phase": "converge", "pending": seq % 3, "state": "READY" if seq % 2 else "WAITING",
            "woken": seq % 4 == 0, "wake_at": None if seq % 5 else 1.5 * seq,
            "successors": [seq + 1, -seq] if seq % 3 else [], "updated_at": 0.25 + seq,
            **values}


def _stack_and_traversal(store: Store) -> str:
    with store.begin() as tx:
        tx.insert_stack("s1", "tenant", "s", timeout_mins=None, disable_rollback=True)
        return tx.insert_traversal("s1", 1, "CREATE", None, None, observe=True)


def test_rows_are_sqlalchemys_own_whatever_the_in_lists_length(store: Store) -> None:
    lean = Lean(_NODES)
    with store.begin() as tx:
        Lean(_NODE_ROW).many(tx.conn, [_node(seq) for seq in range(1, 41)])
    with store.begin() as tx:
        for seqs in ([7], [1, 2, 3], list(range(1, 41)), [2, 99], [99], [5, 4, 5]):
            params = {"trav": "t1", "seqs": seqs}
            expected = tx.conn.execute(_NODES, params).all()
            got = lean.rows(tx.conn, params)
            assert [tuple(r) for r in got] == [tuple(r) for r in expected]
            assert [r._asdict() for r in got] == [r._asdict() for r in expected]
        # Values as SQLAlchemy reads them: JSON lists, booleans, None, floats, quotes, unicode.
        (seven,) = lean.rows(tx.conn, {"trav": "t1", "seqs": [20]})
        assert (seven.successors, seven.woken, seven.wake_at, seven.name) == \
            ([21, -20], True, 30.0, "r'20é")
        assert lean.rows(tx.conn, {"trav": "other", "seqs": [1, 2]}) == []
        for n in range(1, 41):  # IN lists of every length up to 40: sent as 1 to 64
            got = lean.rows(tx.conn, {"trav": "t1", "seqs": list(range(n, 0, -1))})
            assert [r.seq for r in got] == list(range(1, n + 1))
    # A form per size of IN list, not per length: a worker's statements stay a few.
    assert len(lean._forms) == 7


def test_changes_are_written_with_their_values_converted(store: Store) -> None:
    with store.begin() as tx:
        Lean(_NODE_ROW).many(tx.conn, [_node(seq) for seq in range(1, 11)])
    lean = Lean(_FINISH)
    with store.begin() as tx:
        changed = lean.rows(tx.conn, {"trav": "t1", "seqs": [2, 3, 11], "_state": "DONE",
                                      "_woken": True, "_successors": {"a": [1, "b"]},
                                      "_now": 9.5})
        assert [(r.seq, r.state, r.woken, r.successors, r.updated_at) for r in changed] == [
            (2, "DONE", True, {"a": [1, "b"]}, 9.5), (3, "DONE", True, {"a": [1, "b"]}, 9.5)]
    with store.begin() as tx:  # as SQLAlchemy reads them back, from another statement
        rows = tx.conn.execute(select(T_NODE).where(T_NODE.c.seq.in_([1, 2, 3]))
                               .order_by(T_NODE.c.seq)).all()
        assert [(r.seq, r.state, r.woken, r.successors) for r in rows] == [
            (1, "READY", False, [2, -1]), (2, "DONE", True, {"a": [1, "b"]}),
            (3, "DONE", True, {"a": [1, "b"]})]
        counted = Lean(update(T_NODE).where(T_NODE.c.seq > bindparam("after"))
                       .values(pending=0))
        assert counted.count(tx.conn, {"after": 7}) == 3


def test_a_join_reads_both_tables_columns(store: Store) -> None:
    trav = _stack_and_traversal(store)
    with store.begin() as tx:
        expected = tx.conn.execute(_TRAV_AND_STACK, {"trav": trav}).one()
        (got,) = Lean(_TRAV_AND_STACK).rows(tx.conn, {"trav": trav})
        assert tuple(got) == tuple(expected)
        assert got.observe is True and got.name == "s"


def test_the_statement_counter_counts_them(store: Store) -> None:
    with StatementCounter(store.engine) as counter, store.begin() as tx:
        Lean(_NODE_ROW).many(tx.conn, [_node(seq) for seq in range(1, 6)])
        Lean(_NODES).rows(tx.conn, {"trav": "t1", "seqs": [1, 2]})
        counts = counter.snapshot()
    assert counts.statements == 6


def test_a_drivers_error_is_sqlalchemys_and_changes_nothing(store: Store) -> None:
    with store.begin() as tx:
        Lean(_NODE_ROW).many(tx.conn, [_node(1)])
    with pytest.raises(sa.exc.IntegrityError), store.begin() as tx:
        Lean(_NODE_ROW).many(tx.conn, [_node(2), _node(1, name="again")])
    with store.begin() as tx:
        assert [r.name for r in Lean(_NODES).rows(tx.conn, {"trav": "t1", "seqs": [1, 2]})] \
            == ["r'1é"]


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_postgresql_a_dropped_connection_is_invalidated_and_replaced(store: Store) -> None:
    lean = Lean(select(T_RES.c.id).where(T_RES.c.id.in_(bindparam("ids", expanding=True))))
    with store.engine.connect() as conn:
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        terminate_session(store.engine.url, pid)
        with pytest.raises(sa.exc.OperationalError) as failed:
            lean.rows(conn, {"ids": [1]})
        assert failed.value.connection_invalidated
        assert conn.invalidated
    with store.begin() as tx:  # the pool gives a new session
        assert tx.conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one() != pid
        assert lean.rows(tx.conn, {"ids": [1, 2]}) == []
