"""Requests on top of each other: updates, cancels, rollbacks and deletes while others run.

Template T as in ``test_scenarios``: A, B; C (value 4alpha) depends on A and B; D refers to C;
E takes C's output. Resources are slowed with ``action_wait_secs`` so that a request lands
while the one before is mid-way: the waits are free on the embedded tier (its clock jumps) and
a few seconds on the integration tier, which runs these scenarios unchanged
(``tests/integration/test_overlapping_distributed.py``).
"""

from __future__ import annotations

import pytest

from convergence.errors import Conflict, PreconditionFailed
from convergence.runtime import Runtime
from convergence.services import stacks

from .harness import TENANT, Story, T, res, template

HOLD = 4  # seconds an action is held open so that the next request lands during it


def run_until(rt: Runtime, condition: object) -> None:
    assert rt.inprocess is not None
    assert rt.inprocess.run(until=condition), "the condition was never reached"  # type: ignore[arg-type]


def existing(story: Story) -> set[str]:
    """Names of the resources whose current record has a live entity."""
    entities = story.entities()
    return {name for name, r in story.current().items() if r.physical_id in entities}


def stack_events(story: Story) -> list[tuple[int, str, str, str]]:
    return [(e.generation, e.action, e.status, e.reason) for e in story.events()
            if e.resource_type == "OS::Heat::Stack"]


def test_update_adding_f_while_c_is_being_created(story: Story, rt: Runtime) -> None:
    """Scenario 1: the update lands when exactly A, B and C exist; everything once."""
    slow_c = dict(T, C=res("4alpha", depends_on=["A", "B"], action_wait_secs={"create": HOLD}))
    story.create(template(slow_c))
    run_until(rt, lambda: existing(story) >= {"A", "B", "C"})
    assert existing(story) == {"A", "B", "C"} and len(story.entities()) == 3
    story.update(template(dict(slow_c, F=res("f", depends_on=["D", "E"]))))
    stack = story.finish()
    assert stack.stack_status == "UPDATE_COMPLETE"
    assert stack.generation == stack.observed_generation == 2
    assert existing(story) == set("ABCDEF")
    assert all(len(rs) == 1 for rs in story.records().values())
    assert len(story.entities()) == 6 and story.created_total() == 6
    # A and B were done and are what generation 2 wants too: the update left them alone (an
    # update plans only what it changes), converged to generation 2 as they were.
    assert {r.generation for r in story.current().values()} == {2}
    events = stack_events(story)
    assert (1, "CREATE", "SUPERSEDED", "Stack CREATE (generation 1) superseded by generation "
            "2") in events
    assert events[-1][:3] == (2, "UPDATE", "COMPLETE")


def test_resources_not_started_are_created_once_with_the_new_values(story: Story,
                                                                    rt: Runtime) -> None:
    """Scenario 2: chain A <- B <- C <- D; C and D change before they were started."""
    chain = {
        "A": res("a"),
        "B": res("b", depends_on=["A"], action_wait_secs={"create": HOLD}),
        "C": res("c", depends_on=["B"]),
        "D": res("d", depends_on=["C"]),
    }
    story.create(template(chain))
    run_until(rt, lambda: existing(story) >= {"A", "B"})
    assert existing(story) == {"A", "B"}
    story.update(template(dict(chain, C=res("c2", depends_on=["B"]),
                               D=res("d2", depends_on=["C"]))))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    current, entities = story.current(), story.entities()
    assert entities[current["C"].physical_id] == "c2"
    assert entities[current["D"].physical_id] == "d2"
    assert story.created_total() == 4 and len(entities) == 4
    assert {n: current[n].action for n in "CD"} == {"C": "CREATE", "D": "CREATE"}


