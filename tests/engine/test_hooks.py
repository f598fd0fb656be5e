"""Hooks on the embedded tier, under every adversity: a resource pauses before the action its
environment hooks (``pre-create``, ``pre-update``, ``pre-delete``, wildcards and nested
templates too), holding nothing, says so in its status and the events, and goes on once the
hook is cleared; a hook pending when its traversal is superseded waits on the new one's node
if that node still does the action.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from convergence.errors import NotSupported
from convergence.ports.views import RecordView
from convergence.runtime import Runtime
from convergence.services import hooks

from .harness import TENANT, Story, res, template


def env(hooked: dict[str, Any]) -> dict[str, Any]:
    return {"resource_registry": {"resources": hooked}}


def record(story: Story, name: str) -> RecordView:
    return story.current()[name]


def run_until(rt: Runtime, condition: Any) -> None:
    assert rt.inprocess is not None
    assert rt.inprocess.run(until=condition)


def paused(story: Story, name: str) -> bool:
    current = story.current()
    return name in current and "paused until Hook" in current[name].status_reason


def test_a_pre_create_hook_pauses_the_resource_until_cleared(story: Story) -> None:
    rt = story.rt
    text = template({"A": res("a"), "B": res("b", depends_on=["A"])})
    story.create(text, environments=[env({"A": {"hooks": "pre-create"}})])
    run_until(rt, lambda: paused(story, "A"))
    a = record(story, "A")
    assert a.status_reason == "CREATE paused until Hook pre-create is cleared"
    assert a.physical_id is None and a.lease_owner is None
    assert story.entities() == {}  # nothing made, B waits for A
    assert story.stack().status == "IN_PROGRESS"
    said = [e for e in story.events() if e.resource_name == "A"]
    assert [(e.action, e.status, e.reason) for e in said] == [
        ("INIT", "COMPLETE", "CREATE paused until Hook pre-create is cleared")]
    hooks.clear_hook(rt, TENANT, story.stack().id, "A", "pre-create")
    done = story.finish()
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason
    assert sorted(story.entities().values()) == ["a", "b"]
    assert record(story, "A").status_reason == "state changed" or \
        "paused" not in record(story, "A").status_reason
    assert any(e.reason == "Hook pre-create is cleared" for e in story.events())


def test_wildcard_pre_update_hooks_release_each_resource_alone(story: Story) -> None:
    rt = story.rt
    hooked = [env({"web*": {"hooks": ["pre-update"]}})]
    story.create(template({"web1": res("1"), "web2": res("2"), "db": res("d")}),
                 environments=hooked)
    story.finish()
    story.update(template({"web1": res("1b"), "web2": res("2b"), "db": res("db")}),
                 environments=hooked)
    run_until(rt, lambda: paused(story, "web1") and paused(story, "web2"))
    run_until(rt, lambda: record(story, "db").generation == 2)  # not hooked: goes on
    hooks.clear_hook(rt, TENANT, story.stack().id, "web2", "pre-update")
    run_until(rt, lambda: record(story, "web2").attributes.get("output") == "2b")
    assert paused(story, "web1")
    hooks.clear_hook(rt, TENANT, story.stack().id, "web1", "pre-update")
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert sorted(story.entities().values()) == ["1b", "2b", "db"]


def test_a_resource_an_update_creates_pauses_at_pre_create(story: Story) -> None:
    rt = story.rt
    hooked = [env({"new": {"hooks": "pre-create"}})]
    story.create(template({"old": res("o")}), environments=hooked)
    story.finish()
    story.update(template({"old": res("o"), "new": res("n")}), environments=hooked)
    run_until(rt, lambda: paused(story, "new"))
    hooks.clear_hook(rt, TENANT, story.stack().id, "new", "pre-create")
    assert story.finish().stack_status == "UPDATE_COMPLETE"


def test_a_pre_delete_hook_holds_the_stack_delete(story: Story) -> None:
    rt = story.rt
    story.create(template({"A": res("a"), "B": res("b")}),
                 environments=[env({"A": {"hooks": "pre-delete"}})])
    story.finish()
    story.delete()
    run_until(rt, lambda: paused(story, "A"))
    assert sorted(story.entities().values()) == ["a"]  # B went, A waits
    hooks.clear_hook(rt, TENANT, story.stack().id, "A", "pre-delete")
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert story.entities() == {}


def test_a_hook_that_is_not_pending_cannot_be_cleared(story: Story) -> None:
    story.create(template({"A": res("a")}))
    story.finish()
    with pytest.raises(NotSupported, match="not pending"):
        hooks.clear_hook(story.rt, TENANT, story.stack().id, "A", "pre-create")
    with pytest.raises(NotSupported, match="not a valid hook"):
        hooks.clear_hook(story.rt, TENANT, story.stack().id, "A", "post-nothing")


def test_a_pending_hook_waits_on_the_new_traversal_if_it_still_acts(story: Story) -> None:
    rt = story.rt
    hooked = [env({"A": {"hooks": "pre-update"}})]
    story.create(template({"A": res("a")}), environments=hooked)
    story.finish()
    story.update(template({"A": res("a2")}), environments=hooked)
    run_until(rt, lambda: paused(story, "A"))
    story.update(template({"A": res("a3")}), environments=hooked)  # still an update of A
    run_until(rt, lambda: paused(story, "A") and story.stack().generation == 3
              and story.stack().status == "IN_PROGRESS")
    assert paused(story, "A")
    hooks.clear_hook(rt, TENANT, story.stack().id, "A", "pre-update")
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE" and done.generation == 3
    assert list(story.entities().values()) == ["a3"]
    # Back to what A is: the node no longer updates it, and the hook is dropped.
    story.update(template({"A": res("a4")}), environments=hooked)
    run_until(rt, lambda: paused(story, "A"))
    story.update(template({"A": res("a3")}), environments=hooked)
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert list(story.entities().values()) == ["a3"]
    assert not paused(story, "A")


def test_hooks_reach_into_nested_templates(story: Story) -> None:
    rt = story.rt
    child = json.dumps({"heat_template_version": "2018-08-31",
                        "resources": {"inner": res("i")}})
    story.create(template({"node": {"type": "child.yaml"}}), files={"child.yaml": child},
                 environments=[env({"node": {"inner": {"hooks": "pre-create"}}})])
    stack_id = story.stack().id

    def inner_paused() -> bool:
        with rt.store.read() as tx:
            kids = tx.child_stacks(stack_id)
            return bool(kids) and any("paused until Hook" in r.status_reason
                                      for r in tx.records(kids[0].id))

    run_until(rt, inner_paused)
    with rt.store.read() as tx:
        (kid,) = tx.child_stacks(stack_id)
    hooks.clear_hook(rt, TENANT, kid.id, "inner", "pre-create")
    assert story.finish().stack_status == "CREATE_COMPLETE"


def test_a_post_create_hook_holds_what_is_built_on_the_resource(story: Story) -> None:
    rt = story.rt
    story.create(template({"A": res("a"), "B": res("b", depends_on=["A"])}),
                 environments=[env({"A": {"hooks": ["post-create"]}})])
    run_until(rt, lambda: paused(story, "A"))
    a = record(story, "A")
    assert a.status_reason == "CREATE paused until Hook post-create is cleared"
    assert a.physical_id is not None and a.attributes.get("output") == "a"  # made already
    assert sorted(story.entities().values()) == ["a"]  # B waits for the hook
    hooks.clear_hook(rt, TENANT, story.stack().id, "A", "post-create")
    done = story.finish()
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason
    assert sorted(story.entities().values()) == ["a", "b"]
    assert (record(story, "A").action, record(story, "A").status) == ("CREATE", "COMPLETE")
    assert story.created_total() == 2  # A was made once


def test_a_post_delete_hook_holds_the_stack_delete_after_the_resource_is_gone(
        story: Story) -> None:
    rt = story.rt
    story.create(template({"A": res("a"), "B": res("b", depends_on=["A"])}),
                 environments=[env({"B": {"hooks": "post-delete"}})])
    story.finish()
    story.delete()
    run_until(rt, lambda: paused(story, "B"))
    assert sorted(story.entities().values()) == ["a"]  # B is gone, A waits for the hook
    assert record(story, "B").status_reason == "DELETE paused until Hook post-delete is cleared"
    hooks.clear_hook(rt, TENANT, story.stack().id, "B", "post-delete")
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert story.entities() == {}
