"""Pushed events: the events watch stream (Server-Sent Events) and the long-poll event list;
and a stack's progress, once or as a stream.

Callers: ``convergence.api.stacks.list_events`` (``GET .../stacks/{name}/{id}/events`` with
``watch=true`` or ``wait=N``), ``convergence.api.stack_extras`` (``GET .../progress``) and
:data:`router` (``GET /v1/{tenant}/events``, all the tenant's stacks), included by
``convergence.api.app``, which also builds the app's :class:`EventNotifier`
(``app.state.notifier``). The events and the progress are read with the use cases of
``convergence.services.queries``.

The event log is the ``events`` table, ordered by its monotonic integer id; that id is the SSE
``id:`` and the ``marker`` of Heat's event list, so a client resumes with ``Last-Event-ID`` (or
``?marker=``) without gaps or duplicates. Each SSE message is::

    id: <event id>
    event: stack.status | resource.status
    data: <the event as the event list answers it>

and a ``: keepalive`` comment goes out every :data:`HEARTBEAT_SECONDS` when nothing else did.

How a waiting stream learns of new events (level-triggered: a wake-up only causes a read of the
log past the stream's last id, so lost or spurious wake-ups cost nothing but latency):

- Events committed by this process's engine (embedded mode): the engine tells its observers
  (``Engine.observers``) after each transaction that recorded events; while the app is up
  (its lifespan, ``convergence.api.app``), the app's :class:`EventNotifier` is one of them,
  and wakes every waiting stream at once.
- Events committed by other processes (distributed workers): each waiting stream also reads the
  log every :data:`POLL_SECONDS` (one indexed range query past its last id).
  Upgrade path: on PostgreSQL, have the recording transaction ``NOTIFY convergence_events`` (or
  publish on Redis) and one ``LISTEN`` connection per API process call
  :meth:`EventNotifier.notify`; the periodic read can then slow down to a safety net.

A stack's progress (``GET .../stacks/{name}/{id}/progress``, an extension to Heat's API) is
how far its latest request has got: the stack's status and generations, its current
traversal's counters (nodes of the plan, left, failed) and a few of its resources in progress
(:func:`progress_item`), read in one query whose cost does not grow with the stack. With
``watch=true`` it is a stream of ``event: stack.progress`` messages (no ``id``: the stack as it
is now, nothing to resume), one whenever it changed, read every :data:`PROGRESS_SECONDS`:
what ``convergence ... --wait`` follows, rather than every event of a big stack.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from convergence.api import views
from convergence.api.auth import require_auth
from convergence.api.errors import ApiError
from convergence.api.policy import rule
from convergence.api.requests import base_url, runtime
from convergence.ports.views import EventView, StackView
from convergence.runtime import Runtime
from convergence.services import queries

HEARTBEAT_SECONDS = 15.0  # a ``: keepalive`` comment after this long without a message
POLL_SECONDS = 0.1  # how often a waiting stream reads the log (events of other processes)
MAX_WAIT_SECONDS = 60.0  # the cap on a long-poll's ``wait``
BATCH = 500  # events read per query
PROGRESS_SECONDS = 0.25  # how often a progress stream reads the stack's progress
IN_PROGRESS_NAMED = 10  # resources in progress a progress names (the first, by name)

STACK_TYPE = "OS::Heat::Stack"

Fetch = Callable[[int, int], list[tuple[EventView, StackView]]]
"""Reads the events after an id (at most a number of them), each with its stack."""


class EventNotifier:
    """Wakes the waiting streams of this process when events were committed.

    One per app (``app.state.notifier``); :meth:`notify` is one of the engine's observers
    while the app is up, and may be called from any thread (the dispatcher's); each listener
    is an :class:`asyncio.Event` set on its own loop.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self.notified = 0

    def notify(self) -> None:
        with self._lock:
            self.notified += 1
            listeners = list(self._listeners)
        for loop, event in listeners:
            with suppress(RuntimeError):  # a closed loop: its stream is gone
                loop.call_soon_threadsafe(event.set)

    @contextmanager
    def listen(self) -> Iterator[asyncio.Event]:
        """An event set at every :meth:`notify` while the block runs (on the running loop)."""
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._listeners.add(entry)
        try:
            yield entry[1]
        finally:
            with self._lock:
                self._listeners.discard(entry)

    @property
    def listeners(self) -> int:
        with self._lock:
            return len(self._listeners)


def notifier(request: Request) -> EventNotifier:
    """The app's notifier (built by ``convergence.api.app.create_app``)."""
    found: EventNotifier = request.app.state.notifier
    return found


# Parameters ------------------------------------------------------------------------------------

def is_true(value: str | None) -> bool:
    """A boolean query parameter (``watch=true``)."""
    return value is not None and value.strip().lower() in ("true", "1", "yes", "on")


def wait_seconds(value: str) -> float:
    """The long-poll's ``wait``: seconds, capped at :data:`MAX_WAIT_SECONDS`."""
    try:
        seconds = float(value)
    except ValueError:
        raise ApiError(400, "HTTPBadRequest", "'wait' must be a number of seconds.") from None
    if seconds != seconds:  # NaN
        raise ApiError(400, "HTTPBadRequest", "'wait' must be a number of seconds.")
    return min(max(seconds, 0.0), MAX_WAIT_SECONDS)


def resume_after(request: Request, marker: int | None) -> int:
    """Where a stream starts: after ``Last-Event-ID`` (a reconnection), else ``marker``."""
    header = request.headers.get("last-event-id")
    if header is not None and header.strip():
        try:
            return max(int(header.strip()), 0)
        except ValueError:
            raise ApiError(400, "HTTPBadRequest", "'Last-Event-ID' must be an event id.") \
                from None
    return max(marker or 0, 0)


def _marker(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ApiError(400, "HTTPBadRequest", "'marker' must be an event id.") from None


# Sources ---------------------------------------------------------------------------------------

def stack_fetch(rt: Runtime, stack: StackView) -> Fetch:
    def fetch(after: int, limit: int) -> list[tuple[EventView, StackView]]:
        return queries.events_after(rt, stack, after, limit)
    return fetch


def project_fetch(rt: Runtime, tenant: str) -> Fetch:
    known: dict[str, StackView] = {}

    def fetch(after: int, limit: int) -> list[tuple[EventView, StackView]]:
        return queries.project_events_after(rt, tenant, after, limit, known)
    return fetch


# Waiting ---------------------------------------------------------------------------------------

def stopping(request: Request) -> threading.Event:
    """Set when the server stops (``convergence.api.app.stop_streams``): waits end then."""
    found = getattr(request.app.state, "stopping", None)
    return found if isinstance(found, threading.Event) else threading.Event()


async def wait_for_newer(events: EventNotifier, fetch: Fetch, after: int, timeout: float,
                         stop: threading.Event | None = None) -> bool:
    """Wait until an event after ``after`` exists (True), or ``timeout`` seconds passed or
    ``stop`` was set (False); woken early by ``events``."""
    deadline = time.monotonic() + timeout
    with events.listen() as wake:
        while True:
            wake.clear()  # before reading, so that a commit during the read wakes the wait
            if await run_in_threadpool(fetch, after, 1):
                return True
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop.is_set()):
                return False
            with suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), min(POLL_SECONDS, left))


