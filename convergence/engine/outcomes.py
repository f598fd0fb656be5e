"""What a node's step is given and what it answers: the values the step, its observing half,
the batch runner, the recorder and the accountant pass between them.

Callers: :mod:`convergence.engine.step` and :mod:`convergence.engine.observing` make
:class:`StepResult` values from a :class:`StepInput`; :mod:`convergence.engine.batch` builds
the inputs and makes the records a :class:`Replacement` asks for;
:mod:`convergence.engine.recording` and :mod:`convergence.engine.accounting` write and count
the results. Plain values: nothing here acts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from convergence.ports.views import NewEvent, NodeView, RecordChange, RecordView, StackView
from convergence.template import StackDefinition

DONE, FAILED, PENDING, RETRY = "done", "failed", "pending", "retry"
# Not finished, nothing to poll: the node parks until the event it waits on (a nested stack's
# end) wakes it; its record keeps the operation, with no lease and no watch.
PARKED = "parked"
CHECK = "CHECK"
RELEASED = "released"  # not started: the lease let go of, the node offered to others
# Not finished: the resource must be replaced, and nothing was done yet. The batch makes the
# new version of the record and goes on with :meth:`Stepper.replace`; never recorded as such.
REPLACE = "replace"


@dataclass(frozen=True, slots=True)
class Replacement:
    """What a step that must replace its resource goes on with once its new record exists."""

    rtype: str  # the type of the new version
    properties: Mapping[str, Any]
    requires: list[int]
    events: list[NewEvent]  # told before the new version's own (a preemption's)
    # A create tried again after it failed in the cloud: the attempt this is (1: the first),
    # and what the failed version's record says of it (its physical id, FAILED, the reason).
    attempt: int = 1
    failed: Mapping[str, Any] | None = None


@dataclass(slots=True)
class StepResult:
    seq: int
    outcome: str  # done | failed | pending | parked | retry | released | replace
    changes: list[RecordChange] = field(default_factory=list)
    events: list[NewEvent] = field(default_factory=list)
    delay: float = 0.0
    reason: str = ""
    replacement: Replacement | None = None  # for REPLACE only
    # A check that found the resource wrong (DONE: its dependents are still checked, but the
    # traversal counts it as failed): why.
    check_failed: str = ""


@dataclass(frozen=True, slots=True)
class StepInput:
    """Everything one node's step may read."""

    stack: StackView
    traversal_id: str
    generation: int
    template_id: str | None
    definition: StackDefinition | None
    node: NodeView
    record: RecordView
    token: int
    heads: Mapping[str, RecordView]
    worked_on: bool
    # Whether the batch's leases are still good: asked before each call to the cloud, so
    # that a worker that woke up past its lease leaves the resource to its new holder.
    lease_good: Callable[[], bool] = lambda: True
    action: str = ""  # the traversal's: CREATE UPDATE DELETE ROLLBACK CHECK
    # Look at the cloud before deciding: a CHECK, or an update that converges with reality.
    observe: bool = False
