"""What no plugin translated is the engine's fault, not the resource's: tried again a few
times, then the resource fails with the exception, never silently."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from convergence.plugins.base import PluginBase, PluginContext, Progress
from convergence.plugins.registry import PluginRegistry
from convergence.ports.clock import ManualClock
from convergence.runtime import Runtime, open_runtime
from convergence.services import running, stacks
from convergence.settings import Settings
from convergence.template.properties import INTEGER, PropertySchema, TypeSchema

from .harness import TENANT

CALLS: dict[str, int] = {}


class Flaky(PluginBase):
    """Raises a plain exception on its first ``faults`` creates (a bug, or a library's error
    nobody translated), then works."""

    schema: ClassVar[TypeSchema] = TypeSchema(
        name="Test::Flaky", properties={"faults": PropertySchema(INTEGER, "How many.")})

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        CALLS[ctx.owner] = CALLS.get(ctx.owner, 0) + 1
        if CALLS[ctx.owner] <= int(props["faults"]):
            raise KeyError("an untranslated surprise")
        return Progress.finished(f"made-{ctx.owner}")


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    runtime = open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}",
                                    action_retry_limit=3),
                           clock=ManualClock(), registry=PluginRegistry({"Test::Flaky": Flaky}))
    yield runtime
    runtime.store.engine.dispose()


def _stack(rt: Runtime, faults: int) -> Any:
    text = ("heat_template_version: 2018-08-31\nresources:\n"
            f"  r: {{type: Test::Flaky, properties: {{faults: {faults}}}}}\n")
    stack = stacks.create_stack(rt, TENANT, f"s{faults}", text, disable_rollback=True)
    return running.wait_for_stack(rt, TENANT, stack.id)


def test_an_engine_fault_is_tried_again_and_the_resource_completes(rt: Runtime) -> None:
    stack = _stack(rt, 2)
    assert stack.stack_status == "CREATE_COMPLETE"
    assert sum(CALLS.values()) >= 3


def test_an_engine_fault_that_persists_fails_the_resource_saying_what_it_was(
        rt: Runtime) -> None:
    stack = _stack(rt, 100)
    assert stack.stack_status == "CREATE_FAILED"
    assert "KeyError: 'an untranslated surprise'" in stack.status_reason
