"""The list options of the CLI as heatclient spells them: ``--filter KEY=VALUE``,
``--sort KEY[:asc|desc][,KEY[:asc|desc]]``, ``--limit``; and the rows sorted, filtered and cut
as the client does it (osc_lib's ``sort_items``).

Callers: ``convergence.cli.stack_read_cmd`` (``stack list``), ``convergence.cli.resource_cmd``
(``resource list``, ``resource type list``), ``convergence.cli.event_cmd`` (``event list``)
and the two clients (``convergence.cli.local``, ``convergence.cli.remote``).

A resource list is a page of rows the client makes: :class:`ResourceListing` holds what was
asked for; the remote client sends the filters to the API (Heat's resource list takes them)
and sorts and cuts the rows here, the embedded one does all three here
(:func:`page_resources`) over the stack's records. An event list is paged where the events
are: :class:`EventListing` is the page asked for, sent to the API as its query string or
handed to the store as its query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import click

# Heat's resource list filters: the keys of its query string.
RESOURCE_FILTERS = ("name", "status", "action", "type", "id", "physical_resource_id")
RESOURCE_SORT_KEYS = ("resource_name", "physical_resource_id", "resource_type",
                      "resource_status", "updated_time")


def parse_filters(values: Sequence[str], allowed: Sequence[str],
                  option: str = "--filter") -> dict[str, tuple[str, ...]]:
    """``KEY=VALUE`` options as a map of each key to its values (a key given twice: any of
    them matches). heatclient also takes several in one value, separated by ``;``."""
    items = values[0].split(";") if len(values) == 1 else list(values)
    found: dict[str, list[str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in allowed:
            raise click.BadParameter(f"{item!r}: KEY=VALUE, KEY one of {', '.join(allowed)}",
                                     param_hint=option)
        found.setdefault(key, []).append(value)
    return {k: tuple(v) for k, v in found.items()}


def parse_sorts(values: Sequence[str], allowed: Sequence[str],
                option: str = "--sort") -> list[tuple[str, bool]]:
    """``KEY[:asc|desc]`` (repeatable, or comma-separated) as (key, descending) pairs."""
    sorts: list[tuple[str, bool]] = []
    for value in values:
        for item in value.split(","):
            key, _, direction = item.strip().partition(":")
            if key not in allowed or direction not in ("", "asc", "desc"):
                raise click.BadParameter(f"{item!r}: KEY[:asc|desc], KEY one of "
                                         f"{', '.join(allowed)}", param_hint=option)
            sorts.append((key, direction == "desc"))
    return sorts


def sort_rows(rows: Sequence[Mapping[str, Any]],
              sorts: Sequence[tuple[str, bool]]) -> list[Mapping[str, Any]]:
    """Rows sorted by each key in turn (the first key first), each in its direction; values
    missing or None sort before the others."""
    def order(value: Any) -> tuple[int, Any]:
        if value is None:
            return (0, "")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return (1, value)
        return (2, str(value))

    ordered = list(rows)
    for key, descending in reversed(sorts):
        ordered.sort(key=lambda r: order(r.get(key)), reverse=descending)
    return ordered


@dataclass(frozen=True, slots=True)
class ResourceListing:
    """What ``resource list`` asks for: Heat's filters, the order, at most ``limit`` rows."""

    filters: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    sorts: tuple[tuple[str, bool], ...] = ()
    limit: int | None = None
    nested_depth: int | None = None
    with_detail: bool = False

    def query(self) -> dict[str, Any]:
        """The query string of Heat's resource list (the filters, depth and detail)."""
        params: dict[str, Any] = {k: list(v) for k, v in self.filters.items()}
        if self.nested_depth is not None:
            params["nested_depth"] = self.nested_depth
        if self.with_detail:
            params["with_detail"] = "true"
        return params


# Heat's event list filters: the keys of its query string.
EVENT_FILTERS = ("resource_name", "resource_action", "resource_status", "resource_type",
                 "physical_resource_id")


@dataclass(frozen=True, slots=True)
class EventListing:
    """What ``event list`` asks for: Heat's filters (each key with the values given), the
    order, a marker and at most ``limit`` events; paged where the events are (the store, or
    the API, which pages the same way)."""

    filters: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    sort_keys: tuple[str, ...] = ()
    descending: bool = False
    limit: int | None = None
    marker: int | None = None
    nested_depth: int | None = None

    def query(self) -> dict[str, Any]:
        """The query string of Heat's event list."""
        params: dict[str, Any] = {"sort_dir": "desc" if self.descending else "asc",
                                  **{k: list(self.filters[k]) for k in EVENT_FILTERS
                                     if self.filters.get(k)}}
        if self.sort_keys:
            params["sort_keys"] = list(self.sort_keys)
        if self.limit is not None:
            params["limit"] = self.limit
        if self.marker is not None:
            params["marker"] = self.marker
        if self.nested_depth is not None:
            params["nested_depth"] = self.nested_depth
        return params


def resource_matches(row: Mapping[str, Any], filters: Mapping[str, Sequence[str]]) -> bool:
    """Heat's resource filters on a row (a status matches ``COMPLETE`` or
    ``CREATE_COMPLETE``; ``id`` is the resource's name, as in Heat)."""
    status = str(row.get("resource_status") or "")
    action, _, bare = status.partition("_")
    fields: dict[str, set[Any]] = {
        "name": {row.get("resource_name")}, "id": {row.get("resource_name")},
        "status": {status, bare}, "action": {action}, "type": {row.get("resource_type")},
        "physical_resource_id": {row.get("physical_resource_id") or ""}}
    return all(not filters.get(k) or fields[k] & set(filters[k]) for k in fields)


def cut(rows: Sequence[Mapping[str, Any]], listing: ResourceListing) -> list[Mapping[str, Any]]:
    """The rows in the order asked for, at most ``limit`` of them."""
    ordered = sort_rows(rows, listing.sorts)
    return ordered if listing.limit is None else ordered[:listing.limit]


def page_resources(rows: Sequence[Mapping[str, Any]],
                   listing: ResourceListing) -> list[Mapping[str, Any]]:
    """The embedded resource list: filtered, sorted and cut here."""
    return cut([r for r in rows if resource_matches(r, listing.filters)], listing)
