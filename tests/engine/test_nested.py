"""Nested stacks on the embedded tier, under every adversity: template resources and
``OS::Heat::Stack`` make real child stacks that run beside the rest, tell their parent when
they end (the parent's node parks meanwhile, holding nothing), and follow their parent's
updates, failures, cancels and deletes.

Everything is read from what is real: the stacks' rows (parent, depth, status, outputs), the
test entities the children's resources made, the nodes and records of the parent's
traversal, and the events.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy

from convergence.errors import Conflict
from convergence.ports.views import PARKED, StackView
from convergence.runtime import Runtime
from convergence.services import stacks
from convergence.template import TemplateError

from .harness import TENANT, Story, entity_backend


def child(extra: dict[str, Any] | None = None, *, wait: float = 0.0,
          fail: bool = False) -> str:
    """A nested template: parameter ``v`` feeds ``a``, whose output feeds ``b``; output
    ``out`` is ``b``'s."""
    resources: dict[str, Any] = {
        "a": {"type": "OS::Heat::TestResource",
              "properties": {"value": {"get_param": "v"}, "wait_secs": wait, "fail": fail}},
        "b": {"type": "OS::Heat::TestResource",
              "properties": {"value": {"get_attr": ["a", "output"]}}},
    }
    resources.update(extra or {})
    return json.dumps({"heat_template_version": "2018-08-31",
                       "parameters": {"v": {"type": "string"}},
                       "resources": resources,
                       "outputs": {"out": {"value": {"get_attr": ["b", "output"]}}}})


def parent(v: str = "one", *, stack_param: str = "x") -> str:
    """Two template resources chained by an output, and an OS::Heat::Stack."""
    return json.dumps({
        "heat_template_version": "2018-08-31",
        "parameters": {"v": {"type": "string", "default": v}},
        "resources": {
            "n1": {"type": "child.yaml", "properties": {"v": {"get_param": "v"}}},
            "n2": {"type": "child.yaml", "properties": {"v": {"get_attr": ["n1", "out"]}}},
            "s": {"type": "OS::Heat::Stack",
                  "properties": {"template": {"get_file": "child.yaml"},
                                 "parameters": {"v": stack_param}}},
        },
        "outputs": {"o": {"value": {"get_attr": ["n2", "out"]}},
                    "so": {"value": {"get_attr": ["s", "outputs", "out"]}},
                    "id": {"value": {"get_resource": "n1"}}},
    })


def children(rt: Runtime, stack_id: str) -> dict[str, StackView]:
    with rt.store.read() as tx:
        return {c.parent_resource or "": c for c in tx.child_stacks(stack_id)}


def every_stack(rt: Runtime, root_id: str | None = None) -> list[StackView]:
    """The tenant's stacks (``root_id``: those of that stack's tree), deleted ones too."""
    with rt.store.read() as tx:
        found = tx.stacks(TENANT, include_deleted=True)
    return [s for s in found if root_id is None or root_id in (s.id, s.root_id)]


def live(rt: Runtime, root_id: str) -> dict[str, tuple[str, str]]:
    """The live test entities the stacks of a tree made: id -> (owner, value)."""
    tree = {s.id for s in every_stack(rt, root_id)}
    return {eid: (owner, value) for eid, (owner, value) in entity_backend(rt).live().items()
            if owner.split("/")[0] in tree}


def live_values(rt: Runtime, root_id: str) -> list[str]:
    return sorted(value for _, value in live(rt, root_id).values())


