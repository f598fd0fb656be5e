"""``OS::Heat::ResourceGroup`` on the embedded tier, under every adversity: its members are a
nested stack's resources, named by index; removal policies take members out of the middle
and their names are never used again; growing the group touches only the new members; the
group's attributes are its members', read as Heat reads them.
"""

from __future__ import annotations

import json
from typing import Any

from convergence.ports.views import StackView
from convergence.runtime import Runtime

from .harness import Story
from .test_nested import live, live_values


def group(count: int, *, removal: list[str] | None = None, mode: str | None = None,
          value: str = "m%index%") -> str:
    props: dict[str, Any] = {"count": count, "resource_def": {
        "type": "OS::Heat::TestResource", "properties": {"value": value}}}
    if removal is not None:
        props["removal_policies"] = [{"resource_list": removal}]
    if mode is not None:
        props["removal_policies_mode"] = mode
    return json.dumps({
        "heat_template_version": "2018-08-31",
        "resources": {"g": {"type": "OS::Heat::ResourceGroup", "properties": props}},
        "outputs": {
            "refs": {"value": {"get_attr": ["g", "refs"]}},
            "refs_map": {"value": {"get_attr": ["g", "refs_map"]}},
            "outs": {"value": {"get_attr": ["g", "output"]}},
            "by_name": {"value": {"get_attr": ["g", "attributes", "output"]}},
            "first": {"value": {"get_attr": ["g", "resource.0.output"]}},
            "removed": {"value": {"get_attr": ["g", "removed_rsrc_list"]}},
        }})


def outputs(stack: StackView) -> dict[str, Any]:
    return {k: v["value"] for k, v in stack.outputs.items()}


def members(rt: Runtime, stack: StackView) -> dict[str, str]:
    """The group's nested stack's resources: name -> physical id."""
    with rt.store.read() as tx:
        (child,) = tx.child_stacks(stack.id)
        return {r.name: str(r.physical_id) for r in tx.records(child.id)
                if r.replaced_by is None}


def test_a_group_makes_its_members_in_a_nested_stack(story: Story) -> None:
    rt = story.rt
    story.create(group(3))
    done = story.finish()
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason
    made = members(rt, done)
    assert sorted(made) == ["0", "1", "2"]
    out = outputs(done)
    assert out["refs"] == [made["0"], made["1"], made["2"]]
    assert out["refs_map"] == made
    assert out["outs"] == ["m0", "m1", "m2"]
    assert out["by_name"] == {"0": "m0", "1": "m1", "2": "m2"}
    assert out["first"] == "m0"
    assert out["removed"] == []
    assert live_values(rt, done.id) == ["m0", "m1", "m2"]


def test_removal_policies_take_members_from_the_middle_for_good(story: Story) -> None:
    rt = story.rt
    story.create(group(4))
    first = story.finish()
    before = members(rt, first)
    # Remove member 1 by name and member 2 by reference; the group keeps four members.
    story.update(group(4, removal=["1", before["2"]]))
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    after = members(rt, done)
    assert sorted(after) == ["0", "3", "4", "5"]
    # The members that stay are the very same resources.
    assert (after["0"], after["3"]) == (before["0"], before["3"])
    assert outputs(done)["removed"] == ["1", "2"]
    assert outputs(done)["outs"] == ["m0", "m3", "m4", "m5"]
    # Growing later never brings the removed names back.
    story.update(group(6, removal=["1", before["2"]]))
    grown = story.finish()
    assert sorted(members(rt, grown)) == ["0", "3", "4", "5", "6", "7"]
    assert live_values(rt, grown.id) == ["m0", "m3", "m4", "m5", "m6", "m7"]


def test_removal_policies_mode_update_replaces_the_removed_list(story: Story) -> None:
    rt = story.rt
    story.create(group(3, removal=["0"]))
    assert sorted(members(rt, story.finish())) == ["1", "2", "3"]
    story.update(group(3, removal=["1"], mode="update"))
    done = story.finish()
    assert outputs(done)["removed"] == ["1"]
    # Name 0 may be used again: it is no longer on the list.
    assert sorted(members(rt, done)) == ["0", "2", "3"]


