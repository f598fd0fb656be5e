"""Pages of a tenant's stack list: Heat's filters, sort keys, marker and limit.

Callers: ``convergence.api.stack_extras`` (``GET /stacks``, which reads the query string into
a ``convergence.heat_fields.StackQuery``) and the CLI's embedded client (``stack list``,
``convergence.cli.local``) call :func:`stack_page`, so that the list pages alike in both
modes. A tenant's stacks are few enough to be listed whole (one read) and cut here
(:func:`page`). The query itself is in ``convergence.heat_fields``, which the CLI's remote
mode reads too without loading the use cases.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from convergence.errors import InvalidParameter, NotFound
from convergence.heat_fields import StackQuery
from convergence.ports.views import StackView
from convergence.services.queries import list_stacks

if TYPE_CHECKING:
    from convergence.services.context import Runtime

# Heat's sort keys, and the names of the columns they come from.
SORT_KEYS: dict[str, Callable[[StackView], Any]] = {
    "stack_name": lambda s: s.name, "name": lambda s: s.name,
    "stack_status": lambda s: s.stack_status, "status": lambda s: s.stack_status,
    "creation_time": lambda s: s.created_at, "created_at": lambda s: s.created_at,
    "updated_time": lambda s: s.updated_at, "updated_at": lambda s: s.updated_at,
}


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


def stack_page(rt: Runtime, tenant: str, query: StackQuery) -> StackPage:
    """The page of the tenant's stack list ``query`` asks for (one read of the list)."""
    found = list_stacks(rt, tenant, include_deleted=query.include_deleted)
    if not query.show_nested:
        found = [s for s in found if s.parent_id is None]
    return page(found, query)