def test_template_resources_and_stacks_are_child_stacks(story: Story) -> None:
    rt = story.rt
    story.create(parent(), files={"child.yaml": child()})
    done = story.finish()
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason
    assert {k: v["value"] for k, v in done.outputs.items()} == {
        "o": "one", "so": "x", "id": children(rt, done.id)["n1"].id}
    kids = children(rt, done.id)
    assert sorted(kids) == ["n1", "n2", "s"]
    current = story.current()
    for name, kid in kids.items():
        assert kid.stack_status == "CREATE_COMPLETE"
        assert (kid.parent_id, kid.nested_depth, kid.root_id) == (done.id, 1, done.id)
        assert kid.parent_record_id == current[name].id
        # The resource names its child, and holds the child's outputs as attributes.
        assert current[name].physical_id == kid.id
        assert current[name].attributes["OS::stack_id"] == kid.id
        outputs = current[name].attributes["outputs"] if name == "s" \
            else current[name].attributes
        assert outputs["out"] == kid.outputs["out"]["value"]
    # Six test entities, two per child, each owned by a record of its child stack.
    owners = sorted(owner.split("/")[0] for owner, _ in live(rt, done.id).values())
    assert owners == sorted([k.id for k in kids.values()] * 2)
    assert live_values(rt, done.id) == ["one", "one", "one", "one", "x", "x"]


def test_an_update_reaches_only_the_children_whose_inputs_changed(story: Story) -> None:
    rt = story.rt
    story.create(parent(), files={"child.yaml": child()})
    first = story.finish()
    before = children(rt, first.id)
    story.update(parent(), files={"child.yaml": child()}, parameters={"v": "two"})
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert done.outputs["o"]["value"] == "two"
    after = children(rt, done.id)
    # The same child stacks, updated in place; the OS::Heat::Stack's input did not change.
    assert {k: v.id for k, v in after.items()} == {k: v.id for k, v in before.items()}
    assert after["n1"].generation == before["n1"].generation + 1
    assert after["n2"].generation == before["n2"].generation + 1
    assert after["s"].generation == before["s"].generation
    assert live_values(rt, done.id) == ["two", "two", "two", "two", "x", "x"]


def test_a_new_nested_template_updates_its_children(story: Story) -> None:
    rt = story.rt
    story.create(parent(), files={"child.yaml": child()})
    story.finish()
    extra = {"c": {"type": "OS::Heat::TestResource", "properties": {"value": "new"}}}
    story.update(parent(), files={"child.yaml": child(extra)})
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert live_values(rt, done.id).count("new") == 3  # one more resource in each child


def test_a_stack_delete_deletes_its_children_first(story: Story) -> None:
    rt = story.rt
    story.create(parent(), files={"child.yaml": child()})
    story.finish()
    story.delete()
    done = story.finish()
    assert done.stack_status == "DELETE_COMPLETE", done.status_reason
    assert live(rt, done.id) == {}
    tree = every_stack(rt, done.id)
    assert len(tree) == 4
    assert all(s.deleted_at is not None and s.stack_status == "DELETE_COMPLETE" for s in tree)
    # The ledger: each nested stack's end is an event of its parent's resource too.
    deletes = [e for e in story.events() if e.action == "DELETE" and e.status == "COMPLETE"
               and e.resource_name in ("n1", "n2", "s")]
    assert sorted(e.resource_name for e in deletes) == ["n1", "n2", "s"]


def test_a_child_that_fails_fails_its_parent_which_rolls_back(story: Story) -> None:
    rt = story.rt
    story.create(parent(), files={"child.yaml": child(fail=True)})
    done = story.finish()
    assert done.stack_status == "ROLLBACK_COMPLETE", done.status_reason
    failed = [e for e in story.events() if e.status == "FAILED" and e.resource_name != done.name]
    assert failed and "nested stack" in failed[0].reason
    assert "CREATE_FAILED" in failed[0].reason
    assert live(rt, done.id) == {}
    assert all(s.deleted_at is not None for s in every_stack(rt, done.id) if s.parent_id)