class LongPollResponse(Response):
    """Answers ``answer()`` as JSON once an event newer than the marker exists (or the wait
    passed): nothing is sent before, so errors keep their status."""

    def __init__(self, wait: Callable[[], Awaitable[bool]], answer: Callable[[], Any]) -> None:
        super().__init__(status_code=200, media_type="application/json")
        self._wait = wait
        self._answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._wait()
        body = await run_in_threadpool(self._answer)
        await JSONResponse(body)(scope, receive, send)


def long_poll(events: EventNotifier, fetch: Fetch, after: int, wait: float,
              answer: Callable[[], Any], stop: threading.Event | None = None,
              ) -> LongPollResponse:
    """The long-poll answer: ``answer()`` (the normal event list) as soon as an event after
    ``after`` exists, else after ``wait`` seconds (at once when ``stop`` is set)."""
    return LongPollResponse(lambda: wait_for_newer(events, fetch, after, wait, stop), answer)


# The stream ------------------------------------------------------------------------------------

def sse_message(base: str, event: EventView, stack: StackView) -> str:
    """One event as an SSE message."""
    kind = "stack.status" if event.resource_type == STACK_TYPE else "resource.status"
    data = json.dumps(views.event_item(base, stack, event), separators=(",", ":"))
    return f"id: {event.id}\nevent: {kind}\ndata: {data}\n\n"


async def sse_messages(events: EventNotifier, fetch: Fetch, after: int, base: str,
                       stop: threading.Event | None = None) -> AsyncIterator[str]:
    """The stream's messages, from the first event after ``after``, until the client goes
    (the server then cancels this generator) or ``stop`` is set (the server is stopping: the
    stream ends, and the client reconnects elsewhere with ``Last-Event-ID``)."""
    last = after
    beat_at = time.monotonic() + HEARTBEAT_SECONDS
    with events.listen() as wake:
        yield "retry: 1000\n\n"
        while stop is None or not stop.is_set():
            wake.clear()  # before reading, so that a commit during the read wakes the wait
            found = await run_in_threadpool(fetch, last, BATCH)
            if found:
                yield "".join(sse_message(base, e, s) for e, s in found)
                last = found[-1][0].id
                beat_at = time.monotonic() + HEARTBEAT_SECONDS
                if len(found) == BATCH:
                    continue
            now = time.monotonic()
            if now >= beat_at:
                yield ": keepalive\n\n"
                beat_at = now + HEARTBEAT_SECONDS
            with suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), min(POLL_SECONDS, max(beat_at - now, 0.0)))


