"""What a page of Heat's event and resource lists asks for, and what a resource page answers.

Callers: ``convergence.services`` (``list_events``, ``resource_page``, ``resource_chunks``),
the API's query parsing (``convergence.api.event_params``, ``convergence.api.resource_list``)
and the CLI's ``event list``. The store answers them in the database
(``Tx.event_page``, ``Tx.resource_page``: filters, order and keyset paging in SQL).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from convergence.ports.views import RecordView, StackView

# events ---------------------------------------------------------------------------------------
EVENT_TIME_KEYS = frozenset({"event_time", "created_at"})
EVENT_SORT_KEYS = ("event_time", "created_at", "resource_type")  # Heat's, and one alias


@dataclass(frozen=True, slots=True)
class EventQuery:
    """One page of a stack's events. A filter given several values matches any of them;
    an empty filter matches every event."""

    limit: int | None = None  # None: every event after the marker
    marker: int | None = None  # the page starts after this event (in the page's order)
    # False: the marker is only a position in the log, which need not be an event of the
    # stack (the long-poll's ``marker=0``); True: it must be one, else there is no page.
    strict_marker: bool = True
    descending: bool = False
    by_type: bool = False  # order by (resource_type, id) rather than by id
    resource_names: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    # Each a status (``COMPLETE``) or, as the events show it, ``ACTION_STATUS``.
    statuses: tuple[str, ...] = ()
    resource_types: tuple[str, ...] = ()
    physical_ids: tuple[str, ...] = ()


def sorts_by_type(keys: Sequence[str]) -> bool:
    """Whether Heat's ``sort_keys`` (each one of :data:`EVENT_SORT_KEYS`) order by resource
    type first: keys after a time key change nothing, the id being unique."""
    for key in keys:
        if key in EVENT_TIME_KEYS:
            return False
        if key == "resource_type":
            return True
    return False


# resources ------------------------------------------------------------------------------------
# What a listing may be ordered by (``sort_keys``: the first key, then the next among equals);
# the name always ends the order (unique among the listed records: nothing after it matters).
RESOURCE_SORT_KEYS = ("name", "type", "status", "created_at", "updated_at", "physical_id")

RequiredBy = Mapping[int, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class ResourceQuery:
    """A page of a stack's resources. A filter given several values matches any of them; an
    empty filter matches every resource. Every filter looks at the version of each resource
    the stack uses (the one listed), never at one being replaced."""

    limit: int | None = None  # None: every resource after the marker
    # A resource name: the page starts after it, in the page's order. In name order it is a
    # position, which need not be a resource of the stack (one deleted between two pages still
    # places the next); in another order it must be one (its values place the page).
    marker: str | None = None
    descending: bool = False
    sort_keys: tuple[str, ...] = ()  # each one of RESOURCE_SORT_KEYS; () or ("name",): by name
    names: tuple[str, ...] = ()  # Heat's ``name`` (and ``id``: a resource's logical id)
    types: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    # Each a status (``COMPLETE``) or, as the listing shows it, ``ACTION_STATUS``.
    statuses: tuple[str, ...] = ()
    # ``""`` matches a resource with no physical resource yet (listed as ``""``).
    physical_ids: tuple[str, ...] = ()
    nested_depth: int = 0  # levels of nested stacks to list too (none exist yet)

    def __post_init__(self) -> None:
        unknown = [k for k in self.sort_keys if k not in RESOURCE_SORT_KEYS]
        if unknown:
            raise ValueError(f"unknown sort keys {unknown}: allowed are "
                             f"{', '.join(RESOURCE_SORT_KEYS)}")
        if self.limit is not None and self.limit < 0:
            raise ValueError("limit must not be negative")
        if self.nested_depth < 0:
            raise ValueError("nested_depth must not be negative")


@dataclass(frozen=True, slots=True)
class ResourcePage:
    """The records of a page, in its order, and for each (by record id) the names of the
    records built on it (Heat's ``required_by``, sorted; a name appears once however many of
    its versions require the record)."""

    records: tuple[RecordView, ...]
    required_by: RequiredBy = field(default_factory=dict)
    # The nested stack the records are of, in a listing with ``nested_depth`` (None: the
    # stack listed).
    stack: StackView | None = None

    def users(self, record: RecordView) -> list[str]:
        """``required_by`` of one of the page's records."""
        return list(self.required_by.get(record.id, ()))
