"""Who counts as live on a stack's work in embedded mode (``running.abandoned``): the process
holding the stack (``convergence.services.holds``) while its hold is renewed, and any worker or API
process that sweeps the database while it heartbeats. Work nobody live is on is abandoned:
a command resumes it. One process and a manual clock tell every case; the stories with real
processes are in ``tests/cli/test_embedded_liveness.py``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from convergence.ports.clock import ManualClock
from convergence.ports.views import API, StackView
from convergence.runtime import Runtime, open_runtime
from convergence.services import running, stacks
from convergence.services.holds import StackHolds
from convergence.settings import Settings
from convergence.workers.heartbeat import worker_info

SLOW_CREATE = """\
    heat_template_version: 2018-08-31
    resources:
      slow:
        type: OS::Heat::TestResource
        properties: {wait_secs: 3}
    """


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    """One plain runtime (not the tier's adversities: nothing here runs concurrently)."""
    clock = ManualClock(1_000_000.0)
    runtime = open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'rules.db'}",
                                    lease_seconds=30.0, heartbeat_seconds=5.0), clock=clock)
    yield runtime
    runtime.store.engine.dispose()


def _in_progress(rt: Runtime) -> StackView:
    stack = stacks.create_stack(rt, "default", "s", textwrap.dedent(SLOW_CREATE))
    assert stack.stack_status == "CREATE_IN_PROGRESS"
    return stack


def test_a_stack_nobody_holds_is_abandoned_until_someone_holds_it(rt: Runtime) -> None:
    stack = _in_progress(rt)
    assert running.abandoned(rt, stack)  # accepted, and its process went away at once
    other = StackHolds(rt.store, 30.0, holder="elsewhere:1:aaaa")
    with other.holding(stack.id) as held:
        assert held
        assert not running.abandoned(rt, stack)
        with running.holding(rt, stack.id) as mine:
            assert not mine  # a second process drives it too, without the hold
    assert running.abandoned(rt, stack)  # let go of (Ctrl-C): at once


def test_a_hold_runs_out_unless_renewed(rt: Runtime) -> None:
    stack = _in_progress(rt)
    clock = rt.clock
    assert isinstance(clock, ManualClock)
    killed = StackHolds(rt.store, 30.0, holder="killed:1:aaaa")
    live = StackHolds(rt.store, 30.0, holder="live:2:bbbb")
    with live.holding(stack.id):
        clock.advance(20.0)
        live.renew()
        clock.advance(20.0)
        assert not running.abandoned(rt, stack)  # renewed: 40 s on, still held
    with killed.holding(stack.id):  # what a process killed inside this block leaves
        clock.advance(29.0)
        assert not running.abandoned(rt, stack)
        clock.advance(2.0)
        assert running.abandoned(rt, stack)  # it stopped renewing: its hold ran out
        with live.holding(stack.id) as taken:
            assert taken  # and the next one takes it


def test_a_live_worker_or_api_process_finishes_abandoned_work_itself(rt: Runtime) -> None:
    stack = _in_progress(rt)
    clock = rt.clock
    assert isinstance(clock, ManualClock)
    with rt.store.begin() as tx:
        tx.heartbeat(worker_info("api-1", API, clock.now()))
    assert not running.abandoned(rt, stack)  # its sweeper finds the work
    clock.advance(16.0)
    assert running.abandoned(rt, stack)  # silent for three heartbeats: gone
    with rt.store.begin() as tx:
        tx.heartbeat(worker_info("api-1", API, clock.now()))
        tx.stop_worker("api-1")
    assert running.abandoned(rt, stack)  # stopped


def test_a_finished_stack_is_never_abandoned(rt: Runtime) -> None:
    stack = _in_progress(rt)
    assert isinstance(rt.clock, ManualClock)
    rt.clock.advance(60.0)
    done = running.wait_for_stack(rt, "default", stack.id)
    assert done.stack_status == "CREATE_COMPLETE"
    assert not running.abandoned(rt, done)
