"""The Celery plumbing on real workers: duplicated messages, and a worker stopped mid-traversal.

What is asserted is what exists afterwards (stack status, records, test entities), never how
many messages were sent or how long it took.
"""

from __future__ import annotations

import time

from convergence.ports.work import NODES, PLAN, Work
from convergence.runtime import Runtime
from tests.engine.harness import Story, res, template

from .conftest import Cluster

# Ten resources, two of them polled for a while, in a chain and a fan: enough in flight that
# every worker holds messages (delayed polls among them) when something happens to it.
SHAPE = {
    "base": res("base"),
    **{f"leaf{i}": res(f"leaf{i}", depends_on=["base"], wait_secs=1 if i < 2 else 0)
       for i in range(6)},
    "join": res({"get_attr": ["leaf0", "output"]}, depends_on=[f"leaf{i}" for i in range(6)]),
    "tail": res({"get_resource": "join"}, wait_secs=1),
    "last": res("last", depends_on=["tail"]),
}


def _assert_converged_once(story: Story) -> None:
    current = story.current()
    assert sorted(current) == sorted(SHAPE)
    assert all(len(versions) == 1 for versions in story.records().values())
    entities = story.entities()
    assert len(entities) == len(SHAPE) and story.created_total() == len(SHAPE)
    join, tail = current["join"].physical_id, current["tail"].physical_id
    assert join is not None and tail is not None
    assert entities[join] == "leaf0" and entities[tail] == join


def _redeliver(rt: Runtime, traversal_id: str) -> None:
    """Send copies of what is in flight: the plan, and every node that is ready now."""
    rt.dispatcher.dispatch([Work(PLAN, traversal_id), *rt.engine.resume(traversal_id)])


def test_duplicated_messages_are_harmless(story: Story, rt: Runtime) -> None:
    story.create(template(SHAPE))
    traversal_id = story.stack().traversal_id
    assert traversal_id is not None
    while story.stack().status == "IN_PROGRESS":
        _redeliver(rt, traversal_id)
        time.sleep(0.1)
    stack = story.finish()
    assert stack.stack_status == "CREATE_COMPLETE"
    _assert_converged_once(story)
    # Copies arriving after the end change nothing either.
    before = story.entities()
    _redeliver(rt, traversal_id)
    rt.dispatcher.dispatch([Work(NODES, traversal_id, tuple(range(len(SHAPE) * 2)))])
    time.sleep(1.0)
    assert story.stack().stack_status == "CREATE_COMPLETE"
    assert story.entities() == before


def test_a_worker_stopped_mid_traversal_hands_its_work_over(story: Story,
                                                             cluster: Cluster) -> None:
    story.create(template(SHAPE))
    # Stop a worker while polls are under way: its warm shutdown finishes the step it is
    # running and returns the messages it holds (delayed polls included) to the broker.
    time.sleep(0.5)
    leaving = next(w for w in cluster.workers if w.process.poll() is None)
    cluster.stop(leaving)
    try:
        stack = story.finish()
        assert stack.stack_status == "CREATE_COMPLETE"
        _assert_converged_once(story)
    finally:
        cluster.workers.remove(leaving)
        cluster.wait_ready([cluster.start_worker(leaving.name.split("@")[0] + "-again")])
