"""The observer: a stack that opted in is looked at, and what vanished or drifted behind the
engine's back is repaired by a generation the observer starts, visible in the events."""

from __future__ import annotations

from convergence.engine.observer import Observer
from convergence.runtime import Runtime
from convergence.services import stacks

from .harness import TENANT, Story, entity_backend, res, template
from .test_ledger import ledger_problems

T = {"a": res("a"), "b": res("b", depends_on=["a"])}


def test_the_observer_repairs_a_stack_that_opted_in(story: Story, rt: Runtime) -> None:
    stacks.create_stack(rt, TENANT, story.name, template(T), observe=True)
    assert story.finish().stack_status == "CREATE_COMPLETE"
    before = story.current()
    entities = entity_backend(rt)
    entities.delete(str(before["a"].physical_id))
    entities.update(str(before["b"].physical_id), "by hand")

    observer = Observer(rt.engine, period=60.0)
    report = observer.observe(force=True)
    assert sorted(f.record.name for f in report.findings) == ["a", "b"]
    assert report.work  # a converging update, started
    rt.dispatcher.dispatch(report.work)
    stack = story.finish()
    assert (stack.stack_status, stack.generation) == ("UPDATE_COMPLETE", 2)
    after = story.current()
    assert after["a"].physical_id != before["a"].physical_id
    assert story.entities() == {after["a"].physical_id: "a", after["b"].physical_id: "b"}
    reasons = [e.reason for e in story.events() if e.resource_name == story.name]
    assert any("started by the observer: a, b found wrong" in r for r in reasons)
    observed = [e for e in story.events() if e.action == "CHECK" and e.status == "FAILED"]
    assert {e.resource_name for e in observed} == {"a", "b"}
    assert ledger_problems(story) == []
    # Looked at just now: not due again for a period.
    assert observer.observe().findings == []


def test_a_stack_that_did_not_opt_in_is_left_alone(story: Story, rt: Runtime) -> None:
    story.create(template(T))
    story.finish()
    entity_backend(rt).delete(str(story.current()["a"].physical_id))
    report = Observer(rt.engine, period=60.0).observe(force=True)
    assert (report.stacks, report.findings, report.work) == (0, [], [])
    assert story.stack().generation == 1


def test_a_healthy_stack_is_noted_and_nothing_starts(story: Story, rt: Runtime) -> None:
    stacks.create_stack(rt, TENANT, story.name, template(T), observe=True)
    story.finish()
    report = Observer(rt.engine, period=60.0).observe(force=True)
    assert (report.stacks, report.resources, report.findings) == (1, 2, [])
    assert report.work == [] and story.stack().generation == 1
