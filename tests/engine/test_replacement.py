"""Replacements: the new version of a record is made by the batch, between two parts of a step.

A step that must replace its resource asks for the new version before it calls the cloud; the
batch makes the versions of all such steps in one transaction of its own, under the stack's
lock, and the steps go on against them (``convergence.engine.batch``). These stories look at
that seam: a newer request accepted meanwhile, and a preempted operation whose new definition
needs a replacement.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from convergence.engine.claim import Batch
from convergence.engine.step import Replacement, StepInput
from convergence.ports.clock import ManualClock
from convergence.ports.views import RecordView, StackView
from convergence.runtime import Runtime, open_runtime
from convergence.services.running import wait_for_stack
from convergence.settings import Settings

from .harness import TENANT, Story, res, template


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}", batch_size=50)
    runtime = open_runtime(settings, clock=ManualClock())
    yield runtime
    assert runtime.inprocess is not None and runtime.inprocess.errors == []
    runtime.store.engine.dispose()


@pytest.fixture
def story(rt: Runtime) -> Story:
    def wait(stack_id: str) -> StackView:
        return wait_for_stack(rt, TENANT, stack_id)

    return Story(rt, "stack", wait)


def test_a_traversal_superseded_before_its_versions_are_made_makes_none(
        rt: Runtime, story: Story) -> None:
    """Steps that asked for a replacement, in a traversal a newer request superseded before
    the batch made their versions: none is made and nothing is created; the newer traversal
    replaces them, once each."""
    names = ("a", "b")
    story.create(template({n: res(f"{n}1", update_replace=True) for n in names}))
    story.finish()
    before = {n: r.id for n, r in story.current().items()}
    story.update(template({n: res(f"{n}2", update_replace=True) for n in names}))
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()
    traversal_id = str(story.stack().traversal_id)
    rt.engine.plan(traversal_id)
    rt.inprocess.drop_pending()
    with rt.store.begin() as tx:
        ready = tx.ready_nodes(traversal_id)
    runner = rt.engine.runner
    make_versions = runner._make_versions
    asked: list[int] = []

    def accepted_meanwhile(batch: Batch, owner: str,
                           wanted: list[tuple[StepInput, Replacement]]) -> dict[int, RecordView]:
        asked.append(len(wanted))
        story.update(template({n: res(f"{n}3", update_replace=True) for n in names}))
        return make_versions(batch, owner, wanted)

    runner._make_versions = accepted_meanwhile  # type: ignore[method-assign]
    try:
        rt.engine.run_nodes(traversal_id, ready)
    finally:
        runner._make_versions = make_versions  # type: ignore[method-assign]
    assert asked == [2], "the steps did not ask for their replacements together"
    assert {n: [r.id for r in rs] for n, rs in story.records().items()} == {
        n: [before[n]] for n in names}
    assert story.created_total() == 2
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert sorted(story.entities().values()) == ["a3", "b3"]
    assert story.created_total() == 4
    assert all(len(rs) == 1 for rs in story.records().values())


def test_a_preempted_create_whose_new_definition_replaces_it_makes_a_new_version(
        rt: Runtime, story: Story) -> None:
    """A long create under way, and an update whose change needs a replacement: the wait is
    abandoned and the new version created at once; the story of the first goes on to its
    delete, and the events say so in order."""
    story.create(template({"X": res("x", update_replace=True,
                                    action_wait_secs={"create": 1800}), "Y": res("y")}))
    assert rt.inprocess is not None
    rt.inprocess.run(until=lambda: len(story.entities()) == 2)
    first = story.current()["X"].physical_id
    story.update(template({"X": res("x2", update_replace=True), "Y": res("y")}))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    [current] = story.records()["X"]
    assert current.physical_id != first and story.entities()[str(current.physical_id)] == "x2"
    assert first not in story.entities() and story.created_total() == 3
    told = [(e.physical_resource_id, e.action, e.status, e.reason) for e in story.events()
            if e.resource_name == "X" and e.generation == 2]
    abandoned = ("CREATE", "IN_PROGRESS", "CREATE in progress abandoned: converging to "
                 "generation 2")
    at = [t[1:] for t in told].index(abandoned)
    assert told[at][0] == first
    assert told[at + 1] == (current.physical_id, "CREATE", "IN_PROGRESS", "state changed")
