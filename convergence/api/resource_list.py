"""Heat's resource list: the query read from the request, and the answer built page by page,
which stops when the client goes away.

Callers: ``convergence.api.stacks.list_resources`` (``GET .../stacks/{name}/{id}/resources``).

Heat's parameters: ``nested_depth`` (a non-negative integer: how many levels of nested stacks
to list too; their resources follow the stack's own, each with ``parent_resource``, the
resource of its parent that made its stack), ``with_detail`` (a boolean: each resource's
``description`` and ``attributes`` too), and the filters ``type``, ``status``, ``name``,
``action``, ``id`` and ``physical_resource_id`` (each repeatable: any of the values matches; a
status matches ``COMPLETE`` or, as listed, ``CREATE_COMPLETE``; ``id`` is a resource's logical
id, i.e. its name, as ``logical_resource_id`` shows it). Heat's list has no paging; this one
pages as the event list does: ``limit`` (a non-negative integer), ``marker`` (a resource name:
the page after it, in the chosen order), ``sort_dir`` (``asc``, the default, or ``desc``) and
``sort_keys`` (repeatable: ``resource_name``, the default, ``resource_type``,
``resource_status``, ``creation_time``, ``updated_time``, ``physical_resource_id``, or the
store's names ``name``, ``type``, ``status``, ``created_at``, ``updated_at``; the name always
ends the order; one direction for every key). In name order the marker is a position and need
not be a resource of the stack; in another order it must be one (400 if not). Any other
parameter, or a value that cannot be used, answers 400 naming it.

The answer is read ``CHUNK`` resources at a time (the use case
``convergence.services.queries.resource_chunks``), each chunk a transaction of its own run in
a worker thread, and encoded there. A listing that fits in one
chunk is one JSON body. A longer one is streamed, chunk by chunk: before each next chunk the
client is asked after (``Request.is_disconnected``), and the server's news of a disconnect
cancels the stream; either way no further chunk is read. A chunk being read when the client
leaves is finished first (a thread cannot be interrupted): a listing abandoned at any size
costs at most one chunk more. ``/metrics`` counts the records read
(``convergence_resource_list_records_total``) and the listings abandoned
(``convergence_resource_list_abandoned_total``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Generator
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import QueryParams
from starlette.types import Receive, Scope, Send

from convergence.api import views
from convergence.api.errors import ApiError
from convergence.ports.pages import ResourcePage, ResourceQuery
from convergence.ports.views import StackView
from convergence.runtime import Runtime
from convergence.services import queries

CHUNK = 500  # resources per read (and per piece of a streamed answer)

_FILTERS = ("type", "status", "name", "action", "id", "physical_resource_id")
PARAMS = frozenset({*_FILTERS, "nested_depth", "with_detail", "limit", "marker", "sort_keys",
                    "sort_dir"})
SORT_KEYS = {"resource_name": "name", "resource_type": "type", "resource_status": "status",
             "creation_time": "created_at", "updated_time": "updated_at",
             "physical_resource_id": "physical_id",
             "name": "name", "type": "type", "status": "status", "created_at": "created_at",
             "updated_at": "updated_at"}
_TRUE = frozenset({"true", "1", "yes", "on", "t", "y"})
_FALSE = frozenset({"false", "0", "no", "off", "f", "n"})
_BIGGEST = 2**63 - 1  # the databases' 64-bit integers


@dataclass(frozen=True, slots=True)
class Listing:
    """What a resource list request asks for: the store's query, and whether with detail."""

    query: ResourceQuery
    detail: bool = False


def listing(params: QueryParams) -> Listing:
    """The listing the query string asks for; ApiError 400 for a parameter that cannot be
    used."""
    unknown = sorted(set(params) - PARAMS)
    if unknown:
        raise _bad(f"Invalid filter parameters {unknown}: allowed are "
                   f"{', '.join(sorted(PARAMS))}.")
    sort_dir = (params.get("sort_dir") or "asc").lower()
    if sort_dir not in ("asc", "desc"):
        raise _bad("'sort_dir' must be asc or desc.")
    keys = params.getlist("sort_keys")
    bad_keys = [k for k in keys if k not in SORT_KEYS]
    if bad_keys:
        raise _bad(f"Invalid sort keys {bad_keys} for 'sort_keys': allowed are "
                   f"{', '.join(SORT_KEYS)}.")
    limit = _non_negative(params.get("limit"), "limit")
    names = _values(params, "name")
    ids = _values(params, "id")
    if names and ids:  # both must match: the names that are both
        names = tuple(n for n in names if n in ids)
        if not names:
            limit = 0
    query = ResourceQuery(
        limit=limit, marker=params.get("marker") or None, descending=sort_dir == "desc",
        sort_keys=tuple(dict.fromkeys(SORT_KEYS[k] for k in keys)), names=names or ids,
        types=_values(params, "type"), actions=_values(params, "action"),
        statuses=_values(params, "status"), physical_ids=_values(params, "physical_resource_id"),
        nested_depth=_non_negative(params.get("nested_depth"), "nested_depth") or 0)
    return Listing(query, _boolean(params.get("with_detail"), "with_detail"))


