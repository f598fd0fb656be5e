"""Deletion policies, told as stories against real rows, test entities and events.

A ``Retain`` resource is let go of and kept in the cloud by every path that removes it from
its stack, as Heat's delete honours the policy whatever removes the resource: a stack delete,
an update that drops it, its replacement (the old version's own policy), a rollback, and a
removal while its create is still under way; and when the template it was converged to no
longer validates. ``Snapshot`` is refused up front for types that cannot take snapshots, which
every type here is: accepted, it would delete without one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from convergence.engine.sweeper import let_go
from convergence.plugins.base import PluginBase, PluginContext, Progress
from convergence.plugins.registry import PluginRegistry
from convergence.ports.clock import ManualClock
from convergence.ports.views import StackView, TemplateContent
from convergence.runtime import Runtime, open_runtime
from convergence.services import preview, queries, running, templates
from convergence.settings import Settings
from convergence.template import TemplateError
from convergence.template.properties import TypeSchema

from .harness import TENANT, Story, entity_backend, res, template

RETAINED = "retained: deletion_policy is Retain"


def kept(value: str, **props: Any) -> dict[str, Any]:
    return dict(res(value, **props), deletion_policy="Retain")


def retained_events(story: Story, name: str) -> list[str | None]:
    """Physical ids of ``name`` that a DELETE_COMPLETE event says were retained."""
    return [e.physical_resource_id for e in story.events() if e.resource_name == name
            and (e.action, e.status, e.reason) == ("DELETE", "COMPLETE", RETAINED)]


def test_an_update_that_drops_a_retained_resource_leaves_it_in_the_cloud(story: Story) -> None:
    story.create(template({"k": kept("kept"), "g": res("gone")}))
    story.finish()
    k = story.current()["k"].physical_id
    story.update(template({"g": res("gone")}))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert sorted(story.current()) == ["g"]
    assert story.entities()[str(k)] == "kept"
    assert retained_events(story, "k") == [k]


def test_a_replaced_retained_resource_keeps_its_old_version(story: Story) -> None:
    # As Heat: the old version is deleted under its own definition, which says Retain.
    story.create(template({"k": kept("v1", update_replace=True)}))
    story.finish()
    old = story.current()["k"].physical_id
    story.update(template({"k": kept("v2", update_replace=True)}))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    new = story.current()["k"].physical_id
    assert new != old and story.entities() == {old: "v1", new: "v2"}
    assert retained_events(story, "k") == [old]
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert story.records() == {} and story.entities() == {old: "v1", new: "v2"}


def test_a_stack_deleted_while_a_retained_resource_is_created_keeps_what_it_made(
        story: Story, rt: Runtime) -> None:
    story.create(template({"k": kept("kept", action_wait_secs={"create": 30}),
                           "a": res("a")}))
    assert rt.inprocess is not None
    rt.inprocess.run(until=lambda: len(story.entities()) >= 2)
    made = story.current()["k"]
    assert (made.action, made.status) == ("CREATE", "IN_PROGRESS")
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert story.records() == {}
    assert story.entities() == {made.physical_id: "kept"}
    assert retained_events(story, "k") == [made.physical_id]


def test_a_retained_resource_whose_create_died_before_its_result_is_kept(
        story: Story, rt: Runtime) -> None:
    """The worker creating it died between the cloud's answer and the database write: the
    record never had a result, yet it carries its policy from the plan, and the stack's
    delete finds what the create made by the record's key and keeps it."""
    story.create(template({"k": kept("kept")}))
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()
    rt.engine.plan(str(story.stack().traversal_id))
    rt.inprocess.drop_pending()  # the batch's message dies with its worker
    record = story.current()["k"]
    assert (record.action, record.physical_id) == ("INIT", None)
    with rt.store.begin() as tx:  # the worker that died had claimed it
        assert tx.claim_records([record.id], "gone:1.a:1/x", tx.now + 30)
    made = entity_backend(rt).create(f"{record.stack_id}/{record.id}", "kept")
    let_go(rt.engine, "gone:1.a:1/")  # its node saw it die
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert story.records() == {} and story.entities() == {made: "kept"}


def test_a_rollback_keeps_what_a_retained_resource_made_before_the_update_failed(
        story: Story, rt: Runtime) -> None:
    story.create(template({"a": res("a")}))
    story.finish()
    # The update adds k (Retain, slow to create) and f, which fails at once: the rollback
    # to the first template removes k while its create is still under way.
    story.update(template({"a": res("a"), "f": res("f", fail=True),
                           "k": kept("kept", action_wait_secs={"create": 30})}))
    stack = story.finish()
    assert stack.stack_status == "ROLLBACK_COMPLETE", stack.status_reason
    assert sorted(story.current()) == ["a"]
    [k] = retained_events(story, "k")
    assert k is not None and story.entities()[k] == "kept"
    assert sorted(story.entities().values()) == ["a", "kept"]


