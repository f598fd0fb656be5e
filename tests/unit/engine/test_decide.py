"""The pure decision of a step, as a table."""

from __future__ import annotations

from typing import Any

import pytest

from convergence.engine.decide import (
    Action,
    Desired,
    Observed,
    decide_cleanup,
    decide_converge,
)


def obs(action: str = "CREATE", status: str = "COMPLETE", *, type: str = "T",
        props: dict[str, Any] | None = None, physical_id: str | None = "p1",
        operation: dict[str, Any] | None = None, replaced_by: int | None = None,
        worked_on: bool = True) -> Observed:
    return Observed(type=type, action=action, status=status, physical_id=physical_id,
                    properties=props if props is not None else {"v": 1}, template_id="t0",
                    operation=operation, replaced_by=replaced_by, worked_on=worked_on)


WANT = Desired("T", {"v": 1}, "t1")
CHANGED = Desired("T", {"v": 2}, "t1")


@pytest.mark.parametrize(("observed", "desired", "replace", "expected"), [
    (obs("INIT", physical_id=None, props={}), WANT, False, Action.CREATE),
    (obs("CREATE", "FAILED", physical_id=None), WANT, False, Action.CREATE),
    (obs(), WANT, False, Action.NOTHING),
    (obs(), CHANGED, False, Action.UPDATE),
    (obs(), CHANGED, True, Action.REPLACE),
    (obs(type="Other"), WANT, False, Action.REPLACE),
    (obs("UPDATE", "FAILED"), CHANGED, False, Action.UPDATE),
    (obs("UPDATE", "FAILED"), CHANGED, True, Action.REPLACE),
    (obs("CREATE", "IN_PROGRESS", operation={"action": "CREATE"}), WANT, False, Action.POLL),
    (obs("UPDATE", "IN_PROGRESS", operation={"action": "UPDATE"}), CHANGED, True, Action.POLL),
    (obs("DELETE", "COMPLETE"), WANT, False, Action.CREATE),
    # A delete was started: the old version's cleanup sees it to its end; a new one is made.
    (obs("DELETE", "IN_PROGRESS", operation={"action": "DELETE"}), WANT, False,
     Action.REPLACE),
    (obs("DELETE", "FAILED"), WANT, False, Action.REPLACE),
    (obs("CHECK", "FAILED"), WANT, False, Action.REPLACE),  # marked unhealthy
    (obs("CHECK", "COMPLETE"), WANT, False, Action.NOTHING),
])
def test_converge(observed: Observed, desired: Desired, replace: bool, expected: Action) -> None:
    assert decide_converge(observed, desired, replace) is expected


@pytest.mark.parametrize(("observed", "wanted", "expected"), [
    (obs(), True, Action.NOTHING),
    (obs(replaced_by=9), True, Action.DELETE),
    (obs(), False, Action.DELETE),
    (obs("INIT", physical_id=None, worked_on=False), False, Action.FORGET),
    # Someone worked on it: an interrupted create may have left something to find and delete.
    (obs("INIT", physical_id=None, worked_on=True), False, Action.DELETE),
    (obs("CREATE", "IN_PROGRESS", physical_id=None, operation={"action": "CREATE"}), False,
     Action.DELETE),
    (obs("DELETE", "IN_PROGRESS", operation={"action": "DELETE"}), False, Action.POLL),
    (obs("DELETE", "COMPLETE"), False, Action.FORGET),
    (obs("CREATE", "FAILED"), False, Action.DELETE),
])
def test_cleanup(observed: Observed, wanted: bool, expected: Action) -> None:
    assert decide_cleanup(observed, wanted) is expected
