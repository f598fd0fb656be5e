"""Following a request's work to its end from this process: waiting for it (embedded mode:
running it here, on the in-process dispatcher), holding the stack meanwhile, re-offering work
a stopped process left behind, and telling such abandoned work from work a live process is on.

Callers: the CLI (``convergence.cli.progress``: ``run_to_end`` and ``settle``), the engine
and integration tests and the benchmarks. Each look at the stack is a read of its own
(``convergence.services.queries.get_stack``); the holds are the runtime's
(``Runtime.holds``, a ``convergence.services.holds.StackHolds``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from convergence.ports.views import API, PARKED, READY, WORKER, StackView
from convergence.services.queries import get_stack

if TYPE_CHECKING:
    from convergence.services.context import Runtime

TERMINAL = ("COMPLETE", "FAILED")
"""The statuses a stack's request ends in."""


def resume_stack(rt: Runtime, stack: StackView) -> None:
    """Re-offer a running traversal's work (after the process that ran it stopped)."""
    if stack.traversal_id and stack.status == "IN_PROGRESS":
        rt.dispatcher.dispatch(rt.engine.resume(stack.traversal_id))


def holding(rt: Runtime, stack_id: str) -> AbstractContextManager[bool]:
    """While the block runs, this process drives the stack's work (embedded mode) and holds
    the stack, so that other processes leave it be (``convergence.services.holds``). Yields
    whether it holds it: False when another live process does (then it is taken once that
    one lets go)."""
    return rt.holds.holding(stack_id)


def abandoned(rt: Runtime, stack: StackView) -> bool:
    """The stack's latest request is unfinished and no live process is on it: the process
    that drove it stopped (Ctrl-C) or died (its hold on the stack ran out), and no worker or
    API process that sweeps this database is up (it would find the work itself). Only such
    work is for a command in embedded mode to resume."""
    if stack.status in TERMINAL and stack.observed_generation == stack.generation:
        return False
    interval = rt.settings.heartbeat_seconds
    with rt.store.read() as tx:
        if tx.stack_holder(stack.id) is not None:
            return False
        now = tx.now
        workers = tx.workers(since=now - 3 * interval)
    return not any(w.kind in (WORKER, API) and w.is_up(now, interval) for w in workers)


def wait_for_stack(rt: Runtime, tenant: str, stack_id: str,
                   on_progress: Callable[[StackView], None] | None = None,
                   timeout: float | None = None, refresh: float = 0.25,
                   poll: float = 0.1) -> StackView:
    """Block until the stack's latest request finished; in embedded mode, run it here.
    Another process running it: the stack is read every ``refresh`` seconds at most, the
    clock looked at every ``poll`` seconds."""
    deadline = rt.clock.now() + timeout if timeout else None
    seen = {"finishes": -1, "at": 0.0}

    def finished() -> bool:
        # Reading the stack after every work item would cost a transaction per step: read it
        # when a traversal finished here, or ``refresh`` seconds after the last look.
        now = time.monotonic()
        if rt.engine.finishes == seen["finishes"] and now - seen["at"] < refresh:
            return False
        seen["finishes"], seen["at"] = rt.engine.finishes, now
        s = get_stack(rt, tenant, stack_id)
        if on_progress is not None:
            on_progress(s)
        return (s.status in TERMINAL and s.observed_generation == s.generation) or \
            (deadline is not None and rt.clock.now() > deadline)

    inprocess = rt.inprocess
    if inprocess is not None:
        if inprocess.pending() == 0:
            # Nothing queued here: the work was started by a process that is gone.
            resume_stack(rt, get_stack(rt, tenant, stack_id))
        inprocess.run(until=finished)
    else:
        while not finished():
            rt.clock.sleep_until(rt.clock.now() + poll)
    return get_stack(rt, tenant, stack_id)


def paused(rt: Runtime, stack: StackView) -> bool:
    """Whether the stack's request waits on something outside it (a hook to clear, a nested
    stack another process runs): parked nodes and no ready one. Nothing here can go on."""
    if stack.traversal_id is None or stack.status != "IN_PROGRESS":
        return False
    with rt.store.read() as tx:
        states = tx.node_states(stack.traversal_id)
    return states.get(PARKED, 0) > 0 and states.get(READY, 0) == 0
