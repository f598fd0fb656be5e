"""Heat's event list parameters, read from a request into the store's :class:`EventQuery`.

Callers: ``convergence.api.stacks.list_events`` (``GET .../stacks/{name}/{id}/events``) and
``convergence.api.stack_extras.list_resource_events`` (``.../resources/{name}/events``).

Heat's names: ``limit`` (a non-negative integer), ``marker`` (an event id: the page after it,
in the chosen order; the store checks that it is an event of the stack), ``sort_dir`` (``asc``,
the default, or ``desc``), ``sort_keys`` (repeatable: ``event_time``, ``resource_type``; and
``created_at``, the column ``event_time`` comes from), and the filters ``resource_name``,
``resource_action``, ``resource_status`` and ``resource_type`` (each repeatable: any of the
values matches; a status matches ``COMPLETE`` or, as events show it, ``CREATE_COMPLETE``),
plus ``physical_resource_id`` (not Heat's: the events of one physical resource). A value that
cannot be used answers 400 with a message naming the parameter, as Heat's
``param_utils.extract_int`` does for ``limit``.
"""

from __future__ import annotations

from starlette.datastructures import QueryParams

from convergence.api.errors import ApiError
from convergence.ports.pages import EVENT_SORT_KEYS as SORT_KEYS
from convergence.ports.pages import EventQuery, sorts_by_type


def event_query(params: QueryParams, *, resource_name: str | None = None,
                position_marker: bool = False) -> EventQuery:
    """The page the query string asks for. ``resource_name``: the resource-scoped listing's
    (it replaces the filter, as in Heat). ``position_marker``: the long-poll's marker, a
    position in the log that need not be an event of the stack."""
    sort_dir = (params.get("sort_dir") or "asc").lower()
    if sort_dir not in ("asc", "desc"):
        raise _bad("'sort_dir' must be asc or desc.")
    keys = params.getlist("sort_keys")
    unknown = [k for k in keys if k not in SORT_KEYS]
    if unknown:
        raise _bad(f"Invalid sort keys {unknown} for 'sort_keys': allowed are "
                   f"{', '.join(SORT_KEYS)}.")
    names = (resource_name,) if resource_name is not None else _values(params, "resource_name")
    return EventQuery(
        limit=_limit(params.get("limit")), marker=_marker(params.get("marker")),
        strict_marker=not position_marker, descending=sort_dir == "desc",
        by_type=sorts_by_type(keys), resource_names=names,
        actions=_values(params, "resource_action"),
        statuses=_values(params, "resource_status"),
        resource_types=_values(params, "resource_type"),
        physical_ids=_values(params, "physical_resource_id"))


def _values(params: QueryParams, name: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in params.getlist(name) if v != ""))


_BIGGEST = 2**63 - 1  # the databases' 64-bit integers: a larger value cannot be sent


def _limit(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        limit = int(value)
    except ValueError:
        raise _bad("Only integer is acceptable by 'limit'.") from None
    if limit < 0:
        raise _bad(f"Value '{value}' is invalid for 'limit' which only accepts non-negative "
                   "integer.")
    return min(limit, _BIGGEST)  # more than any stack has: every event


def _marker(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        marker = int(value)
    except ValueError:
        marker = _BIGGEST + 1
    if abs(marker) > _BIGGEST:
        raise _bad(f"'marker' must be an event id: {value!r} is not one.")
    return marker


def _bad(message: str) -> ApiError:
    return ApiError(400, "HTTPBadRequest", message)