def test_growing_a_group_touches_only_its_new_members(story: Story) -> None:
    rt = story.rt
    story.create(group(3))
    first = story.finish()
    with rt.store.read() as tx:
        (child,) = tx.child_stacks(first.id)
        before = {r.name: (r.id, r.updated_at, r.generation) for r in tx.records(child.id)}
    story.update(group(5))
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    with rt.store.read() as tx:
        after = {r.name: (r.id, r.updated_at, r.generation) for r in tx.records(child.id)}
    assert sorted(after) == ["0", "1", "2", "3", "4"]
    for name in ("0", "1", "2"):  # the same records, never changed in the cloud
        assert after[name][0] == before[name][0]
    created = [e for e in story_events(rt, child.id) if e.action == "CREATE"
               and e.status == "COMPLETE" and e.resource_name != child.name]
    assert sorted(e.resource_name for e in created) == ["0", "1", "2", "3", "4"]
    updated = [e for e in story_events(rt, child.id) if e.action == "UPDATE"
               and e.resource_name != child.name]
    assert updated == []
    # The nested stack's update planned the new members only: the others were not stepped.
    with rt.store.read() as tx:
        grown = tx.stack(child.id)
        assert grown is not None and grown.traversal_id is not None
        planned = tx.nodes(grown.traversal_id, range(1000))
    assert sorted(n.name for n in planned) == ["3", "4"]


def story_events(rt: Runtime, stack_id: str) -> list[Any]:
    with rt.store.read() as tx:
        return tx.events(stack_id)


def test_a_group_of_nothing_and_its_delete(story: Story) -> None:
    rt = story.rt
    story.create(group(0))
    done = story.finish()
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason
    assert outputs(done)["refs"] == []
    story.update(group(2))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    story.delete()
    gone = story.finish()
    assert gone.stack_status == "DELETE_COMPLETE"
    assert live(rt, gone.id) == {}


def rolling(count: int, value: str, policy: dict[str, Any], *, wait: float = 5.0) -> str:
    doc = json.loads(group(count, value=value))
    g = doc["resources"]["g"]
    g["properties"]["resource_def"]["properties"]["action_wait_secs"] = {
        "create": wait, "update": wait}
    g["update_policy"] = policy
    return json.dumps(doc)


def most_at_once(events: list[Any], action: str) -> int:
    """The most members ever in the middle of ``action`` at the same time, by the events."""
    busy: set[str] = set()
    most = 0
    for e in sorted(events, key=lambda e: e.id):
        if e.action != action or e.resource_type == "OS::Heat::Stack":  # members only
            continue
        if e.status == "IN_PROGRESS":
            busy.add(e.resource_name)
            most = max(most, len(busy))
        else:
            busy.discard(e.resource_name)
    return most


def child_events(rt: Runtime, stack: StackView) -> list[Any]:
    with rt.store.read() as tx:
        (child,) = tx.child_stacks(stack.id)
    return story_events(rt, child.id)


def test_a_rolling_update_changes_a_batch_at_a_time(story: Story) -> None:
    rt = story.rt
    policy = {"rolling_update": {"max_batch_size": 2}}
    story.create(rolling(5, "v1-%index%", policy))
    story.finish()
    story.update(rolling(5, "v2-%index%", policy))
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert outputs(done)["outs"] == [f"v2-{i}" for i in range(5)]
    events = child_events(rt, done)
    updates = [e for e in events if e.action == "UPDATE" and e.status == "COMPLETE"
               and e.resource_name.isdigit()]
    assert sorted(e.resource_name for e in updates) == ["0", "1", "2", "3", "4"]
    assert most_at_once(events, "UPDATE") == 2  # two by two, in three stages
    assert most_at_once(events, "CREATE") == 5  # made all at once: no batch_create


def test_min_in_service_and_pause_time_bound_each_batch(story: Story) -> None:
    rt = story.rt
    policy = {"rolling_update": {"max_batch_size": 3, "min_in_service": 4,
                                 "pause_time": 30}}
    story.create(rolling(5, "v1-%index%", policy))
    story.finish()
    story.update(rolling(5, "v2-%index%", policy))
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    events = [e for e in child_events(rt, done) if e.action == "UPDATE"
              and e.resource_name.isdigit()]
    assert most_at_once(events, "UPDATE") == 1  # five members, four kept in service
    # Each batch starts at least pause_time after the one before it ended.
    ordered = sorted(events, key=lambda e: e.id)
    for ended, began in zip(ordered[1::2], ordered[2::2], strict=False):
        assert (ended.status, began.status) == ("COMPLETE", "IN_PROGRESS")
        assert began.created_at - ended.created_at >= 30


