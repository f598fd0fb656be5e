"""``stack check`` looks at every resource and changes nothing; an update that converges
(``converge: true``) repairs what the check found: made again, changed back."""

from __future__ import annotations

import pytest

from convergence.errors import Conflict
from convergence.runtime import Runtime
from convergence.services import stacks

from .harness import TENANT, Story, entity_backend, res, template
from .test_ledger import ledger_problems, story_of

T = {"keep": res("k"), "gone": res("g"), "drifted": res("d", depends_on=["gone"])}


def _break_things(story: Story, rt: Runtime) -> tuple[str, str, str]:
    """Behind the engine's back: one entity deleted, one changed."""
    current = story.current()
    ids = tuple(str(current[n].physical_id) for n in ("keep", "gone", "drifted"))
    entities = entity_backend(rt)
    entities.delete(ids[1])
    entities.update(ids[2], "changed by hand")
    return ids  # type: ignore[return-value]


def test_a_check_reports_per_resource_and_changes_nothing(story: Story, rt: Runtime) -> None:
    story.create(template(T))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    keep, _, _ = _break_things(story, rt)
    before = story.entities()

    stacks.check_stack(rt, TENANT, story.name)
    stack = story.finish()
    assert stack.stack_status == "CHECK_FAILED"
    assert "Resource CHECK failed" in stack.status_reason
    current = story.current()
    assert {n: (r.action, r.status) for n, r in current.items()} == {
        "keep": ("CHECK", "COMPLETE"), "gone": ("CHECK", "FAILED"),
        "drifted": ("CHECK", "FAILED")}
    assert "not found" in current["gone"].status_reason
    assert "value is 'changed by hand', was 'd'" in current["drifted"].status_reason
    assert story.entities() == before  # nothing made, nothing changed back
    assert story_of(story, keep)[-2:] == ["CHECK_IN_PROGRESS", "CHECK_COMPLETE"]
    assert story.created_total() == 3


def test_an_update_that_converges_repairs_what_changed_behind_its_back(
        story: Story, rt: Runtime) -> None:
    story.create(template(T))
    story.finish()
    keep, gone, drifted = _break_things(story, rt)
    stacks.update_stack(rt, TENANT, story.name, existing=True, converge=True)
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    current = story.current()
    assert current["keep"].physical_id == keep and current["drifted"].physical_id == drifted
    assert current["gone"].physical_id not in (None, gone)  # made again
    assert story.entities() == {keep: "k", drifted: "d", current["gone"].physical_id: "g"}
    # The vanished one's story ends; the new one's begins.
    assert story_of(story, gone)[-1] == "DELETE_COMPLETE"
    assert ledger_problems(story) == []
    # A check now finds everything as the template says.
    stacks.check_stack(rt, TENANT, story.name)
    assert story.finish().stack_status == "CHECK_COMPLETE"


def test_a_plain_update_does_not_look(story: Story, rt: Runtime) -> None:
    story.create(template(T))
    story.finish()
    _, _, drifted = _break_things(story, rt)
    story.update(template(T))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert story.entities()[drifted] == "changed by hand"  # not looked at: left as it is


def test_a_check_is_refused_while_the_stack_is_busy(story: Story, rt: Runtime) -> None:
    story.create(template({"slow": res("s", wait_secs=30)}))
    with pytest.raises(Conflict):
        stacks.check_stack(rt, TENANT, story.name)
    assert story.finish().stack_status == "CREATE_COMPLETE"
