"""A plugin that is not preemptible: its operation is seen to its end, then updated.

Embedded tier only: the plugin exists in this test's registry, not in the workers'.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from convergence.plugins.heat.test_resource import TestResource
from convergence.plugins.registry import PluginRegistry
from convergence.ports.clock import ManualClock
from convergence.ports.views import StackView
from convergence.runtime import Runtime, open_runtime
from convergence.services import running
from convergence.settings import Settings

from .conftest import ADVERSITY
from .harness import TENANT, Story, template

STUBBORN = "Test::Stubborn"


class Stubborn(TestResource):
    """TestResource, except that a pending action cannot be abandoned."""

    __test__ = False
    preemptible: ClassVar[bool] = False


@pytest.fixture(params=sorted(ADVERSITY))
def story(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Story]:
    registry = PluginRegistry({"OS::Heat::TestResource": TestResource, STUBBORN: Stubborn})
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}", batch_size=50,
                        inline_seconds=0.5 if request.param == "plain" else 0.0)
    rt = open_runtime(settings, clock=ManualClock(), registry=registry,
                      **ADVERSITY[request.param])

    def wait(stack_id: str) -> StackView:
        return running.wait_for_stack(rt, TENANT, stack_id)

    yield Story(rt, "stack", wait)
    assert rt.inprocess is not None and rt.inprocess.errors == []
    rt.store.engine.dispose()


def stubborn(value: str, **props: object) -> dict[str, object]:
    return {"type": STUBBORN, "properties": {"value": value, **props}}


def test_a_changed_definition_waits_for_the_operation_then_updates(story: Story) -> None:
    rt: Runtime = story.rt
    slow = {"create": 300}
    story.create(template({"X": stubborn("x", action_wait_secs=slow)}))
    assert rt.inprocess is not None
    rt.inprocess.run(until=lambda: len(story.entities()) == 1)
    started = rt.clock.now()
    story.update(template({"X": stubborn("x2", action_wait_secs=slow)}))
    stack = story.finish()
    assert stack.stack_status == "UPDATE_COMPLETE"
    assert rt.clock.now() - started >= 290  # the create was seen to its end
    current = story.current()["X"]
    assert (current.action, current.status, current.generation) == ("UPDATE", "COMPLETE", 2)
    assert list(story.entities().values()) == ["x2"] and story.created_total() == 1
    events = [(e.action, e.status) for e in story.events() if e.resource_name == "X"]
    assert events[-2:] == [("UPDATE", "IN_PROGRESS"), ("UPDATE", "COMPLETE")]
    assert ("CREATE", "COMPLETE") in events
    assert not any("abandoned" in e.reason for e in story.events())
