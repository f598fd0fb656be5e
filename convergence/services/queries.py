"""Reading stacks, resources and events: each use case one read transaction (a listing in
chunks: one per chunk), changing nothing. Also how every use case finds the stack a request
names (:func:`stack_or_404`, :func:`locked_stack`), and how far a stack's request has got
(:func:`progress_of`: its traversal's counters, whatever the stack's size).

Callers: the API's routes (``convergence.api.stacks``, ``stack_extras``, ``resource_list``,
``stream``, ``requests``), the CLI's embedded client and progress views
(``convergence.cli.local``, ``convergence.cli.progress``, ``convergence.cli.demo_cmd``), the
other use cases (``convergence.services.stacks``, ``running``) and the tests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from convergence.errors import InvalidParameter, NotFound
from convergence.ports.pages import EventQuery, ResourcePage, ResourceQuery
from convergence.ports.store import Tx
from convergence.ports.views import EventView, RecordView, StackView, TraversalView
from convergence.services.heat_shapes import current_records, export_blob

if TYPE_CHECKING:
    from convergence.services.context import Runtime


# Finding the stack a request names -------------------------------------------------------------

def stack_or_404(tx: Tx, tenant: str, name_or_id: str) -> StackView:
    """The tenant's stack by name or id (NotFound: none)."""
    stack = tx.find_stack(tenant, name_or_id)
    if stack is None:
        raise NotFound(f"The Stack ({name_or_id}) could not be found.")
    return stack


def locked_stack(tx: Tx, tenant: str, name_or_id: str) -> StackView:
    """The stack, its row locked until the transaction ends: requests on one stack queue
    up, so each sees the generation the one before it set."""
    found = stack_or_404(tx, tenant, name_or_id)
    stack = tx.stack(found.id, lock=True)
    if stack is None:
        raise NotFound(f"The Stack ({name_or_id}) could not be found.")
    return stack


# Stacks ----------------------------------------------------------------------------------------

def get_stack(rt: Runtime, tenant: str, name_or_id: str) -> StackView:
    with rt.store.read() as tx:
        return stack_or_404(tx, tenant, name_or_id)


def list_stacks(rt: Runtime, tenant: str, *, include_deleted: bool = False) -> list[StackView]:
    with rt.store.read() as tx:
        return tx.stacks(tenant, include_deleted=include_deleted)


def export_stack(rt: Runtime, tenant: str, name_or_id: str) -> dict[str, Any]:
    """Heat's abandon/export blob of a stack (what adopt takes back), changing nothing."""
    with rt.store.read() as tx:
        stack = stack_or_404(tx, tenant, name_or_id)
        content = tx.template(stack.template_id) if stack.template_id else None
        return export_blob(stack, content, tx.records(stack.id))


# How far a request has got --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class StackProgress:
    """The stack's current traversal as its counters tell it: the nodes of its plan (one per
    resource it works on, and one per replaced version it deletes), those left and those
    failed; and the names of a few of the stack's resources in progress, in name order."""

    stack: StackView
    traversal: TraversalView | None  # None: the stack has none
    in_progress: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        """0 while the traversal is being planned (or there is none)."""
        return self.traversal.nodes_total if self.traversal is not None else 0

    @property
    def failed(self) -> int:
        return self.traversal.nodes_failed if self.traversal is not None else 0

    @property
    def done(self) -> int:
        """Nodes finished without failing (those skipped after a failure among them)."""
        if self.traversal is None:
            return 0
        return max(self.traversal.nodes_total - self.traversal.nodes_remaining
                   - self.traversal.nodes_failed, 0)


def progress_of(rt: Runtime, stack: StackView | str, busy: int = 0) -> StackProgress:
    """How far the stack's latest request has got, in one read transaction whose cost does
    not grow with the stack: its current traversal's row (by key) and, with ``busy``, the
    names of at most that many of its resources in progress (the first ones of the
    ``(stack_id, status, name)`` index). ``stack``: the stack as just read, or its id (read
    here, deleted or not)."""
    with rt.store.read() as tx:
        if isinstance(stack, str):
            found = tx.stack(stack)
            if found is None:
                raise NotFound(f"The Stack ({stack}) could not be found.")
            stack = found
        traversal = tx.traversal(stack.traversal_id) if stack.traversal_id else None
        names = tx.names_in_status(stack.id, "IN_PROGRESS", busy) if busy > 0 else []
    return StackProgress(stack, traversal, tuple(names))


# Resources -------------------------------------------------------------------------------------

def list_resources(rt: Runtime, tenant: str, name_or_id: str) -> list[RecordView]:
    """Every record of the stack, in id order: the current version of each resource and the
    replaced versions still being cleaned up. For a listing as Heat shows it (one version per
    resource, paged, filtered), see :func:`resource_page` and :func:`resource_chunks`."""
    with rt.store.read() as tx:
        stack = stack_or_404(tx, tenant, name_or_id)
        return tx.records(stack.id)


def current_resource(rt: Runtime, tenant: str, name_or_id: str,
                     resource: str) -> RecordView | None:
    """The version of the resource named ``resource`` the stack uses (None: no such
    resource)."""
    records = list_resources(rt, tenant, name_or_id)
    return next((r for r in current_records(records) if r.name == resource), None)


