"""Running a stack's work to its end from the CLI, and showing it as it happens.

Callers: ``convergence.cli.local`` (``--wait``, and every command in embedded mode), the views
also ``convergence.cli.follow`` and ``convergence.cli.remote`` (remote ``--wait``), and
``convergence.cli.demo_cmd``. The views import nothing heavy; running a stack's work imports
the use cases (``convergence.services.running`` and ``queries``) when it is called.

In embedded mode (no broker) the in-process dispatcher runs in the CLI's own process, so a
command that starts work drives it to the end through ``running.wait_for_stack``, holding the
stack meanwhile (``running.holding``) so that other processes can tell it is being driven. A
command that finds a stack in progress resumes it the same way (:func:`settle`) only when no
live process is on it any more (``running.abandoned``: the command that started it was
interrupted, or its process died and its hold ran out); otherwise the stack is shown as it is.
With a broker the workers do the work and waiting is polling.

Progress is read from the counters of the stack's current traversal (``queries.progress_of``:
the nodes of its plan, those left, those failed) and a few of its resources in progress, in
one read whose cost does not grow with the stack; remote mode gets the same from the API's
progress stream (``convergence.cli.remote_progress``). A rich bar on a terminal; elsewhere
(logs, pipes) a plain line when something changed, at most one every ``PLAIN_SECONDS``, and
the last one at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.console import Console

    from convergence.ports.views import StackView
    from convergence.runtime import Runtime

# Seconds between two looks at the stack and its progress while waiting, when a bar is shown
# or events are followed; when only plain lines (or nothing) are shown, every
# ``QUIET_SECONDS`` (no more often than lines may come).
REFRESH_SECONDS = 0.25
QUIET_SECONDS = 0.5
# Embedded mode: how often to re-offer work held by a stopped process until its lease lapses.
RESUME_SECONDS = 1.0
# Plain progress lines (not a terminal): at most one every this many seconds.
PLAIN_SECONDS = 2.0
_MAX_SHOWN = 3
# The statuses a request ends in (``services.TERMINAL``).
TERMINAL = ("COMPLETE", "FAILED")


def settled(s: StackView) -> bool:
    """The stack's latest request has finished (successfully or not)."""
    return s.status in TERMINAL and s.observed_generation == s.generation


@dataclass(frozen=True, slots=True)
class Snapshot:
    stack: StackView
    total: int  # 0 while the traversal is being planned
    done: int
    # Some of the resources in progress (at most ``_MAX_SHOWN`` are shown; one more tells
    # that there are more).
    in_progress: tuple[str, ...]
    failed: int = 0
    busy: int | None = None  # how many are in progress, when known

    def describe(self) -> str:
        line = f"{self.stack.name}: {self.stack.stack_status}"
        if self.total:
            line += f"  {self.done}/{self.total} resources done"
            if self.failed:
                line += f", {self.failed} failed"
        if self.in_progress:
            line += f"; in progress: {', '.join(self.in_progress[:_MAX_SHOWN])}{self.more()}"
        return line

    def more(self) -> str:
        """`` (+N more)`` when more are in progress than shown; `` (+more)`` when how many
        is not known."""
        if self.busy is not None:
            return f" (+{self.busy - _MAX_SHOWN} more)" if self.busy > _MAX_SHOWN else ""
        return " (+more)" if len(self.in_progress) > _MAX_SHOWN else ""


class View:
    """Shows snapshots; the base class shows nothing (and is shown none)."""

    shows = False

    @property
    def every(self) -> float:
        """Seconds between two snapshots it needs."""
        return QUIET_SECONDS

    def show(self, snap: Snapshot) -> None:
        pass

    def close(self) -> None:
        pass