def test_a_failure_rolls_the_create_back_to_nothing(story: Story, rt: Runtime) -> None:
    """Scenario 3, by failure: rollback is on by default; everything made is deleted."""
    story.create(template(dict(
        T, C=res("4alpha", depends_on=["A", "B"], action_wait_secs={"create": HOLD}),
        F=res("f", fail=True, action_wait_secs={"create": 1}))))
    stack = story.finish()
    assert stack.stack_status == "ROLLBACK_COMPLETE"
    assert not stack.disable_rollback
    assert story.entities() == {} and story.records() == {}
    assert story.created_total() >= 3  # A, B and C existed (and F, failing) before
    events = stack_events(story)
    assert (1, "CREATE", "FAILED") in [e[:3] for e in events]
    assert events[-1][:3] == (2, "ROLLBACK", "COMPLETE")
    assert "F: Test Resource failed" in next(e[3] for e in events if e[2] == "FAILED")


def test_cancel_update_of_a_create_rolls_it_back(story: Story, rt: Runtime) -> None:
    """Scenario 3, by ``cancel_update`` while the create runs."""
    story.create(template(dict(
        T, C=res("4alpha", depends_on=["A", "B"], action_wait_secs={"create": HOLD}))))
    run_until(rt, lambda: existing(story) >= {"A", "B", "C"})
    stack = stacks.cancel_stack(rt, TENANT, story.name)
    assert stack.stack_status == "ROLLBACK_IN_PROGRESS" and stack.generation == 2
    stack = story.finish()
    assert stack.stack_status == "ROLLBACK_COMPLETE"
    assert story.entities() == {} and story.records() == {}
    assert story.created_total() == 3


def _replacing(story: Story, rt: Runtime) -> tuple[dict[str, object], str]:
    """Create T where C is replaced when A's output changes and D takes a while to update;
    update A and run until the new C exists next to the old one. Returns the updated
    template and the old C's physical id."""
    t1 = dict(T, C=res("4alpha", depends_on=["A", "B"],
                       update_replace_value={"get_attr": ["A", "output"]}),
              D=res({"get_resource": "C"}, action_wait_secs={"update": HOLD}))
    story.create(template(t1))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    old_c = story.current()["C"].physical_id
    assert old_c is not None
    t2 = dict(t1, A=res("a2"))
    story.update(template(t2))

    def both_cs() -> bool:
        cs = story.records().get("C", [])
        entities = story.entities()
        return len(cs) == 2 and all(r.physical_id in entities for r in cs)

    run_until(rt, both_cs)
    return t2, old_c


def test_an_update_during_a_replacement_keeps_the_new_version(story: Story,
                                                              rt: Runtime) -> None:
    """Scenario 4: both Cs exist when F is added; in the end exactly the new C, and F."""
    t2, old_c = _replacing(story, rt)
    new_c = max(story.records()["C"], key=lambda r: r.id).physical_id
    story.update(template(dict(t2, F=res("f", depends_on=["D", "E"]))))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    records, entities = story.records(), story.entities()
    assert [r.physical_id for r in records["C"]] == [new_c]
    assert old_c not in entities and new_c in entities
    assert existing(story) == set("ABCDEF") and len(entities) == 6
    assert entities[story.current()["D"].physical_id] == new_c
    assert story.created_total() == 7  # five, the new C, and F


def test_cancelling_a_replacement_keeps_the_original(story: Story, rt: Runtime) -> None:
    """Scenario 5: cancel_update after the new C exists: the original C (same physical id)
    is kept, the new one deleted, the values back to what they were."""
    _, old_c = _replacing(story, rt)
    new_c = max(story.records()["C"], key=lambda r: r.id).physical_id
    stack = stacks.cancel_stack(rt, TENANT, story.name)
    assert stack.stack_status == "ROLLBACK_IN_PROGRESS"
    stack = story.finish()
    assert stack.stack_status == "ROLLBACK_COMPLETE", stack.status_reason
    records, entities = story.records(), story.entities()
    assert [r.physical_id for r in records["C"]] == [old_c]
    assert new_c not in entities
    current = story.current()
    assert entities[current["A"].physical_id] == "a"
    assert entities[current["D"].physical_id] == old_c
    assert entities[current["E"].physical_id] == "4alpha"
    assert len(entities) == 5 and all(len(rs) == 1 for rs in records.values())
    # The stack is back on the template of generation 1: a PATCH starts from it.
    story.update(None, existing=True)
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert story.entities()[story.current()["A"].physical_id] == "a"