def test_a_resource_added_after_a_retained_one_left_does_not_take_over_what_it_kept(
        story: Story) -> None:
    # Plugins find what a record made by a key holding the record's id: were the id of the
    # record let go of given again (SQLite did, to a row made after the newest one was
    # deleted), the new resource would adopt the retained one and delete it with itself.
    story.create(template({"a": res("a")}))
    story.finish()
    story.update(template({"a": res("a"), "k": kept("kept")}))
    story.finish()
    k = story.current()["k"]
    story.update(template({"a": res("a")}))
    story.finish()
    story.update(template({"a": res("a"), "n": res("new")}))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    n = story.current()["n"]
    assert n.id > k.id and n.physical_id != k.physical_id
    assert story.entities()[str(k.physical_id)] == "kept"
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert story.entities() == {k.physical_id: "kept"}


# A plugin upgrade that makes a stored template invalid -------------------------------------

class Sized(PluginBase):
    """A type whose first release offers a ``size`` attribute, and whose second does not."""

    schema: ClassVar[TypeSchema] = TypeSchema("Test::Sized", properties={},
                                              attributes=frozenset({"size"}))

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        return Progress.finished(f"sized-{ctx.owner}", {"size": 3})


class SizedWithoutSize(Sized):
    schema: ClassVar[TypeSchema] = TypeSchema("Test::Sized", properties={})


def _runtime(path: Path, sized: type[Sized]) -> Runtime:
    shipped = PluginRegistry.from_entry_points()
    plugins: dict[str, Any] = {name: shipped.plugin(name) for name in shipped.names()}
    plugins["Test::Sized"] = sized
    settings = Settings(database_url=f"sqlite:///{path}", batch_size=50)
    return open_runtime(settings, clock=ManualClock(), registry=PluginRegistry(plugins))


def _story(rt: Runtime) -> Story:
    def wait(stack_id: str) -> StackView:
        return running.wait_for_stack(rt, TENANT, stack_id)

    return Story(rt, "stack", wait)


def test_a_retained_resource_is_kept_when_its_template_no_longer_validates(
        tmp_path: Path) -> None:
    before = _runtime(tmp_path / "c.db", Sized)
    story = _story(before)
    story.create(json.dumps({
        "heat_template_version": "2018-08-31",
        "resources": {"k": kept("kept"), "s": {"type": "Test::Sized"}},
        "outputs": {"size": {"value": {"get_attr": ["s", "size"]}}},
    }))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    k = story.current()["k"].physical_id
    before.store.engine.dispose()
    # The workers now run the plugin's next release: the stored template reads an attribute
    # that no longer exists, so it is no longer valid as a whole.
    after = _runtime(tmp_path / "c.db", SizedWithoutSize)
    story = _story(after)
    story.id = story.stack().id
    with pytest.raises(TemplateError):
        after.engine.definitions.get(str(story.stack().template_id))
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert story.records() == {}
    assert story.entities() == {k: "kept"}
    assert retained_events(story, "k") == [k]
    after.store.engine.dispose()


# Snapshot ------------------------------------------------------------------------------------

SNAPSHOT = template({"db": dict(res("data"), deletion_policy="Snapshot")})
REFUSED = ("resources.db.deletion_policy: \"Snapshot\" deletion policy not supported: "
           "resource type 'OS::Heat::TestResource' takes no snapshots")


def refusal(call: Any) -> list[str]:
    with pytest.raises(TemplateError) as caught:
        call()
    return [str(p) for p in caught.value.problems]


def test_snapshot_is_refused_by_create_update_validate_and_preview(
        story: Story, rt: Runtime) -> None:
    assert refusal(lambda: templates.validate_template(SNAPSHOT, catalog=rt.registry)) == [REFUSED]
    assert refusal(lambda: preview.preview_create(rt, TENANT, "stack", TemplateContent(
        SNAPSHOT))) == [REFUSED]
    assert refusal(lambda: story.create(SNAPSHOT)) == [REFUSED]
    assert queries.list_stacks(rt, TENANT) == []  # nothing stored, nothing made
    story.create(template({"db": res("data")}))
    story.finish()
    assert refusal(lambda: preview.preview_update(rt, TENANT, "stack", SNAPSHOT)) == [REFUSED]
    assert refusal(lambda: story.update(SNAPSHOT)) == [REFUSED]
    assert story.stack().generation == 1
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert story.entities() == {}
