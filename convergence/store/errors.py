"""Telling a database outage from a bug.

A connection refused, a server shutting down or starting up, a session killed under a
transaction: the work in hand did nothing wrong and is to be done again once the database is
back. Callers: ``Store.unreachable`` (``store/transactions.py``), which the engine's step
runner (an outage must not fail a resource) and the API's error handler ask; the entity
tables of plugin backends (``entity_tables.py``: for the test entity backend its database is
its "cloud", and unreachable a transient API error).
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not be reached or dropped the connection
    (or refused the transaction for now: a deadlock victim, a lock timeout)."""
    if not isinstance(exc, DBAPIError):
        return False
    return exc.connection_invalidated or isinstance(exc, (OperationalError, InterfaceError))