def test_an_emergency_change_does_not_wait_for_a_long_create(story: Story,
                                                             rt: Runtime) -> None:
    """Scenario 7: a 30-minute create in progress; an update of it converges in seconds."""
    long = {"X": res("x", action_wait_secs={"create": 1800}), "Y": res("y")}
    story.create(template(long))
    run_until(rt, lambda: existing(story) >= {"X", "Y"})
    started = rt.clock.now()
    story.update(template(dict(long, X=res("x2", action_wait_secs={"create": 1800}))))
    stack = story.finish()
    assert stack.stack_status == "UPDATE_COMPLETE"
    assert rt.clock.now() - started < 60
    current, entities = story.current(), story.entities()
    assert entities[current["X"].physical_id] == "x2"
    assert story.created_total() == 2 and current["X"].status == "COMPLETE"
    reasons = [e.reason for e in story.events() if e.resource_name == "X"]
    assert "CREATE in progress abandoned: converging to generation 2" in reasons


def test_an_unchanged_long_operation_counts_for_the_new_traversal(story: Story,
                                                                  rt: Runtime) -> None:
    """If the definition did not change, the running operation simply goes on."""
    long = {"X": res("x", action_wait_secs={"create": HOLD}), "Y": res("y")}
    story.create(template(long))
    run_until(rt, lambda: existing(story) >= {"X", "Y"})
    story.update(template(dict(long, Z=res("z"))))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    current = story.current()
    assert story.created_total() == 3 and current["X"].action == "CREATE"
    assert not any("abandoned" in e.reason for e in story.events())


def test_cancel_without_rollback_stops_where_it_is(story: Story, rt: Runtime) -> None:
    story.create(template(T))
    story.finish()
    story.update(template(dict(T, D=res("d-new", action_wait_secs={"update": 1800}))))
    run_until(rt, lambda: story.current()["D"].status == "IN_PROGRESS")
    stack = stacks.cancel_stack(rt, TENANT, story.name, rollback=False)
    assert stack.stack_status == "UPDATE_FAILED"
    assert stack.status_reason == "Stack UPDATE cancelled"
    assert stack.generation == stack.observed_generation == 3
    assert story.current()["D"].status == "FAILED"
    # Nothing leaked and nothing stuck: a later update converges from what is there.
    story.update(template(T))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert len(story.entities()) == 5 and story.created_total() == 5


def test_delete_wins_over_a_long_update_and_refuses_later_updates(story: Story,
                                                                  rt: Runtime) -> None:
    story.create(template(T))
    story.finish()
    story.update(template(dict(T, A=res("a2", action_wait_secs={"update": 1800}))))
    run_until(rt, lambda: story.current()["A"].status == "IN_PROGRESS")
    story.delete()
    with pytest.raises(Conflict, match="being deleted"):
        story.update(template(T))
    with pytest.raises(Conflict):
        stacks.cancel_stack(rt, TENANT, story.id or story.name)
    stack = story.finish()
    assert stack.stack_status == "DELETE_COMPLETE"
    assert story.entities() == {} and story.records() == {}


def test_cancel_needs_a_create_or_update_in_progress(story: Story) -> None:
    story.create(template({"A": res("a")}))
    story.finish()
    with pytest.raises(Conflict, match="CREATE_COMPLETE"):
        stacks.cancel_stack(story.rt, TENANT, story.name)
    assert story.stack().generation == 1


def test_if_match_refuses_a_change_the_client_has_not_seen(story: Story) -> None:
    story.create(template({"A": res("a")}))
    story.finish()
    story.update(template({"A": res("a2")}))
    with pytest.raises(PreconditionFailed, match="generation 2, not 1"):
        story.update(template({"A": res("a3")}), expected_generation=1)
    with pytest.raises(PreconditionFailed):
        stacks.delete_stack(story.rt, TENANT, story.name, expected_generation=1)
    story.update(template({"A": res("a3")}), expected_generation=2)
    stack = story.finish()
    assert stack.generation == 3 and stack.stack_status == "UPDATE_COMPLETE"
    assert list(story.entities().values()) == ["a3"]
