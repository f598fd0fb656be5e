"""The engine's scenarios, told against real rows and real test entities.

Template T: A, B; C (value 4alpha) depends on A and B; D refers to C; E takes C's output.
"""

from __future__ import annotations

from convergence.runtime import Runtime

from .harness import Story, T, res, template


def test_create_makes_each_resource_once_with_resolved_values(story: Story) -> None:
    story.create(template(T, {"e": {"value": {"get_attr": ["E", "output"]}}}))
    stack = story.finish()
    assert stack.stack_status == "CREATE_COMPLETE"
    assert stack.generation == stack.observed_generation == 1
    current = story.current()
    assert sorted(current) == ["A", "B", "C", "D", "E"]
    assert all(len(v) == 1 for v in story.records().values())
    entities = story.entities()
    assert len(entities) == 5 and story.created_total() == 5
    assert entities[current["D"].physical_id] == current["C"].physical_id
    assert entities[current["E"].physical_id] == "4alpha"
    assert stack.outputs["e"]["value"] == "4alpha"
    assert set(current["C"].requires) == {current["A"].id, current["B"].id}


def test_independent_groups_complete_in_one_traversal(story: Story) -> None:
    story.create(template({
        "A": res("a"),
        "C": res("c", depends_on=["A"]),
        "D": res({"get_resource": "C"}),
        "B": res("b"),
        "E": res("e"),
    }))
    stack = story.finish()
    assert stack.stack_status == "CREATE_COMPLETE"
    assert len(story.entities()) == 5


def test_update_removing_a_resource_deletes_only_it(story: Story) -> None:
    story.create(template(T))
    story.finish()
    before = {n: r.physical_id for n, r in story.current().items()}
    story.update(template({k: v for k, v in T.items() if k != "E"}))
    stack = story.finish()
    assert stack.stack_status == "UPDATE_COMPLETE"
    after = {n: r.physical_id for n, r in story.current().items()}
    assert after == {k: v for k, v in before.items() if k != "E"}
    assert before["E"] not in story.entities()
    assert len(story.entities()) == 4 and story.created_total() == 5


def test_shrink_then_grow_then_delete(story: Story) -> None:
    story.create(template(T))
    story.finish()
    old_e = story.current()["E"].physical_id
    story.update(template({k: v for k, v in T.items() if k != "E"}))
    story.finish()
    grown = dict(T, F=res("f", depends_on=["D", "E"]))
    story.update(template(grown))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    current = story.current()
    assert current["E"].physical_id != old_e
    assert len(story.entities()) == 6 and story.created_total() == 7
    f_created = current["F"].created_at
    assert all(r.updated_at <= current["F"].updated_at for r in current.values())
    assert f_created >= current["E"].created_at
    story.delete()
    stack = story.finish()
    assert stack.stack_status == "DELETE_COMPLETE"
    assert story.entities() == {} and story.records() == {}


def test_replacement_is_create_before_delete_and_repoints_users(story: Story) -> None:
    t1 = dict(T, C=res("4alpha", depends_on=["A", "B"],
                                 update_replace_value={"get_attr": ["A", "output"]}))
    story.create(template(t1))
    story.finish()
    old = story.current()
    t2 = dict(t1, A=res("a2"))
    story.update(template(t2))
    stack = story.finish()
    assert stack.stack_status == "UPDATE_COMPLETE"
    new = story.current()
    assert new["C"].physical_id != old["C"].physical_id
    assert new["C"].replaces == old["C"].id
    entities = story.entities()
    assert old["C"].physical_id not in entities
    assert entities[new["D"].physical_id] == new["C"].physical_id
    assert new["D"].physical_id == old["D"].physical_id  # D updated in place
    assert new["C"].id in new["D"].requires and new["C"].id in new["E"].requires
    assert len(entities) == 5 and story.created_total() == 6
    events = [(e.resource_name, e.action, e.status, e.physical_resource_id)
              for e in story.events()]
    old_c_deleted = events.index(("C", "DELETE", "COMPLETE", old["C"].physical_id))
    d_updated = events.index(("D", "UPDATE", "COMPLETE", new["D"].physical_id))
    new_c_created = events.index(("C", "CREATE", "COMPLETE", new["C"].physical_id))
    assert new_c_created < d_updated < old_c_deleted


def test_delete_while_create_is_running(story: Story, rt: Runtime) -> None:
    slow = {"create": 30}
    story.create(template({
        "A": res("a"),
        "B": res("b", action_wait_secs=slow),
        "C": res("c", depends_on=["A", "B"]),
        "D": res({"get_resource": "C"}),
    }))
    assert rt.inprocess is not None
    # Run until A exists and B's creation is under way, then delete.
    rt.inprocess.run(until=lambda: len(story.entities()) >= 2)
    assert story.current()["C"].action == "INIT"
    story.delete()
    stack = story.finish()
    assert stack.stack_status == "DELETE_COMPLETE"
    assert story.entities() == {} and story.records() == {}


def test_a_failing_resource_fails_the_stack_and_spares_the_rest(story: Story) -> None:
    story.create(template({
        "A": res("a"),
        "B": res("b", fail=True),
        "C": res("c", depends_on=["B"]),
        "D": res("d", depends_on=["A"]),
        "E": res("e"),
    }), disable_rollback=True)
    stack = story.finish()
    assert stack.stack_status == "CREATE_FAILED"
    assert "B: Test Resource failed" in stack.status_reason
    current = story.current()
    assert current["B"].status == "FAILED"
    assert current["C"].action == "INIT"
    assert {current[n].status for n in "ADE"} == {"COMPLETE"}
    assert sorted(story.entities().values()) == ["a", "d", "e"]


def test_timeout_fails_the_traversal(story: Story) -> None:
    story.create(template({"A": res("a", wait_secs=600)}), timeout_mins=1,
                 disable_rollback=True)
    stack = story.finish()
    assert stack.stack_status == "CREATE_FAILED"
    assert "Timed out" in stack.status_reason


def test_retained_resources_outlive_the_stack(story: Story) -> None:
    kept = dict(res("kept"), deletion_policy="Retain")
    story.create(template({"K": kept, "G": res("gone")}))
    story.finish()
    retained_id = story.current()["K"].physical_id
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert story.records() == {}
    assert story.entities() == {retained_id: "kept"}
    assert any(e.resource_name == "K" and "retained" in e.reason for e in story.events())
