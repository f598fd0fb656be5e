"""``Store.transact``: a request chosen as a deadlock's victim runs again, on PostgreSQL.

A real deadlock: the request updates stack s1 then s2; another session holds s2 and then
wants s1. PostgreSQL aborts the request (its deadlock check runs first: the other session's
``deadlock_timeout`` is long), ``transact`` runs the request again in a new transaction, and
both writes land once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from convergence.errors import Conflict
from convergence.store.db import make_engine
from convergence.store.migrate import upgrade
from convergence.store.transactions import Store, Tx
from tests.conftest_services import postgres_url, reset_postgres_schema

PG_DATABASE = "convergence_test_transact"


@pytest.fixture
def store() -> Iterator[Store]:
    url = postgres_url(PG_DATABASE)
    reset_postgres_schema(url)
    upgrade(url)
    engine = make_engine(url)
    with engine.begin() as conn:
        tx = Tx(conn, 1.0)
        for sid in ("s1", "s2"):
            tx.insert_stack(sid, "t", sid, timeout_mins=None, disable_rollback=False)
    yield Store(engine)
    engine.dispose()


def reason(store: Store, sid: str) -> str:
    with store.begin() as tx:
        stack = tx.stack(sid)
        assert stack is not None
        return stack.status_reason


def test_a_deadlock_victim_runs_again_and_lands_once(store: Store) -> None:
    holds_s2, holds_s1 = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def other() -> None:
        try:
            with store.engine.begin() as conn:
                conn.execute(sa.text("SET LOCAL deadlock_timeout = '20s'"))
                conn.execute(sa.text("UPDATE stacks SET status_reason = 'other' "
                                     "WHERE id = 's2'"))
                holds_s2.set()
                holds_s1.wait(10)
                conn.execute(sa.text("UPDATE stacks SET status_reason = 'other' "
                                     "WHERE id = 's1'"))
        except BaseException as exc:
            errors.append(exc)

    attempts: list[int] = []

    def request(tx: Tx) -> str:
        attempts.append(len(attempts) + 1)
        tx.update_stack("s1", status_reason=f"request {len(attempts)}")
        if len(attempts) == 1:
            holds_s1.set()
            holds_s2.wait(10)
        tx.update_stack("s2", status_reason=f"request {len(attempts)}")
        return "done"

    thread = threading.Thread(target=other)
    thread.start()
    holds_s2.wait(10)
    assert store.transact(request) == "done"
    thread.join(30)
    assert errors == []
    # The first attempt was rolled back; the second, after the other session, is what holds.
    assert (reason(store, "s1"), reason(store, "s2")) == ("request 2", "request 2")
    assert len(attempts) == 2


def test_other_errors_are_not_retried(store: Store) -> None:
    def duplicate(tx: Tx) -> None:
        tx.insert_stack("s1", "t", "again", timeout_mins=None, disable_rollback=False)

    with pytest.raises(IntegrityError):
        store.transact(duplicate)


def test_a_live_name_is_taken_once_per_tenant(store: Store) -> None:
    """The unique index decides, not a look-up before the insert: a second live stack of a
    name in a tenant is a Conflict; another tenant, or a name freed by a delete, is not."""
    taken = pytest.raises(Conflict, match=r"The Stack \(s1\) already exists")
    with taken, store.begin() as tx:
        tx.insert_stack("s3", "t", "s1", timeout_mins=None, disable_rollback=False)
    with store.begin() as tx:
        tx.insert_stack("s4", "other", "s1", timeout_mins=None, disable_rollback=False)
        tx.update_stack("s1", deleted_at=tx.now)
        tx.insert_stack("s5", "t", "s1", timeout_mins=None, disable_rollback=False)
        assert [s.id for s in tx.stacks("t")] == ["s2", "s5"]