def test_a_parked_node_holds_no_worker_lease_or_timer(story: Story) -> None:
    rt = story.rt
    assert rt.inprocess is not None
    story.create(parent(), files={"child.yaml": child(wait=30.0)})
    stack_id = story.stack().id

    def parked() -> list[int]:
        with rt.store.read() as tx:
            top = tx.stack(stack_id)
            assert top is not None and top.traversal_id is not None
            return [n.seq for n in tx.nodes(top.traversal_id, range(20)) if n.state == PARKED]

    assert rt.inprocess.run(until=lambda: len(parked()) == 2)  # n1 and s wait; n2 waits on n1
    top = story.stack()
    with rt.store.read() as tx:
        records = {r.name: r for r in tx.records(stack_id)}
        for name in ("n1", "s"):
            assert records[name].lease_owner is None
            assert records[name].operation is not None
            assert records[name].status == "IN_PROGRESS"
    with rt.store.engine.connect() as conn:  # no poll watch either (a lease nobody holds)
        watches = conn.execute(sqlalchemy.text(
            "SELECT lease_expires FROM resources WHERE stack_id = :s"), {"s": stack_id}).all()
    assert [w for (w,) in watches if w is not None] == []
    # No poll of the parent's traversal is queued: only the children's work goes on (a
    # duplicated delivery of a message that already ran may wait in the queue too).
    assert not any(w.traversal_id == top.traversal_id and w.expects is not None
                   for w in rt.inprocess.queued())
    done = story.finish()
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason


def test_nested_stacks_cannot_be_changed_on_their_own(story: Story) -> None:
    rt = story.rt
    story.create(parent(), files={"child.yaml": child()})
    done = story.finish()
    kid = children(rt, done.id)["n1"]
    for act in (lambda: stacks.delete_stack(rt, TENANT, kid.id),
                lambda: stacks.update_stack(rt, TENANT, kid.id, child()),
                lambda: stacks.check_stack(rt, TENANT, kid.id)):
        with pytest.raises(Conflict, match="is a nested stack"):
            act()


def test_too_deep_a_tree_is_refused_naming_where(rt: Runtime) -> None:
    files = {f"l{i}.yaml": json.dumps({
        "heat_template_version": "2018-08-31",
        "resources": {"r": {"type": f"l{i + 1}.yaml"}}}) for i in range(6)}
    files["l6.yaml"] = json.dumps({"heat_template_version": "2018-08-31",
                                   "resources": {"r": {"type": "OS::Heat::None"}}})
    top = json.dumps({"heat_template_version": "2018-08-31",
                      "resources": {"r": {"type": "l0.yaml"}}})
    with pytest.raises(TemplateError, match="deeper than 5 levels"):
        stacks.create_stack(rt, TENANT, "deep", top, files=files)
    assert [s for s in every_stack(rt) if s.name == "deep"] == []


@pytest.mark.parametrize("parked_again", [False, True])
def test_a_lost_wake_up_is_found_by_the_sweeper(tmp_path: Any, parked_again: bool) -> None:
    """The message that wakes a parent's node is lost (a broker restart) right after its
    child ended; or the node is found parked though its child ended (the wake went to a
    traversal that was being replaced): the sweeper wakes it, and the stack completes."""
    from convergence.ports.clock import ManualClock
    from convergence.runtime import open_runtime
    from convergence.services import running
    from convergence.settings import Settings

    settings = Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}", batch_size=50,
                        lease_seconds=30.0, sweep_seconds=5.0)
    rt = open_runtime(settings, clock=ManualClock())
    assert rt.inprocess is not None
    top = stacks.create_stack(rt, TENANT, "top", json.dumps({
        "heat_template_version": "2018-08-31",
        "resources": {"n": {"type": "child.yaml", "properties": {"v": "one"}}},
        "outputs": {"o": {"value": {"get_attr": ["n", "out"]}}}}),
        files={"child.yaml": child(wait=10.0)})

    def child_done() -> bool:
        kids = children(rt, top.id)
        return bool(kids) and kids["n"].status == "COMPLETE"

    assert rt.inprocess.run(until=child_done)
    assert rt.inprocess.drop_pending() >= 1  # the wake-up was queued: it is lost
    if parked_again:
        with rt.store.engine.begin() as conn:
            conn.execute(sqlalchemy.text(
                "UPDATE nodes SET state = 'PARKED' WHERE traversal_id = :t AND phase = "
                "'converge'"), {"t": story_traversal(rt, top.id)})
    done = running.wait_for_stack(rt, TENANT, top.id)
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason
    assert done.outputs["o"]["value"] == "one"
    rt.store.engine.dispose()


