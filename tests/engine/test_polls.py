"""Polls of many resources waiting together share their messages, and duplicates of a shared
poll never multiply the polling."""

from __future__ import annotations

from convergence.runtime import Runtime

from .harness import Story, res, template

N = 100
WAIT = 5  # seconds each create takes: polled about once a second (TestResource's pace)


def test_resources_waiting_together_are_polled_by_shared_messages(story: Story,
                                                                   rt: Runtime) -> None:
    story.create(template({f"r{i}": res(f"v{i}", wait_secs=WAIT) for i in range(N)}))
    assert rt.inprocess is not None
    before = rt.inprocess.executed
    assert story.finish().stack_status == "CREATE_COMPLETE"
    messages = rt.inprocess.executed - before
    # One message per resource per poll would be about N * WAIT = 500, and one round of
    # polls alone N; shared, a round of polls of the batch is one message (a few more where
    # threads or shuffling split the batch, twice as many where every message comes twice).
    assert messages < N, messages
    assert len(story.entities()) == N and story.created_total() == N
