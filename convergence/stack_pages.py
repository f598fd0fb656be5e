"""Pages of a tenant's stack list: Heat's filters, sort keys, marker and limit.

Callers: ``convergence.api.stack_extras`` (``GET /stacks``, which reads the query string into
a :class:`StackQuery`) and the CLI's embedded backend (``stack list``), so that the list pages
alike in both modes. A tenant's stacks are few enough to be listed whole and cut here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from convergence.errors import InvalidParameter, NotFound
from convergence.ports.views import StackView

# Heat's sort keys, and the names of the columns they come from.
SORT_KEYS: dict[str, Callable[[StackView], Any]] = {
    "stack_name": lambda s: s.name, "name": lambda s: s.name,
    "stack_status": lambda s: s.stack_status, "status": lambda s: s.stack_status,
    "creation_time": lambda s: s.created_at, "created_at": lambda s: s.created_at,
    "updated_time": lambda s: s.updated_at, "updated_at": lambda s: s.updated_at,
}
FILTER_KEYS = ("id", "name", "status", "action")


@dataclass(frozen=True, slots=True)
class StackQuery:
    """One page of the stack list. A filter given several values matches any of them."""

    filters: Mapping[str, Sequence[str]] = field(default_factory=dict)
    sort_keys: Sequence[str] = ("creation_time",)
    descending: bool = True  # Heat's default: the newest first
    marker: str | None = None  # the page starts after this stack id
    limit: int | None = None
    include_deleted: bool = False


@dataclass(frozen=True, slots=True)
class StackPage:
    stacks: list[StackView]
    count: int  # the stacks matching, before marker and limit
    more: bool  # the limit cut the list: a next page exists


def matches(s: StackView, filters: Mapping[str, Sequence[str]]) -> bool:
    """Heat's stack filters (a status matches ``COMPLETE`` or ``CREATE_COMPLETE``)."""
    fields = {"id": {s.id}, "name": {s.name}, "status": {s.status, s.stack_status},
              "action": {s.action}}
    return all(not filters.get(k) or fields[k] & set(filters[k]) for k in fields)


def page(stacks: Sequence[StackView], query: StackQuery) -> StackPage:
    """The page ``query`` asks for. InvalidParameter for an unknown sort key or a negative
    limit, NotFound for a marker that is not a listed stack."""
    unknown = [k for k in query.sort_keys if k not in SORT_KEYS]
    if unknown:
        raise InvalidParameter("sort_keys", f"Invalid sort keys {unknown}: allowed are "
                               "stack_name, stack_status, creation_time, updated_time.")
    if query.limit is not None and query.limit < 0:
        raise InvalidParameter("limit", "'limit' must not be negative.")
    found = [s for s in stacks if (query.include_deleted or s.deleted_at is None)
             and matches(s, query.filters)]
    # created_at then id break ties, so that paging by marker is stable.
    keys = list(query.sort_keys) or ["creation_time"]
    found.sort(key=lambda s: (*(SORT_KEYS[k](s) for k in keys), s.created_at, s.id),
               reverse=query.descending)
    count = len(found)
    if query.marker:
        ids = [s.id for s in found]
        if query.marker not in ids:
            raise NotFound(f"The Stack ({query.marker}) could not be found.")
        found = found[ids.index(query.marker) + 1:]
    more = False
    if query.limit is not None:
        more = len(found) > query.limit
        found = found[:query.limit]
    return StackPage(found, count, more)
