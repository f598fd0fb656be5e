"""The events as a ledger: each physical resource's story, whichever traversal told it.

A resource taken out of the template and put back before its delete ended, a failed create
tried again: each physical id's events must still run from the action that made it to its
``DELETE_COMPLETE`` (``tests/ledger.py`` checks the whole stack against the live entities).
The waits are free on the embedded tier (its clock jumps); the integration tier runs the same
scenarios on real workers (``tests/integration/test_ledger_distributed.py``).
"""

from __future__ import annotations

from convergence.runtime import Runtime
from tests import ledger

from .harness import Story, res, template

HOLD = 4  # seconds an action is held open so that the next request lands during it


def run_until(rt: Runtime, condition: object) -> None:
    assert rt.inprocess is not None
    assert rt.inprocess.run(until=condition), "the condition was never reached"  # type: ignore[arg-type]


def story_of(story: Story, physical_id: str | None) -> list[str]:
    """One physical id's events, as ``ACTION_STATUS``."""
    return [f"{e.action}_{e.status}" for e in story.events()
            if e.physical_resource_id == physical_id and e.resource_type != ledger.STACK_TYPE]


def ledger_problems(story: Story) -> list[str]:
    events = [ledger.Entry(e.resource_name, e.physical_resource_id, e.resource_type, e.action,
                           e.status, e.reason, e.generation) for e in story.events()]
    records = {r.physical_id: f"{r.action}_{r.status}"
               for rs in story.records().values() for r in rs if r.physical_id}
    return ledger.problems(events, story.entities(), records)


def test_a_resource_put_back_while_its_delete_runs(story: Story, rt: Runtime) -> None:
    """X is taken out of the template; while its delete takes its time, X is put back. The X
    that was being deleted ends with DELETE_COMPLETE, and a new X is made."""
    x = res("x", action_wait_secs={"delete": HOLD})
    story.create(template({"X": x, "Y": res("y")}))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    old = story.current()["X"].physical_id
    story.update(template({"Y": res("y")}))
    run_until(rt, lambda: story.current()["X"].status == "IN_PROGRESS")
    assert old not in story.entities()  # gone from the cloud, the wait not over yet
    story.update(template({"X": x, "Y": res("y")}))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    new = story.current()["X"].physical_id
    assert new != old and story.entities()[new or ""] == "x"
    assert story_of(story, old) == ["CREATE_IN_PROGRESS", "CREATE_COMPLETE",
                                    "DELETE_IN_PROGRESS", "DELETE_COMPLETE"]
    assert story_of(story, new) == ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]
    assert [len(rs) for rs in story.records().values()] == [1, 1]
    assert ledger_problems(story) == []


def test_a_failed_create_tried_again(story: Story) -> None:
    """X's create fails after a while (its entity is gone with the failure, as in Heat) and
    the stack is not rolled back; the next update tries X again and makes another. The X that
    failed ends with DELETE_COMPLETE when its record forgets it, and the new one lives."""
    story.create(template({"X": res("x", fail=True, action_wait_secs={"create": HOLD})}),
                 disable_rollback=True)
    assert story.finish().stack_status == "CREATE_FAILED"
    failed = story.current()["X"].physical_id
    assert failed is not None and story.entities() == {}
    assert story_of(story, failed) == ["CREATE_IN_PROGRESS", "CREATE_FAILED"]
    assert ledger_problems(story) == []  # failed, and still the stack's
    story.update(template({"X": res("x")}))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    new = story.current()["X"].physical_id
    assert list(story.entities().items()) == [(new, "x")]
    assert story_of(story, failed) == ["CREATE_IN_PROGRESS", "CREATE_FAILED",
                                       "DELETE_COMPLETE"]
    assert story_of(story, new) == ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]
    assert ledger_problems(story) == []


def test_the_checker_names_the_physical_id_and_its_story() -> None:
    """``tests/ledger.py`` itself: an id gone with its delete unfinished, an id alive by its
    events that reality does not have, and a failed one its record still holds."""
    def entry(name: str, pid: str, state: str, generation: int = 1) -> ledger.Entry:
        action, status = state.split("_", 1)
        return ledger.Entry(name, pid, "OS::Heat::TestResource", action, status, "", generation)

    events = [entry("X", "p1", "CREATE_IN_PROGRESS"), entry("X", "p1", "CREATE_COMPLETE"),
              entry("X", "p1", "DELETE_IN_PROGRESS", 2), entry("X", "p2", "CREATE_COMPLETE", 3),
              entry("Y", "p3", "CREATE_FAILED"), entry("Z", "p4", "DELETE_COMPLETE")]
    wrong = ledger.problems(events, {"p2": "X"}, {"p3": "CREATE_FAILED"})
    assert wrong == [
        "p1 no longer exists, but its events end with DELETE_IN_PROGRESS: g1 X "
        "CREATE_IN_PROGRESS () | g1 X CREATE_COMPLETE () | g2 X DELETE_IN_PROGRESS ()",
        "p4 starts with DELETE_COMPLETE, not with the action that made it: g1 Z "
        "DELETE_COMPLETE ()",
        "X has 2 physical ids live by its events (p1, p2), 1 in reality",
    ]
