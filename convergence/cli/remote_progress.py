"""What the CLI's remote mode makes of the API's streams while it follows a request: the
progress stream's messages (:class:`Told`: the request's counters, as the embedded mode reads
them), or, from a server without it, the events (:class:`Progress`, kept up as they come), so
that each message and each look at the progress costs the same however big the stack.

Callers: ``convergence.cli.remote`` (``RemoteClient.follow`` and ``wait``: the ``--wait`` of
the stack commands and ``event list --follow``). The API side of the streams is
``convergence.api.stream``; what is shown is a ``convergence.cli.progress.Snapshot``, on a
view as often as it needs one (:class:`Shown`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from itertools import islice
from typing import Any

from convergence.cli.client import STACK_TYPE
from convergence.cli.progress import Snapshot, View, settled
from convergence.ports.views import EventView, StackView


@dataclass(frozen=True, slots=True)
class Told:
    """A ``stack.progress`` message of the API's progress stream (``GET .../progress``,
    ``convergence.api.stream``): the stack's status and generations, its current traversal's
    counters and a few of its resources in progress."""

    action: str
    status: str
    reason: str
    generation: int
    observed_generation: int
    total: int
    remaining: int
    failed: int
    in_progress: tuple[str, ...]

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Told:
        return cls(str(data.get("action") or ""), str(data.get("status") or ""),
                   str(data.get("stack_status_reason") or ""),
                   int(data.get("generation") or 0), int(data.get("observed_generation") or 0),
                   int(data.get("nodes_total") or 0), int(data.get("nodes_remaining") or 0),
                   int(data.get("nodes_failed") or 0),
                   tuple(str(n) for n in data.get("in_progress") or ()))

    def stack(self, s: StackView) -> StackView:
        """``s`` as the message tells it now."""
        return replace(s, action=self.action, status=self.status, status_reason=self.reason,
                       generation=self.generation,
                       observed_generation=self.observed_generation)

    def snapshot(self, s: StackView) -> Snapshot:
        done = max(self.total - self.remaining - self.failed, 0)
        return Snapshot(s, self.total, done, self.in_progress[:SHOWN], self.failed)


SHOWN = 4  # names in progress a snapshot carries: the views show 3, and "more" past them


class Progress:
    """What the events watch stream told so far, kept up as it comes (for a server without
    the progress stream): the stack, and its resources counted from the events (every
    resource seen is one, done once its latest event is a ``*_COMPLETE``) and those in
    progress (oldest first). Each event and each snapshot costs the same however many
    resources the stack has."""

    def __init__(self, stack: StackView) -> None:
        self.stack = stack
        self._status: dict[str, str] = {}  # name -> its latest status
        self._complete = 0  # of them, those whose latest status is *_COMPLETE
        self._busy: dict[str, None] = {}  # the names in progress, in the order they began

    def event(self, e: EventView) -> None:
        if e.resource_type == STACK_TYPE:
            self.stack = replace(self.stack, action=e.action, status=e.status,
                                 status_reason=e.reason)
            return
        name, status = e.resource_name, f"{e.action}_{e.status}"
        before = self._status.get(name)
        self._status[name] = status
        self._complete += status.endswith("_COMPLETE") - bool(
            before is not None and before.endswith("_COMPLETE"))
        self._busy.pop(name, None)
        if status.endswith("_IN_PROGRESS"):
            self._busy[name] = None

    def snapshot(self) -> Snapshot:
        """As the progress views show it."""
        busy = tuple(islice(self._busy, SHOWN))
        total, done = len(self._status), self._complete
        if settled(self.stack) and self.stack.status == "COMPLETE":
            done = total
        return Snapshot(self.stack, total, done, busy, busy=len(self._busy))


class Shown:
    """Snapshots handed to a view as often as it needs them (and when ``now``)."""

    def __init__(self, view: View) -> None:
        self.view = view
        self._at = 0.0  # the next look

    def show(self, snap: Callable[[], Snapshot], now: bool = False) -> None:
        if not self.view.shows:
            return
        at = time.monotonic()
        if now or at >= self._at:
            self.view.show(snap())
            self._at = at + self.view.every