async def answer(request: Request, rt: Runtime, stack: StackView, wanted: Listing) -> Response:
    """Heat's ``{"resources": [...]}`` for ``wanted``: one body, or a stream that stops when
    the client goes away. Errors of the first chunk (a marker that places nothing) are raised
    before anything is sent."""
    base = str(request.base_url).rstrip("/")
    counters = getattr(request.app.state, "metrics", None)
    pages = queries.resource_chunks(rt, stack.tenant, stack.id, wanted.query, chunk=CHUNK)

    def next_piece() -> tuple[bytes, int] | None:
        """The next chunk's items as JSON (without brackets) and how many; None at the end.
        Runs in a worker thread: reading and encoding a chunk keep the event loop free."""
        found = next(pages, None)
        if found is None:
            return None
        if counters is not None:
            counters.resource_records.inc(len(found.records))
        return _encode(base, stack, found, wanted.detail), len(found.records)

    first = await run_in_threadpool(next_piece)
    head, count = first if first is not None else (b"", 0)
    limit = wanted.query.limit
    # A short first page is the whole answer, unless nested stacks' pages follow it.
    if (count < CHUNK and not wanted.query.nested_depth) or first is None or \
            (limit is not None and limit <= count):
        pages.close()
        return Response(b'{"resources":[' + head + b"]}", media_type="application/json")

    async def body(response: _Stream) -> AsyncIterator[bytes]:
        yield b'{"resources":[' + head
        some = count > 0  # whether an item was sent (the next one needs a comma)
        while not await request.is_disconnected():
            piece = await run_in_threadpool(next_piece)
            if piece is None:
                yield b"]}"
                response.finished = True
                return
            if piece[1]:
                yield (b"," if some else b"") + piece[0]
                some = True

    return _Stream(body, pages, counters)


class _Stream(StreamingResponse):
    """A streamed list: when it ends before its last chunk (the client went away, and the
    server cancelled the stream, or it was seen gone between chunks), it counts itself
    abandoned, whether or not its body had begun; the pages are let go of either way."""

    def __init__(self, body: Callable[[_Stream], AsyncIterator[bytes]],
                 pages: Generator[ResourcePage, None, None], counters: Any) -> None:
        self.pages = pages
        self.counters = counters
        self.finished = False
        super().__init__(body(self), media_type="application/json")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.pages.close()
            if not self.finished and self.counters is not None:
                self.counters.resource_abandoned.inc()


def _encode(base: str, stack: StackView, found: ResourcePage, detail: bool) -> bytes:
    owner = found.stack or stack  # a nested stack's page names it
    items = (views.resource_item(base, owner, r, found.users(r), detail=detail)
             for r in found.records)
    return b",".join(_dumps(item) for item in items)


def _dumps(item: Any) -> bytes:
    # As FastAPI's JSONResponse encodes.
    return json.dumps(item, ensure_ascii=False, allow_nan=False, indent=None,
                      separators=(",", ":")).encode("utf-8")


def _values(params: QueryParams, name: str) -> tuple[str, ...]:
    # An empty value is a value: ``physical_resource_id=`` matches the resources that have no
    # physical resource yet (listed as ""), ``name=`` matches none.
    return tuple(dict.fromkeys(params.getlist(name)))


def _non_negative(value: str | None, name: str) -> int | None:
    """Heat's ``extract_int`` for a non-negative integer parameter (None when absent)."""
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise _bad(f"Only integer is acceptable by '{name}'.") from None
    if number < 0:
        raise _bad(f"Value '{value}' is invalid for '{name}' which only accepts non-negative "
                   "integer.")
    return min(number, _BIGGEST)


def _boolean(value: str | None, name: str) -> bool:
    """Heat's ``extract_bool`` (``true``/``false``, any case), and the spellings this API has
    always taken (``1``/``0``, ``yes``/``no``, ``on``/``off``); absent or empty: false."""
    if value is None or value.strip() == "":
        return False
    word = value.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise _bad(f"Unrecognized value '{value}' for '{name}', acceptable values are: true, "
               "false.")


def _bad(message: str) -> ApiError:
    return ApiError(400, "HTTPBadRequest", message)