def test_batch_create_makes_members_a_batch_at_a_time(story: Story) -> None:
    rt = story.rt
    story.create(rolling(5, "v1-%index%", {"batch_create": {"max_batch_size": 2}}))
    done = story.finish()
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason
    assert outputs(done)["outs"] == [f"v1-{i}" for i in range(5)]
    assert most_at_once(child_events(rt, done), "CREATE") == 2


def test_a_shrinking_group_removes_its_failed_members_first(story: Story) -> None:
    rt = story.rt
    node = json.dumps({
        "heat_template_version": "2018-08-31",
        "parameters": {"index": {"type": "string"}},
        "conditions": {"bad": {"equals": [{"get_param": "index"}, "2"]}},
        "resources": {"r": {"type": "OS::Heat::TestResource", "properties": {
            "value": {"list_join": ["", ["m", {"get_param": "index"}]]},
            "fail": {"if": ["bad", True, False]}}}},  # member 2 fails, the others do not
        "outputs": {"output": {"value": {"get_attr": ["r", "output"]}}}})
    doc = json.loads(group(5))
    doc["resources"]["g"]["properties"]["resource_def"] = {
        "type": "node.yaml", "properties": {"index": "%index%"}}
    story.create(json.dumps(doc), files={"node.yaml": node}, disable_rollback=True)
    failed = story.finish()
    assert failed.stack_status == "CREATE_FAILED", failed.status_reason
    assert "nested stack" in failed.status_reason
    doc["resources"]["g"]["properties"]["count"] = 3
    story.update(json.dumps(doc), files={"node.yaml": node})
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    # The failed member went first, then the last one: 0, 1 and 3 stay.
    assert sorted(members(rt, done)) == ["0", "1", "3"]
    assert outputs(done)["removed"] == ["2"]
    assert live_values(rt, done.id) == ["m0", "m1", "m3"]


def unread(count: int, *, removal: list[str] | None = None, reads: str | None = None) -> str:
    """A group whose template reads none of its references (``reads``: one attribute)."""
    props: dict[str, Any] = {"count": count, "resource_def": {
        "type": "OS::Heat::TestResource", "properties": {"value": "m%index%"}}}
    if removal is not None:
        props["removal_policies"] = [{"resource_list": removal}]
    body: dict[str, Any] = {
        "heat_template_version": "2018-08-31",
        "resources": {"g": {"type": "OS::Heat::ResourceGroup", "properties": props}}}
    if reads is not None:
        body["outputs"] = {"read": {"value": {"get_attr": ["g", reads]}}}
    return json.dumps(body)


def nested_outputs(rt: Runtime, stack: StackView) -> tuple[list[str], dict[str, Any]]:
    """The group's nested template's output names, and the group's attributes."""
    with rt.store.read() as tx:
        (child,) = tx.child_stacks(stack.id)
        assert child.template_id is not None
        text = tx.template(child.template_id).text
        (record,) = [r for r in tx.records(stack.id) if r.name == "g"]
    return sorted(json.loads(text).get("outputs") or {}), dict(record.attributes)


def test_a_group_whose_references_nobody_reads_does_not_carry_them(story: Story) -> None:
    rt = story.rt
    story.create(unread(4))
    first = story.finish()
    assert first.stack_status == "CREATE_COMPLETE", first.status_reason
    names, attributes = nested_outputs(rt, first)
    assert names == ["removed_rsrc_list"]
    assert "refs" not in attributes and "refs_map" not in attributes
    assert attributes["removed_rsrc_list"] == []
    before = members(rt, first)
    assert sorted(before) == ["0", "1", "2", "3"]
    # Removing by reference reads the members' references from the nested stack's records.
    story.update(unread(4, removal=[before["2"]]))
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    after = members(rt, done)
    assert sorted(after) == ["0", "1", "3", "4"]
    assert (after["0"], after["1"], after["3"]) == (before["0"], before["1"], before["3"])
    assert live_values(rt, done.id) == ["m0", "m1", "m3", "m4"]
    # Once the template reads them, they are offered, and right.
    story.update(unread(4, removal=[before["2"]], reads="refs"))
    read = story.finish()
    assert read.stack_status == "UPDATE_COMPLETE", read.status_reason
    names, attributes = nested_outputs(rt, read)
    assert names == ["refs", "refs_map", "removed_rsrc_list"]
    assert outputs(read)["read"] == [after["0"], after["1"], after["3"], after["4"]]
    assert attributes["refs_map"] == after
