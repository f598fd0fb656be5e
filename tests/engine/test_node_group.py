"""``OS::Convergence::NodeGroup`` on the embedded tier, under every adversity: named members
that differ by their overrides, changed one at a time without touching the others; a count
that adds generated members and removes the failed, the named and the newest first; a change
of definition rolled through a member at a time.
"""

from __future__ import annotations

import json
from typing import Any

from convergence.ports.views import StackView
from convergence.runtime import Runtime

from .harness import Story
from .test_nested import live_values
from .test_resource_group import child_events, most_at_once, outputs


def node_group(members: dict[str, Any], *, count: int | None = None,
               value: str = "%index%", removal: list[str] | None = None,
               rolling: dict[str, Any] | None = None, wait: float = 0.0) -> str:
    props: dict[str, Any] = {
        "resource_def": {"type": "OS::Heat::TestResource",
                         "properties": {"value": value, "update_replace_value": "zone-a",
                                        "action_wait_secs": {"create": wait,
                                                             "update": wait}}},
        "members": members}
    if count is not None:
        props["count"] = count
    if removal is not None:
        props["removal_policies"] = [{"resource_list": removal}]
    if rolling is not None:
        props["rolling_update"] = rolling
    return json.dumps({
        "heat_template_version": "2018-08-31",
        "resources": {"g": {"type": "OS::Convergence::NodeGroup", "properties": props}},
        "outputs": {"values": {"value": {"get_attr": ["g", "output"]}},
                    "members": {"value": {"get_attr": ["g", "members"]}},
                    "by_name": {"value": {"get_attr": ["g", "attributes", "output"]}}}})


def child_records(rt: Runtime, stack: StackView) -> dict[str, Any]:
    with rt.store.read() as tx:
        (child,) = tx.child_stacks(stack.id)
        return {r.name: r for r in tx.records(child.id) if r.replaced_by is None}


def untouched(now: Any, then: Any) -> bool:
    """The same record, never claimed by a step since (its fencing token did not move) and
    holding what it held."""
    return (now.id, now.fencing_token, now.physical_id, dict(now.properties),
            dict(now.attributes)) == (then.id, then.fencing_token, then.physical_id,
                                      dict(then.properties), dict(then.attributes))


def planned(rt: Runtime, stack: StackView) -> list[str]:
    with rt.store.read() as tx:
        (child,) = tx.child_stacks(stack.id)
        assert child.traversal_id is not None
        return sorted(n.name for n in tx.nodes(child.traversal_id, range(1000))
                      if n.phase == "converge")


def test_named_members_each_with_their_overrides(story: Story) -> None:
    rt = story.rt
    members = {"m-1": {}, "w-1": {"value": "big"},
               "w-2": {"value": "big", "update_replace_value": "zone-b"}}
    story.create(node_group(members))
    done = story.finish()
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason
    assert outputs(done)["members"] == ["m-1", "w-1", "w-2"]
    assert outputs(done)["by_name"] == {"m-1": "m-1", "w-1": "big", "w-2": "big"}
    records = child_records(rt, done)
    assert records["w-2"].properties["update_replace_value"] == "zone-b"
    assert records["w-1"].properties["update_replace_value"] == "zone-a"


def test_changing_or_removing_one_member_touches_only_it(story: Story) -> None:
    rt = story.rt
    members = {"a": {}, "b": {}, "c": {}}
    story.create(node_group(members))
    before = child_records(rt, story.finish())
    story.update(node_group({"a": {}, "b": {"value": "changed"}, "c": {}}))
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert planned(rt, done) == ["b"]
    after = child_records(rt, done)
    assert untouched(after["a"], before["a"]) and untouched(after["c"], before["c"])
    assert after["b"].attributes["output"] == "changed"
    story.update(node_group({"a": {}, "b": {"value": "changed"}}))
    removed = story.finish()
    assert removed.stack_status == "UPDATE_COMPLETE", removed.status_reason
    assert planned(rt, removed) == []  # c's cleanup only: nothing else is looked at
    assert sorted(child_records(rt, removed)) == ["a", "b"]
    assert untouched(child_records(rt, removed)["a"], before["a"])


def test_a_count_adds_generated_members_and_removes_the_newest(story: Story) -> None:
    rt = story.rt
    story.create(node_group({"master": {}}, count=4))
    done = story.finish()
    assert outputs(done)["members"] == ["master", "node-0", "node-1", "node-2"]
    story.update(node_group({"master": {}}, count=4, removal=["node-1"]))
    replaced = story.finish()
    assert outputs(replaced)["members"] == ["master", "node-0", "node-2", "node-3"]
    story.update(node_group({"master": {}}, count=3, removal=["node-1"]))
    shrunk = story.finish()
    assert shrunk.stack_status == "UPDATE_COMPLETE", shrunk.status_reason
    assert outputs(shrunk)["members"] == ["master", "node-0", "node-2"]  # newest went
    story.update(node_group({"master": {}}, count=5, removal=["node-1"]))
    grown = story.finish()
    # Names once removed are never used again.
    assert outputs(grown)["members"] == ["master", "node-0", "node-2", "node-4", "node-5"]
    assert live_values(rt, grown.id) == sorted(outputs(grown)["members"])


def test_a_count_below_the_named_members_fails_saying_why(story: Story) -> None:
    story.create(node_group({"a": {}, "b": {}}, count=1))
    done = story.finish()
    assert done.status == "FAILED" or done.action == "ROLLBACK"
    reasons = [e.reason for e in story.events() if e.status == "FAILED"]
    assert any("count (1) is less than the 2 named members" in r for r in reasons)


def test_a_new_definition_rolls_one_member_at_a_time(story: Story) -> None:
    rt = story.rt
    members = {f"n{i}": {} for i in range(4)}
    story.create(node_group(members, value="v1", rolling={"max_unavailable": 1}, wait=5.0))
    story.finish()
    story.update(node_group(members, value="v2", rolling={"max_unavailable": 1}, wait=5.0))
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert outputs(done)["values"] == ["v2"] * 4
    events = child_events(rt, done)
    updates = [e for e in events if e.action == "UPDATE" and e.resource_name.startswith("n")]
    assert most_at_once(updates, "UPDATE") == 1
    assert sorted({e.resource_name for e in updates}) == ["n0", "n1", "n2", "n3"]
