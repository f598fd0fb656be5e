"""The embedded tier: SQLite file + in-process dispatcher + a manual clock.

Every scenario runs under each adversity: plain, shuffled execution order, every message
delivered twice, and two threads at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from convergence.ports.clock import ManualClock
from convergence.ports.views import StackView
from convergence.runtime import Runtime, open_runtime
from convergence.services import running
from convergence.settings import Settings

from .harness import TENANT, Story

# Adversity is applied per message, so the steps that carry on inline with the successors
# they released (the default) do so only in the plain run.
ADVERSITY = {
    "plain": {},
    "shuffled": {"shuffle": True, "seed": 7},
    "duplicated": {"duplicate": True},
    "threads": {"threads": 2, "shuffle": True, "seed": 3},
}


@pytest.fixture(params=sorted(ADVERSITY))
def rt(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}", batch_size=50,
                        inline_seconds=0.5 if request.param == "plain" else 0.0)
    runtime = open_runtime(settings, clock=ManualClock(), **ADVERSITY[request.param])
    yield runtime
    assert runtime.inprocess is not None
    assert runtime.inprocess.errors == []
    runtime.store.engine.dispose()


@pytest.fixture
def story(rt: Runtime) -> Story:
    def wait(stack_id: str) -> StackView:
        return running.wait_for_stack(rt, TENANT, stack_id)

    return Story(rt, "stack", wait)