class PlainView(View):
    """A line when something changed, at most one every ``interval`` seconds, and the latest
    one at the end (for logs and pipes: nothing repeated, no flood)."""

    def __init__(self, con: Console, interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._con = con
        self._interval = PLAIN_SECONDS if interval is None else interval
        self._clock = clock
        self._printed = ""  # the last line printed
        self._pending = ""  # a newer one, held back: it came too soon after the last
        self._at: float | None = None  # when the last line was printed

    shows = True

    @property
    def every(self) -> float:
        return min(QUIET_SECONDS, self._interval)

    def show(self, snap: Snapshot) -> None:
        line = snap.describe()
        if line == self._printed:
            self._pending = ""
            return
        now = self._clock()
        if self._at is not None and now - self._at < self._interval:
            self._pending = line
            return
        self._print(line, now)

    def close(self) -> None:
        if self._pending:
            self._print(self._pending, self._clock())

    def _print(self, line: str, now: float) -> None:
        self._con.print(line, markup=False, highlight=False, soft_wrap=True)
        self._printed, self._pending, self._at = line, "", now


class BarView(View):
    """A live rich progress bar (on a terminal)."""

    def __init__(self, con: Console) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            TextColumn("{task.fields[status]}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[busy]}"), TimeElapsedColumn(), console=con,
            transient=False)
        self._task = self._progress.add_task("", total=None, status="", busy="")
        self._progress.start()

    shows = True

    @property
    def every(self) -> float:
        return REFRESH_SECONDS

    def show(self, snap: Snapshot) -> None:
        busy = ", ".join(snap.in_progress[:_MAX_SHOWN]) + snap.more()
        self._progress.update(self._task, total=snap.total or None, completed=snap.done,
                              status=f"{snap.stack.name} {snap.stack.stack_status}",
                              busy=f"[dim]{busy}[/dim]" if busy else "")

    def close(self) -> None:
        self._progress.stop()


def make_view(con: Console | None) -> View:
    """A bar on a terminal, plain lines elsewhere, nothing without a console."""
    if con is None:
        return View()
    return BarView(con) if con.is_terminal else PlainView(con)


class Watcher:
    """The ``on_progress`` callback of ``wait_for_stack``: reads the progress now and then
    (every :attr:`interval` seconds), for a view that shows it."""

    def __init__(self, rt: Runtime, tenant: str, view: View,
                 extra: Callable[[StackView], None] | None = None) -> None:
        self._rt, self._tenant, self._view, self._extra = rt, tenant, view, extra
        self._next = 0.0

    @property
    def interval(self) -> float:
        """Seconds between two looks: as often as the events followed or the view need."""
        return REFRESH_SECONDS if self._extra is not None else self._view.every

    def __call__(self, stack: StackView, *, force: bool = False) -> None:
        if self._extra is not None:
            self._extra(stack)
        if not self._view.shows:
            return
        now = time.monotonic()
        if not force and now < self._next and not settled(stack):
            return
        self._next = now + self._view.every
        from convergence.services import queries

        found = queries.progress_of(self._rt, stack, busy=_MAX_SHOWN + 1)
        self._view.show(Snapshot(stack, found.total, found.done, found.in_progress,
                                 found.failed))


def run_to_end(rt: Runtime, tenant: str, stack_id: str, *, view: View | None = None,
               extra: Callable[[StackView], None] | None = None) -> StackView:
    """Wait for the stack's latest request to finish; in embedded mode, do its work here,
    holding the stack meanwhile.

    ``extra`` is called with the stack at each look (``event list --follow`` prints new
    events from it). KeyboardInterrupt leaves the stack in progress (and lets go of it), to
    be resumed later.
    """
    from convergence.services import running

    if rt.inprocess is None:
        return _run(rt, tenant, stack_id, view or View(), extra)
    with running.holding(rt, stack_id):
        return _run(rt, tenant, stack_id, view or View(), extra)


def _run(rt: Runtime, tenant: str, stack_id: str, view: View,
         extra: Callable[[StackView], None] | None) -> StackView:
    from convergence.services import running

    watcher = Watcher(rt, tenant, view, extra)
    try:
        while True:
            stack = running.wait_for_stack(rt, tenant, stack_id, on_progress=watcher,
                                            refresh=watcher.interval)
            if settled(stack) or rt.inprocess is None or running.paused(rt, stack):
                break
            # Embedded, and no work left here although the request is not finished: a stopped
            # process still holds leases on some records. Re-offer the work until they lapse.
            rt.clock.sleep_until(rt.clock.now() + RESUME_SECONDS)
        watcher(stack, force=True)
    finally:
        view.close()
    return stack


def settle(rt: Runtime, tenant: str, stack: StackView) -> StackView:
    """Embedded mode: finish a request no live process is on any more (the command that
    started it was interrupted, or its process died), showing its progress, then return.

    A request another live process is driving is left to it: the stack is returned as it is
    now, at once. With a broker the workers finish it; the stack is returned as it is.
    """
    from rich.console import Console

    from convergence.services import queries, running

    if rt.inprocess is None or settled(stack) or not running.abandoned(rt, stack):
        return stack
    with running.holding(rt, stack.id) as held:
        if not held:  # another command took it up first
            return queries.get_stack(rt, tenant, stack.id)
        err = Console(stderr=True)
        click.echo(f"Resuming the interrupted {stack.action} of stack {stack.name} ...",
                   err=True)
        return _run(rt, tenant, stack.id, make_view(err), None)