def resource_page(rt: Runtime, tenant: str, name_or_id: str,
                  query: ResourceQuery) -> ResourcePage:
    """One page of the stack's resources, as Heat lists them (the version of each the stack
    uses), with who requires each; paged, ordered and filtered by the database
    (``Tx.resource_page``). InvalidParameter when the order needs the marker's
    values and the marker is not a resource of the stack."""
    with rt.store.read() as tx:
        stack = stack_or_404(tx, tenant, name_or_id)
        found = tx.resource_page(stack.id, query)
    if found is None:
        raise _not_a_resource(query, stack)
    return found


def resource_chunks(rt: Runtime, tenant: str, name_or_id: str, query: ResourceQuery,
                    chunk: int = 500) -> Generator[ResourcePage, None, None]:
    """The listing ``query`` asks for (all of it when its limit is None), in pages of at most
    ``chunk`` resources; each page is read in a transaction of its own, and nothing is held
    between pages, so the caller may stop after any page (a client that went away) and a long
    listing keeps no snapshot open. The first page raises what :func:`resource_page` raises.

    A page continues after the last resource of the one before (by its values, so a resource
    deleted meanwhile does not lose the place); each costs the same wherever it falls, so a
    listing of N resources costs O(N). ``query.nested_depth``: the resources of the stack's
    nested stacks follow its own (their pages name the nested stack), each nested stack's
    listed with one level less, under the same filters; the limit counts them all, and the
    marker places the stack's own resources only.
    """
    if chunk < 1:
        raise ValueError("chunk must be at least 1")
    with rt.store.read() as tx:
        stack = stack_or_404(tx, tenant, name_or_id)
    left = query.limit
    for page_ in _own_chunks(rt, stack, query, chunk, nested=None):
        yield page_
        if left is not None:
            left -= len(page_.records)
    yield from _nested_chunks(rt, stack, query, chunk, left)


def _nested_chunks(rt: Runtime, stack: StackView, query: ResourceQuery, chunk: int,
                   left: int | None) -> Generator[ResourcePage, None, None]:
    """The resources of ``stack``'s nested stacks, ``query.nested_depth`` levels down."""
    if query.nested_depth <= 0 or (left is not None and left <= 0):
        return
    with rt.store.read() as tx:
        children = tx.child_stacks(stack.id)
    deeper = dataclasses.replace(query, nested_depth=query.nested_depth - 1, marker=None,
                                 limit=left)
    for child in children:
        for page_ in _own_chunks(rt, child, deeper, chunk, nested=child):
            yield page_
            if left is not None:
                left -= len(page_.records)
        if left is not None and left <= 0:
            return
        deeper = dataclasses.replace(deeper, limit=left)
        for page_ in _nested_chunks(rt, child, deeper, chunk, left):
            yield page_
            if left is not None:
                left -= len(page_.records)
        deeper = dataclasses.replace(deeper, limit=left)


def _own_chunks(rt: Runtime, stack: StackView, query: ResourceQuery, chunk: int,
                nested: StackView | None) -> Generator[ResourcePage, None, None]:
    """One stack's own resources, page by page (``nested``: the nested stack they are of,
    named in each page)."""
    left = query.limit
    last: RecordView | None = None  # the last resource listed so far
    while left is None or left > 0:
        size = chunk if left is None else min(chunk, left)
        with rt.store.read() as tx:
            found = tx.resource_page(stack.id, dataclasses.replace(query, limit=size),
                                     after=last)
        if found is None:
            raise _not_a_resource(query, stack)
        if nested is not None:
            found = dataclasses.replace(found, stack=nested)
        yield found
        if len(found.records) < size:
            return
        last = found.records[-1]
        if left is not None:
            left -= size


def _not_a_resource(query: ResourceQuery, stack: StackView) -> InvalidParameter:
    return InvalidParameter("marker", f"'marker' must be a resource of the stack when the "
                            f"listing is not in name order: {query.marker} is not a resource "
                            f"of {stack.name}.")


# Events ----------------------------------------------------------------------------------------

def list_events(rt: Runtime, tenant: str, name_or_id: str, after: int = 0,
                query: EventQuery | None = None) -> list[EventView]:
    """The stack's events after the id ``after``, or the page ``query`` asks for (paged,
    ordered and filtered by the database: ``Tx.event_page``)."""
    with rt.store.read() as tx:
        stack = stack_or_404(tx, tenant, name_or_id)
        if query is None:
            return tx.events(stack.id, after)
        found = tx.event_page(stack.id, query)
        if found is None:
            raise InvalidParameter("marker", f"'marker' must be an event of the stack: "
                                   f"{query.marker} is not an event of {stack.name}.")
        return found


def events_after(rt: Runtime, stack: StackView, after: int = 0,
                 limit: int | None = None) -> list[tuple[EventView, StackView]]:
    """One stack's events after the event id ``after`` (oldest first), each with its stack."""
    with rt.store.read() as tx:
        return [(e, stack) for e in tx.events(stack.id, after, limit)]


def project_events_after(rt: Runtime, tenant: str, after: int = 0,
                         limit: int | None = None,
                         known: dict[str, StackView] | None = None,
                         ) -> list[tuple[EventView, StackView]]:
    """The events of all the tenant's stacks after the event id ``after``, each with its stack
    (looked up in ``known`` first, a cache the caller keeps, which is filled in here)."""
    cache = known if known is not None else {}
    with rt.store.read() as tx:
        events = tx.project_events(tenant, after, limit)
        missing = {e.stack_id for e in events} - cache.keys()
        if missing:
            cache.update(tx.stacks_by_id(missing))
    return [(e, cache[e.stack_id]) for e in events if e.stack_id in cache]
