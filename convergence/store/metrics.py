"""Counting the database work an engine does: statements, commits, rollbacks.

Callers: the benchmarks, which divide the counts by the number of resources to report the
database cost of a stack operation, the workers' figures for them
(``convergence.workers.stats``), and tests that pin that cost down.

What counts as a statement is what the server executes:

- ``cursor.execute()``: one;
- ``cursor.executemany()`` with N parameter sets: N, however the driver batches them into
  round trips (psycopg2's execute_batch sends many per round trip; SQLite runs each);
- an "insertmanyvalues" batch (SQLAlchemy's multi-row ``INSERT ... VALUES (...), (...)``): one
  per batch, since the server executes each batch as a single statement;
- the ``BEGIN IMMEDIATE`` the SQLite engine emits: none (marked with
  ``db.TRANSACTION_CONTROL``), as PostgreSQL's BEGIN, sent by the driver, is not seen either.
  COMMIT and ROLLBACK are counted as transactions and rollbacks, not as statements; nor are
  connection setup (SQLite pragmas) and pool pre-ping queries, which bypass the events.

``cursor_calls`` counts the DBAPI calls, i.e. the statements as the client issues them.
``rollbacks`` includes the rollback that ends a connection block left without commit, such as a
read-only ``with engine.connect()``: the server does receive it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine import Connection, ExecutionContext
from sqlalchemy.engine.interfaces import ExecuteStyle

from convergence.store.db import TRANSACTION_CONTROL


@dataclass(frozen=True, slots=True)
class StatementCounts:
    statements: int = 0
    cursor_calls: int = 0
    transactions: int = 0  # commits
    rollbacks: int = 0

    def __sub__(self, other: StatementCounts) -> StatementCounts:
        return StatementCounts(
            statements=self.statements - other.statements,
            cursor_calls=self.cursor_calls - other.cursor_calls,
            transactions=self.transactions - other.transactions,
            rollbacks=self.rollbacks - other.rollbacks,
        )

    def per(self, count: int) -> dict[str, float]:
        """Each figure divided by ``count`` (e.g. resources), for reports."""
        return {
            "statements": self.statements / count,
            "cursor_calls": self.cursor_calls / count,
            "transactions": self.transactions / count,
            "rollbacks": self.rollbacks / count,
        }


class StatementCounter:
    """Counts the work done through ``engine`` from creation until ``close()``; thread-safe.

    Use as a context manager, or call ``close()`` to detach the listeners.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        # Events fire on whichever thread runs the statement; += is not atomic.
        self._lock = threading.Lock()
        self._statements = 0
        self._cursor_calls = 0
        self._transactions = 0
        self._rollbacks = 0
        self._attached = True
        event.listen(engine, "before_cursor_execute", self._on_cursor_execute)
        event.listen(engine, "commit", self._on_commit)
        event.listen(engine, "rollback", self._on_rollback)

    def snapshot(self) -> StatementCounts:
        with self._lock:
            return StatementCounts(
                statements=self._statements,
                cursor_calls=self._cursor_calls,
                transactions=self._transactions,
                rollbacks=self._rollbacks,
            )

    def reset(self) -> None:
        with self._lock:
            self._statements = self._cursor_calls = 0
            self._transactions = self._rollbacks = 0

    def close(self) -> None:
        if not self._attached:
            return
        self._attached = False
        event.remove(self._engine, "before_cursor_execute", self._on_cursor_execute)
        event.remove(self._engine, "commit", self._on_commit)
        event.remove(self._engine, "rollback", self._on_rollback)

    def __enter__(self) -> StatementCounter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _on_cursor_execute(self, _conn: Connection, _cursor: Any, _statement: str,
                           parameters: Any, context: ExecutionContext | None,
                           executemany: bool) -> None:
        if context is not None and context.execution_options.get(TRANSACTION_CONTROL):
            return
        multi_row_insert = (context is not None
                            and context.execute_style is ExecuteStyle.INSERTMANYVALUES)
        if executemany and parameters is not None and not multi_row_insert:
            statements = len(parameters)
        else:
            statements = 1
        with self._lock:
            self._statements += statements
            self._cursor_calls += 1

    def _on_commit(self, _conn: Connection) -> None:
        with self._lock:
            self._transactions += 1

    def _on_rollback(self, _conn: Connection) -> None:
        with self._lock:
            self._rollbacks += 1
