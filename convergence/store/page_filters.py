"""The filters Heat's list APIs share, as SQL: any of several values, and a status filter.

Callers: ``convergence.store.events`` and ``convergence.store.resource_pages``, whose
tables both hold an ``action`` and a ``status`` column.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Table, and_

STATUSES = frozenset({"IN_PROGRESS", "COMPLETE", "FAILED"})


def any_of(column: ColumnElement[Any], values: tuple[str, ...]) -> ColumnElement[bool] | None:
    """The column is one of ``values``; None when there are none (no filter)."""
    # One value is an equality, not an IN list: both planners then use the index's next
    # column for the order.
    if not values:
        return None
    return column == values[0] if len(values) == 1 else column.in_(values)


def status_is(table: Table, value: str) -> ColumnElement[bool]:
    """``COMPLETE`` (Heat's filter: the status alone) or ``CREATE_COMPLETE`` (as listed)."""
    action, _, status = value.partition("_")
    if value in STATUSES or not status:
        return table.c.status == value
    return and_(table.c.action == action, table.c.status == status)