def story_traversal(rt: Runtime, stack_id: str) -> str:
    with rt.store.read() as tx:
        stack = tx.stack(stack_id)
    assert stack is not None and stack.traversal_id is not None
    return stack.traversal_id


def test_a_cancel_without_rollback_stops_the_children_too(story: Story) -> None:
    rt = story.rt
    assert rt.inprocess is not None
    story.create(parent(), files={"child.yaml": child(wait=60.0)})
    stack_id = story.stack().id

    def children_working() -> bool:
        kids = children(rt, stack_id)
        return len(kids) == 2 and all(k.status == "IN_PROGRESS" for k in kids.values())

    assert rt.inprocess.run(until=children_working)
    stacks.cancel_stack(rt, TENANT, stack_id, rollback=False)
    done = story.finish()
    assert done.stack_status == "CREATE_FAILED", done.status_reason
    kids = children(rt, stack_id)
    assert {k.stack_status for k in kids.values()} == {"CREATE_FAILED"}
    assert all("cancelled" in k.status_reason for k in kids.values())
    # Nothing shows in progress anywhere in the tree: what was under way was abandoned.
    with rt.store.read() as tx:
        tree = every_stack(rt, stack_id)
        assert len(tree) == 3
        for s in tree:
            assert s.status != "IN_PROGRESS"
            assert [r.name for r in tx.records(s.id) if r.status == "IN_PROGRESS"] == []


def _limited(tmp_path: Any, **limits: int) -> Runtime:
    from convergence.ports.clock import ManualClock
    from convergence.runtime import open_runtime
    from convergence.settings import Settings

    return open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}", **limits),
                        clock=ManualClock())


def _stack_of_stacks(depth: int) -> str:
    """OS::Heat::Stack resources ``depth`` deep (templates as properties: known only when
    the engine makes each level)."""
    inner: dict[str, Any] = {"heat_template_version": "2018-08-31",
                             "resources": {"leaf": {"type": "OS::Heat::None"}}}
    for _ in range(depth):
        inner = {"heat_template_version": "2018-08-31", "resources": {"level": {
            "type": "OS::Heat::Stack", "properties": {"template": json.dumps(inner)}}}}
    return json.dumps(inner)


def test_a_tree_deeper_than_allowed_fails_where_it_goes_too_deep(tmp_path: Any) -> None:
    from convergence.services import running

    rt = _limited(tmp_path, max_nested_depth=2)
    ok = stacks.create_stack(rt, TENANT, "two", _stack_of_stacks(2))
    assert running.wait_for_stack(rt, TENANT, ok.id).stack_status == "CREATE_COMPLETE"
    deep = stacks.create_stack(rt, TENANT, "three", _stack_of_stacks(3))
    done = running.wait_for_stack(rt, TENANT, deep.id)
    assert done.stack_status == "ROLLBACK_COMPLETE", done.status_reason
    assert _failures_say(rt, done, "nested stacks go deeper than 2 levels (max_nested_depth)")
    rt.store.engine.dispose()


def _failures_say(rt: Runtime, stack: StackView, message: str) -> bool:
    """Whether the stack's FAILED events (its own and its resources') carry ``message``: the
    failure of a nested stack reaches its parent's resource with its reason."""
    with rt.store.read() as tx:
        return any(message in e.reason for e in tx.events(stack.id) if e.status == "FAILED")


