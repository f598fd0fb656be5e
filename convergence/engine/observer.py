"""The observer: stacks that opted in are looked at now and then, and what is found wrong in
the cloud is dealt with as each resource type's policy says, by a generation like any other.

Heat's engine repairs nothing by itself (a server in ERROR only logs a warning) and its
planned observer never shipped. Here, with ``CONVERGENCE_OBSERVE_SECONDS`` set, every worker
process (and the embedded engine) runs :class:`Observer`; a turn in the ``sweeps`` table
makes one of them observe at a time. A pass takes the stacks opted in (``observe``) that are
at rest and were not looked at for a period, oldest first, and asks each resource's plugin
what it really is (``observe``), at most ``per_pass`` resources a pass: a bounded rate, so a
large fleet is looked at in turns rather than all at once. What is missing, in ERROR or
drifted is then, by the type's ``observe_policy``:

- ``repair``: the stack converges (an UPDATE to its own template that looks at the cloud, as
  ``stack update --existing --converge``), started by the observer, visible in the events
  and the stream as any generation;
- ``mark_unhealthy``: the resource is CHECK_FAILED, and the next update replaces it;
- ``report``: an event says what was found, and nothing else is done.

What is decided is written under the stack's lock, and only if no request was accepted since
the resources were read (a newer generation decides for itself).

Callers: ``convergence.runtime`` (the embedded engine's periodic job, beside the sweeper) and
the worker process (``convergence.workers.process``: :class:`ObserveLoop`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from convergence.background import Loop
from convergence.engine.engine import Engine
from convergence.engine.observing import drift, drift_reason
from convergence.engine.traversals import begin_traversal
from convergence.plugins.base import MARK_UNHEALTHY, REPAIR, ResourceFailure, RetryLater
from convergence.ports.views import NewEvent, RecordView, StackView
from convergence.ports.work import PLAN, Work

log = logging.getLogger(__name__)

NAME = "observer"
STACKS_PER_PASS = 50


@dataclass(frozen=True, slots=True)
class Finding:
    """A resource found wrong: why, and what its type's policy says to do."""

    record: RecordView
    reason: str
    policy: str


@dataclass(slots=True)
class ObserveReport:
    ran: bool = False
    stacks: int = 0
    resources: int = 0
    findings: list[Finding] = field(default_factory=list)
    work: list[Work] = field(default_factory=list)


class Observer:
    """Observes the stacks opted in, each once per ``period``, ``per_pass`` resources at
    most per pass (see the module's docstring)."""

    def __init__(self, engine: Engine, period: float, per_pass: int = 100) -> None:
        self.engine = engine
        self.period = period
        self.per_pass = per_pass

    def periodic(self, force: bool = False) -> tuple[list[Work], float | None]:
        """A pass, as the in-process dispatcher's periodic job."""
        return self.observe(force=force).work, None

    def observe(self, *, force: bool = False) -> ObserveReport:
        store = self.engine.store
        holder = self.engine.worker_id
        with store.begin() as tx:
            if not tx.take_turn(NAME, holder, 0.0 if force else self.period * 0.2,
                                hold=max(3 * self.period, 30.0)):
                return ObserveReport()
        report = ObserveReport(ran=True)
        try:
            with store.begin() as tx:
                due = tx.stacks_to_observe(tx.now - (0.0 if force else self.period),
                                           STACKS_PER_PASS)
            budget = self.per_pass
            for stack in due:
                if budget <= 0:
                    break
                budget -= self._observe_stack(stack, report, budget)
        finally:
            with store.begin() as tx:
                tx.end_turn(NAME, holder)
        if report.findings:
            log.info("observer: %d of %d resources in %d stacks found wrong",
                     len(report.findings), report.resources, report.stacks)
        return report

    def _observe_stack(self, stack: StackView, report: ObserveReport, budget: int) -> int:
        """Look at one stack's resources (at most ``budget``); act on what is found. Returns
        how many were looked at."""
        with self.engine.store.read() as tx:
            records = [r for r in tx.records(stack.id)
                       if r.replaced_by is None and r.physical_id is not None and
                       r.operation is None and r.action not in ("INIT", "DELETE")]
        records = records[:budget]
        findings: list[Finding] = []
        for record in records:
            try:
                seen, policy = self.engine.observe_record(stack, record)
            except RetryLater:
                continue  # the cloud did not answer: the next pass looks again
            except ResourceFailure as exc:
                findings.append(Finding(record, str(exc), REPAIR))
                continue
            if seen is None:
                continue
            reason = seen.reason if not seen.healthy else ""
            if seen.healthy:
                changed = drift(record.properties, seen.properties)
                reason = drift_reason(changed) if changed else ""
            if reason:
                findings.append(Finding(record, reason, policy))
        report.stacks += 1
        report.resources += len(records)
        report.findings.extend(findings)
        report.work.extend(self._act(stack, findings))
        return max(len(records), 1)

    def _act(self, seen_as: StackView, findings: Sequence[Finding]) -> list[Work]:
        """Under the stack's lock, unless a request was accepted meanwhile: note the stack
        looked at, and deal with what was found."""
        with self.engine.store.begin() as tx:
            stack = tx.stack(seen_as.id, lock=True)
            if stack is None or stack.generation != seen_as.generation or \
                    stack.status == "IN_PROGRESS" or stack.deleted_at is not None:
                return []
            tx.update_stack(stack.id, observed_at=tx.now)
            if not findings:
                return []
            events = [NewEvent(f.record.name, f.record.physical_id, f.record.type, "CHECK",
                               "FAILED", f"observed: {f.reason}") for f in findings]
            for f in findings:
                if f.policy == MARK_UNHEALTHY:
                    tx.set_record_state(f.record.id, "CHECK", "FAILED", f"observed: {f.reason}")
            tx.add_events(stack.id, stack.traversal_id, stack.generation, events)
            repair = [f for f in findings if f.policy == REPAIR]
            if not repair or stack.template_id is None:
                return []
            names = ", ".join(sorted({f.record.name for f in repair}))
            traversal_id = begin_traversal(
                tx, stack, "UPDATE", stack.template_id, observe=True,
                reason=f"Stack UPDATE started by the observer: {names} found wrong")
        return [Work(PLAN, traversal_id)]


def observe_pass_seconds(period: float) -> float:
    """How often a process tries for the observer's turn: often enough that a stack due is
    looked at soon after its period, never busier than every 5 seconds."""
    return max(5.0, period / 4)


class ObserveLoop(Loop):
    """Observes on a daemon thread, sending the work it starts through ``dispatch``; a pass
    that fails (the database is away) is tried again after a while."""

    def __init__(self, observer: Observer, dispatch: Callable[[Sequence[Work]], None],
                 every: float) -> None:
        super().__init__("observer", on_error_wait=every)
        self._observer = observer
        self._dispatch = dispatch
        self._every = every

    def turn(self, stop: threading.Event) -> float:
        report = self._observer.observe()
        if report.work:
            self._dispatch(report.work)
        return self._every
