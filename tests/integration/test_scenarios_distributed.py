"""The engine's scenarios (``tests/engine/test_scenarios.py``) on real worker processes.

The scenarios are imported, not copied: this tier's ``rt`` and ``story`` fixtures
(``conftest.py``) put them on PostgreSQL, Redis and two ``convergence worker`` processes with
a real clock. One is adapted to that clock: a stack's timeout counts in minutes, and the
workers are shown a deadline a few seconds away rather than waited on for one.
"""

from sqlalchemy import update

from convergence.store.rows import T_TRAV
from tests.engine.harness import Story, res, template
from tests.engine.test_scenarios import *  # noqa: F403


def test_timeout_fails_the_traversal(story: Story) -> None:
    """The deadline a one-minute timeout sets, brought forward to two seconds away: the
    workers' first poll of the resource past it fails the traversal."""
    started = story.create(template({"A": res("a", wait_secs=600)}), timeout_mins=1,
                           disable_rollback=True)
    with story.rt.store.begin() as tx:
        trav = tx.traversal(started.traversal_id or "")
        assert trav is not None and trav.deadline is not None
        assert 55 < trav.deadline - tx.now <= 60  # the stack's minute, counted from its start
        tx.conn.execute(update(T_TRAV).where(T_TRAV.c.id == trav.id)
                        .values(deadline=tx.now + 2))
    stack = story.finish()
    assert stack.stack_status == "CREATE_FAILED"
    assert "Timed out" in stack.status_reason