def test_a_tree_holding_more_resources_than_allowed_fails_saying_so(tmp_path: Any) -> None:
    from convergence.services import running

    rt = _limited(tmp_path, max_tree_resources=5)
    group = json.dumps({"heat_template_version": "2018-08-31", "resources": {"g": {
        "type": "OS::Heat::ResourceGroup",
        "properties": {"count": 3, "resource_def": {"type": "OS::Heat::None"}}}}})
    ok = stacks.create_stack(rt, TENANT, "small", group)
    assert running.wait_for_stack(rt, TENANT, ok.id).stack_status == "CREATE_COMPLETE"
    big = stacks.create_stack(rt, TENANT, "big", group.replace('"count": 3', '"count": 9'))
    done = running.wait_for_stack(rt, TENANT, big.id)
    assert done.stack_status == "ROLLBACK_COMPLETE", done.status_reason
    assert _failures_say(rt, done, "would hold 10 resources, more than 5 (max_tree_resources)")
    rt.store.engine.dispose()


def test_a_group_template_the_engine_writes_is_not_held_to_the_upload_limit(
        tmp_path: Any) -> None:
    """The template size limit is for what a user sends: a group of many members writes its
    nested template far bigger than the user's, and that is bounded by the resource count
    (``max_tree_resources``), not refused. A nested template the user gave is still weighed."""
    from convergence.services import running

    rt = _limited(tmp_path, max_template_bytes=4096)
    group = json.dumps({"heat_template_version": "2018-08-31", "resources": {"g": {
        "type": "OS::Heat::ResourceGroup",
        "properties": {"count": 200, "resource_def": {"type": "OS::Heat::None"}}}}})
    made = running.wait_for_stack(rt, TENANT, stacks.create_stack(rt, TENANT, "g", group).id)
    assert made.stack_status == "CREATE_COMPLETE", made.status_reason
    with rt.store.read() as tx:
        child = tx.child_stack(tx.heads(made.id, ["g"])["g"].id)
        assert child is not None
        assert len(tx.template(child.template_id).text) > 4096
        assert len(tx.record_outlines(child.id)) == 200
    # A text the user sent as a parameter (weighed against the request's total only) becomes
    # a nested template over the limit: refused there, naming the size.
    user_given = json.dumps({"heat_template_version": "2018-08-31", "resources": {
        f"r{i}": {"type": "OS::Heat::None"} for i in range(200)}})
    assert len(user_given) > 4096
    nested = json.dumps({"heat_template_version": "2018-08-31",
                         "parameters": {"inner": {"type": "string"}},
                         "resources": {"s": {"type": "OS::Heat::Stack",
                                             "properties": {"template": {"get_param": "inner"}}}}})
    done = running.wait_for_stack(rt, TENANT, stacks.create_stack(
        rt, TENANT, "s", nested, parameters={"inner": user_given}).id)
    assert done.stack_status == "ROLLBACK_COMPLETE", done.status_reason
    assert _failures_say(rt, done, "over the limit of 4096 bytes")
    rt.store.engine.dispose()


def test_overlapping_updates_reach_the_children_with_the_latest_values(story: Story) -> None:
    rt = story.rt
    assert rt.inprocess is not None
    story.create(parent(), files={"child.yaml": child(wait=20.0)})
    first = story.finish()
    before = {k: v.id for k, v in children(rt, first.id).items()}
    story.update(parent(), files={"child.yaml": child(wait=20.0)}, parameters={"v": "two"})

    def updating() -> bool:
        kids = children(rt, first.id)
        return kids["n1"].action == "UPDATE" and kids["n1"].status == "IN_PROGRESS"

    assert rt.inprocess.run(until=updating)
    story.update(parent(), files={"child.yaml": child(wait=20.0)}, parameters={"v": "three"})
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert done.outputs["o"]["value"] == "three"
    after = children(rt, done.id)
    assert {k: v.id for k, v in after.items()} == before  # the same children, updated
    assert all(k.stack_status == "UPDATE_COMPLETE" or name == "s"
               for name, k in after.items())
    assert live_values(rt, done.id) == ["three"] * 4 + ["x", "x"]
    # Nothing was made twice: two entities per child, ever.
    made = entity_backend(rt).created_count_prefix
    assert sum(made(k.id + "/") for k in after.values()) == 6
