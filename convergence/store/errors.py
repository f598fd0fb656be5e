"""Telling a database outage from a bug.

A connection refused, a server shutting down or starting up, a session killed under a
transaction: the work in hand did nothing wrong and is to be done again once the database is
back. Callers: the step runner (an outage must not fail a resource), the database-backed
test entity backend (its database is its "cloud": unreachable is a transient API error).
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not be reached or dropped the connection
    (or refused the transaction for now: a deadlock victim, a lock timeout)."""
    if not isinstance(exc, DBAPIError):
        return False
    return exc.connection_invalidated or isinstance(exc, (OperationalError, InterfaceError))