def event_stream(request: Request, fetch: Fetch, marker: int | None) -> StreamingResponse:
    """The ``text/event-stream`` response, resumed after ``Last-Event-ID`` or ``marker``."""
    after = resume_after(request, marker)
    return StreamingResponse(
        sse_messages(notifier(request), fetch, after, base_url(request), stopping(request)),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def stack_events(request: Request, rt: Runtime, stack: StackView, *, watch: str | None,
                 wait: str | None, marker: int | None,
                 answer: Callable[[], Any]) -> Response | None:
    """For the stack event list: the stream (``watch``), the long-poll (``wait``), or None
    (answer the list now)."""
    if is_true(watch):
        return event_stream(request, stack_fetch(rt, stack), marker)
    if wait is not None:
        return long_poll(notifier(request), stack_fetch(rt, stack), max(marker or 0, 0),
                         wait_seconds(wait), answer, stopping(request))
    return None


# A stack's progress ----------------------------------------------------------------------------

def progress_item(found: queries.StackProgress) -> dict[str, Any]:
    """A stack's progress as the API answers it."""
    stack, trav = found.stack, found.traversal
    return {
        "stack_id": stack.id, "stack_name": stack.name, "action": stack.action,
        "status": stack.status, "stack_status": stack.stack_status,
        "stack_status_reason": stack.status_reason, "generation": stack.generation,
        "observed_generation": stack.observed_generation,
        "traversal_id": trav.id if trav is not None else None,
        "nodes_total": found.total, "nodes_remaining": trav.nodes_remaining if trav else 0,
        "nodes_failed": found.failed, "in_progress": list(found.in_progress),
    }


def read_progress(rt: Runtime, stack: StackView) -> dict[str, Any]:
    return progress_item(queries.progress_of(rt, stack.id, busy=IN_PROGRESS_NAMED))


async def progress_messages(read: Callable[[], Mapping[str, Any]],
                            stop: threading.Event | None = None) -> AsyncIterator[str]:
    """A ``stack.progress`` message at once and whenever the progress changed (read every
    :data:`PROGRESS_SECONDS`), a keepalive when nothing was sent for a while; until the client
    goes or ``stop`` is set."""
    last: Mapping[str, Any] | None = None
    beat_at = time.monotonic() + HEARTBEAT_SECONDS
    yield "retry: 1000\n\n"
    while stop is None or not stop.is_set():
        found = await run_in_threadpool(read)
        now = time.monotonic()
        if found != last:
            last = found
            yield f"event: stack.progress\ndata: {json.dumps(found, separators=(',', ':'))}\n\n"
            beat_at = now + HEARTBEAT_SECONDS
        elif now >= beat_at:
            yield ": keepalive\n\n"
            beat_at = now + HEARTBEAT_SECONDS
        await asyncio.sleep(PROGRESS_SECONDS)


def stack_progress(request: Request, rt: Runtime, stack: StackView,
                   watch: str | None) -> Any:
    """The stack's progress: ``{"progress": ...}``, or (``watch``) the stream of it."""
    if is_true(watch):
        return StreamingResponse(
            progress_messages(lambda: read_progress(rt, stack), stopping(request)),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    return {"progress": read_progress(rt, stack)}


# All the tenant's stacks -----------------------------------------------------------------------

router = APIRouter(prefix="/v1/{tenant_id}", dependencies=[Depends(require_auth)])


@router.get("/events", dependencies=[rule("events:project_index")])
def project_events(request: Request, tenant_id: str, watch: str | None = None,
                   marker: str | None = None, wait: str | None = None,
                   limit: str | None = None,
                   rt: Runtime = Depends(runtime)) -> Any:  # noqa: B008
    """The events of all the tenant's stacks, oldest first (an extension to Heat's API):
    as a list (``marker``, ``limit``), a stream (``watch=true``) or a long-poll (``wait``)."""
    after = _marker(marker)
    fetch = project_fetch(rt, tenant_id)
    if is_true(watch):
        return event_stream(request, fetch, after)
    try:
        size = int(limit) if limit else BATCH
    except ValueError:
        raise ApiError(400, "HTTPBadRequest", "'limit' must be an integer.") from None
    base = base_url(request)

    def answer() -> dict[str, Any]:
        found = fetch(max(after or 0, 0), size) if size > 0 else []
        return {"events": [views.event_item(base, s, e) for e, s in found]}

    if wait is not None:
        return long_poll(notifier(request), fetch, max(after or 0, 0), wait_seconds(wait),
                         answer, stopping(request))
    return answer()
