"""Crash recovery on the embedded tier: what a dead process or a lost message leaves behind,
the sweeper finds in the database and drives on.

Faults are made the way they happen: queued work is lost (``drop_pending``: a broker that
restarted without a disk, a process killed with messages in hand), leases are left held by
a worker that is gone, a request is committed and its plan never sent. Each test then waits
for the stack the way a user does and checks what is real: the stack's outcome, one live
entity per resource, no lease left, and the events.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy
from click.testing import CliRunner
from sqlalchemy import create_engine

from convergence.cli import cli
from convergence.engine.engine import Engine
from convergence.engine.sweeper import Sweeper, let_go
from convergence.plugins.heat.test_backend import TEST_ENTITIES, TableTestEntities
from convergence.ports.clock import ManualClock
from convergence.ports.views import RUNNING, NewOrphan, StackView
from convergence.ports.work import NODES, PLAN, Work
from convergence.runtime import Runtime, open_runtime
from convergence.services import operations, stacks
from convergence.services.running import TERMINAL, wait_for_stack
from convergence.settings import Settings
from convergence.store.entity_tables import SqlEntityTables

from .harness import TENANT, Story, entity_backend, res, template

LEASE = 30.0


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}", batch_size=50,
                        lease_seconds=LEASE, sweep_seconds=5.0)
    runtime = open_runtime(settings, clock=ManualClock())
    yield runtime
    runtime.store.engine.dispose()


@pytest.fixture
def story(rt: Runtime) -> Story:
    def wait(stack_id: str) -> StackView:
        return wait_for_stack(rt, TENANT, stack_id)

    return Story(rt, "stack", wait)


def layered(value: str, width: int = 4) -> str:
    """Three layers: each resource of a layer takes the outputs of the layer before."""
    resources = {}
    for layer in range(3):
        for i in range(width):
            props = {} if layer == 0 else {"update_replace_value": {"list_join": [
                "-", [{"get_attr": [f"l{layer - 1}r{j}", "output"]} for j in range(width)]]}}
            resources[f"l{layer}r{i}"] = res(f"{value}{layer}{i}", wait_secs=2, **props)
    return template(resources)


def assert_converged(story: Story, value: str, width: int = 4) -> None:
    stack = story.stack()
    assert stack.stack_status in ("CREATE_COMPLETE", "UPDATE_COMPLETE"), stack.status_reason
    current = story.current()
    assert sorted(current) == sorted(f"l{layer}r{i}" for layer in range(3)
                                     for i in range(width))
    live = story.entities()
    # One live entity per resource, the one its record names, holding the template's value.
    assert sorted(live) == sorted(r.physical_id for r in current.values() if r.physical_id)
    for name, record in current.items():
        assert live[str(record.physical_id)] == f"{value}{name[1]}{name[3]}"
    assert_no_leases(story.rt)


def assert_no_leases(rt: Runtime) -> None:
    with rt.store.begin() as tx:
        held = [r for s in tx.stacks(TENANT) for r in tx.records(s.id)
                if r.lease_owner is not None]
    assert held == []


def run_until(rt: Runtime, condition: object) -> None:
    assert rt.inprocess is not None
    assert rt.inprocess.run(until=condition)  # type: ignore[arg-type]


def planned_here(rt: Runtime, story: Story) -> str:
    """The story's current traversal, planned here with its queued work dropped, so that the
    test runs its nodes by hand; returns its id."""
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()
    traversal_id = str(story.stack().traversal_id)
    rt.engine.plan(traversal_id)
    return traversal_id


def recover(story: Story) -> StackView:
    """Run what the dispatcher has until the stack is terminal: with nothing queued, only
    the sweeper can find the work (unlike ``wait_for_stack``, which re-offers it itself)."""
    def terminal() -> bool:
        stack = story.stack()
        return stack.status in TERMINAL and stack.observed_generation == stack.generation

    run_until(story.rt, terminal)
    return story.stack()


def running(rt: Runtime, story: Story) -> bool:
    stack_id = story.stack().id
    with rt.store.begin() as tx:
        stack = tx.stack(stack_id)
        assert stack is not None and stack.traversal_id is not None
        trav = tx.traversal(stack.traversal_id)
        return trav is not None and trav.state == RUNNING and \
            trav.nodes_remaining < trav.nodes_total - 2


def test_every_queued_message_lost_mid_traversal(rt: Runtime, story: Story) -> None:
    story.create(layered("v"))
    run_until(rt, lambda: running(rt, story))
    assert rt.inprocess is not None
    assert rt.inprocess.drop_pending() > 0  # the broker restarted: all of it gone
    recover(story)
    assert_converged(story, "v")
    reasons = [e.reason for e in story.events()]
    assert any("not polled in time" in r for r in reasons), reasons


def test_a_plan_never_sent_is_planned_by_the_sweeper(rt: Runtime, story: Story) -> None:
    story.create(layered("v"))
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()  # committed, then the process died before enqueueing
    assert story.stack().stack_status == "CREATE_IN_PROGRESS"
    recover(story)
    assert_converged(story, "v")


def test_leases_of_a_dead_worker_are_taken_over_after_they_expire(
        rt: Runtime, story: Story) -> None:
    story.create(layered("v"))
    run_until(rt, lambda: running(rt, story))
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()
    # A worker claimed the ready nodes' records, then died: its messages and leases stay.
    dead = Engine(rt.store, rt.registry, worker_id="dead-node:4242", lease_seconds=LEASE)
    stack_id = story.stack().id
    with rt.store.begin() as tx:
        stack = tx.stack(stack_id)
        assert stack is not None and stack.traversal_id is not None
        ready = tx.ready_nodes(stack.traversal_id)
        nodes = tx.nodes(stack.traversal_id, ready)
        held = tx.claim_records([n.record_id for n in nodes if n.record_id is not None],
                                f"{dead.worker_id}/batch", tx.now + LEASE)
    assert held
    recover(story)
    assert_converged(story, "v")
    taken = [e for e in story.events() if "taken over" in e.reason]
    assert {e.resource_name for e in taken} >= {r.name for r in held.values()}
    assert all("dead-node:4242" in e.reason for e in taken if "lease of" in e.reason)


def test_a_lost_finish_is_sent_again(rt: Runtime, story: Story) -> None:
    story.create(template({"a": res("x"), "b": res("y")}))

    def all_done() -> bool:
        traversal_id = str(story.stack().traversal_id)
        with rt.store.begin() as tx:
            trav = tx.traversal(traversal_id)
            return trav is not None and trav.state == RUNNING and trav.nodes_remaining <= 0

    run_until(rt, all_done)
    assert rt.inprocess is not None
    assert rt.inprocess.drop_pending() >= 1  # the finish
    assert recover(story).stack_status == "CREATE_COMPLETE"


def test_a_traversal_past_its_deadline_fails(rt: Runtime, story: Story) -> None:
    story.create(template({"slow": res("x", wait_secs=-1), "quick": res("y")}),
                 timeout_mins=1, disable_rollback=True)
    run_until(rt, lambda: "slow" in story.current() and
              story.current()["slow"].status == "IN_PROGRESS")
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()  # nothing polls the slow one any more
    assert isinstance(rt.clock, ManualClock)
    rt.clock.advance(61)
    stack = recover(story)
    assert stack.stack_status == "CREATE_FAILED"
    assert "Timed out" in stack.status_reason
    assert all(r.status != "IN_PROGRESS" for r in story.current().values())
    assert_no_leases(rt)


def test_one_sweeper_at_a_time_once_a_period(rt: Runtime) -> None:
    clock = rt.clock
    assert isinstance(clock, ManualClock)
    a = Sweeper(rt.engine, 5.0)
    other = Engine(rt.store, rt.registry, worker_id="other:1")
    b = Sweeper(other, 5.0)
    with rt.store.begin() as tx:
        assert tx.take_turn("sweeper", "a", 5.0, a.hold)
        assert not tx.take_turn("sweeper", "b", 5.0, b.hold)  # a holds it
    clock.advance(a.hold - 1)
    assert not b.sweep().ran
    clock.advance(2)  # a died holding the turn: it is free once the hold is over
    assert b.sweep().ran
    assert not a.sweep().ran  # b swept a moment ago: not again within the period
    clock.advance(5)
    assert a.sweep().ran


def test_a_stopping_worker_lets_go_of_its_leases_at_once(rt: Runtime, story: Story) -> None:
    story.create(layered("v"))
    run_until(rt, lambda: running(rt, story))
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()
    stack_id = story.stack().id
    with rt.store.begin() as tx:
        stack = tx.stack(stack_id)
        assert stack is not None and stack.traversal_id is not None
        nodes = tx.nodes(stack.traversal_id, tx.ready_nodes(stack.traversal_id))
        ids = [n.record_id for n in nodes if n.record_id is not None]
        # The same node, started before (it crashed): its lease, on a resource of the last
        # layer, is the sweeper's to take.
        other = next(r.id for r in tx.records(stack_id) if r.name == "l2r0")
        earlier = tx.claim_records([other], "node-b@host:40.aaaaaa:41/batch", tx.now + LEASE)
        held = tx.claim_records(ids, "node-b@host:76.bbbbbb:77/batch", tx.now + LEASE)
        tokens = {i: r.fencing_token for i, r in held.items()}
    work = let_go(rt.engine, "node-b@host:76.bbbbbb:")
    assert sorted(s for w in work for s in w.seqs) == sorted(n.seq for n in nodes)
    assert all(w.kind == NODES for w in work)
    with rt.store.begin() as tx:
        after = tx.records_by_id(list(held))
        kept = tx.records_by_id(list(earlier))
        events = tx.events(stack_id)
    # Released, and fenced: whatever the stopping worker still writes is refused.
    assert all(r.lease_owner is None and r.fencing_token == tokens[i] + 1
               for i, r in after.items())
    assert [r.lease_owner for r in kept.values()] == ["node-b@host:40.aaaaaa:41/batch"]
    handed = {e.resource_name for e in events if e.reason.endswith("handed over")}
    assert handed == {r.name for r in after.values()}
    rt.inprocess.dispatch(work)
    story.finish()
    assert_converged(story, "v")


def test_a_step_whose_lease_is_lost_does_not_call_the_cloud(rt: Runtime, story: Story) -> None:
    story.create(template({"a": res("x")}))
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()
    traversal_id = story.stack().traversal_id
    assert traversal_id is not None
    rt.engine.plan(traversal_id)
    # A worker frozen past its lease wakes up: the keeper says its lease is no longer good.
    rt.engine.leases.good = lambda owner: False  # type: ignore[method-assign]
    follow = rt.engine.run_nodes(traversal_id, [0])
    assert story.entities() == {}
    assert story.current()["a"].physical_id is None
    del rt.engine.leases.good  # the instance attribute: the class's method again
    rt.inprocess.dispatch(follow or [Work(NODES, traversal_id, (0,))])
    assert story.finish().stack_status == "CREATE_COMPLETE"
    assert len(story.entities()) == 1


def test_lease_keeper_renews_and_notices_a_takeover(rt: Runtime, story: Story) -> None:
    story.create(template({"a": res("x")}))
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()
    rt.engine.plan(str(story.stack().traversal_id))
    record = story.current()["a"]
    clock = rt.clock
    assert isinstance(clock, ManualClock)
    keeper = rt.engine.leases
    with rt.store.begin() as tx:
        claimed = tx.claim_records([record.id], "w:1/x", tx.now + LEASE)
    with keeper.holding("w:1/x"):
        keeper.add("w:1/x", claimed)
        clock.advance(20)
        keeper.renew()  # what its thread does every third of a lease
        assert keeper.good("w:1/x")
        with rt.store.begin() as tx:
            assert tx.lease_expiry([record.id]) == clock.now() + LEASE
        clock.advance(LEASE + 1)
        assert not keeper.good("w:1/x")  # not renewed in time: the step must not act
        with rt.store.begin() as tx:
            assert tx.take_over_expired(10)  # the sweeper takes it over
            assert tx.claim_records([record.id], "w:2/y", tx.now + LEASE)
        keeper.renew()
        assert not keeper.good("w:1/x")


def test_admin_reset_stops_a_stuck_stack_and_takes_the_next_request(
        rt: Runtime, story: Story, tmp_path: Path) -> None:
    story.create(template({"forever": res("x", wait_secs=-1), "b": res("y")}))
    run_until(rt, lambda: "forever" in story.current() and
              story.current()["forever"].status == "IN_PROGRESS")
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()
    b_id = story.current()["b"].id
    with rt.store.begin() as tx:
        tx.claim_records([b_id], "gone:1/x", tx.now + 3600)
    result = CliRunner().invoke(cli, ["admin", "reset", "stack"], env={
        "CONVERGENCE_DATABASE_URL": rt.settings.database_url,
        "CONVERGENCE_PROJECT_ID": TENANT})
    assert result.exit_code == 0, result.output
    assert "CREATE_FAILED" in result.output
    assert story.stack().stack_status == "CREATE_FAILED"
    assert "reset by an administrator" in story.stack().status_reason
    assert_no_leases(rt)
    story.update(template({"forever": res("x"), "b": res("y")}))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert sorted(story.entities().values()) == ["x", "y"]


def test_admin_reset_names_a_missing_stack(rt: Runtime) -> None:
    result = CliRunner().invoke(cli, ["admin", "reset", "nope"], env={
        "CONVERGENCE_DATABASE_URL": rt.settings.database_url,
        "CONVERGENCE_PROJECT_ID": TENANT})
    assert result.exit_code != 0
    assert "nope" in result.output


def test_plans_of_long_ended_traversals_are_purged(rt: Runtime, story: Story) -> None:
    story.create(template({"a": res("x")}))
    story.finish()
    story.update(template({"a": res("y")}))
    story.finish()
    clock = rt.clock
    assert isinstance(clock, ManualClock)
    clock.advance(3601)
    report = Sweeper(rt.engine, 5.0).sweep()
    assert report.counts["plan rows purged"] >= 2
    stack_id = story.stack().id
    with rt.store.begin() as tx:
        stack = tx.stack(stack_id)
        assert stack is not None and stack.traversal_id is not None
        # The plans are gone; the stack is what it was, and takes the next request.
        assert tx.node_states(stack.traversal_id) == {}
    story.update(template({"a": res("z")}))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert list(story.entities().values()) == ["z"]


def test_a_request_whose_plan_cannot_be_sent_is_accepted_and_planned_later(
        rt: Runtime, story: Story) -> None:
    assert rt.inprocess is not None
    real = rt.inprocess.dispatch
    down: list[int] = []

    def broker_down(work: object) -> None:
        down.append(1)
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    rt.inprocess.dispatch = broker_down  # type: ignore[method-assign,assignment]
    stack = story.create(layered("v"))  # committed: accepted, though nothing was sent
    assert down and stack.stack_status == "CREATE_IN_PROGRESS"
    rt.inprocess.dispatch = real  # type: ignore[method-assign]
    recover(story)
    assert_converged(story, "v")


def test_a_stopping_engine_starts_no_step_and_hands_its_batch_on(
        rt: Runtime, story: Story) -> None:
    story.create(template({f"r{i}": res(f"v{i}") for i in range(5)}))
    assert rt.inprocess is not None
    rt.inprocess.drop_pending()
    traversal_id = str(story.stack().traversal_id)
    ready = [s for w in rt.engine.plan(traversal_id) for s in w.seqs]
    rt.engine.stopping.set()  # SIGTERM arrived
    follow = rt.engine.run_nodes(traversal_id, ready)
    assert story.entities() == {}
    assert sorted(s for w in follow for s in w.seqs) == sorted(ready)
    assert all(w.expects is None and w.countdown == 0 for w in follow)
    assert_no_leases(rt)  # let go of at the batch's commit: others take them at once
    rt.engine.stopping.clear()  # another worker, in effect
    rt.inprocess.dispatch(follow)
    assert recover(story).stack_status == "CREATE_COMPLETE"
    assert sorted(story.entities().values()) == [f"v{i}" for i in range(5)]


def test_a_backend_that_does_not_answer_delays_resources_not_fails_them(
        rt: Runtime, story: Story) -> None:
    # The backend's database refuses connections (a cloud API that does not answer): its
    # calls end in RetryLater, so the resources wait rather than fail, and converge once it
    # is back. Then the same for a delete, which must not leave DELETE_FAILED behind.
    backends = rt.registry.backends
    real = backends[TEST_ENTITIES]
    table = SqlEntityTables(create_engine("postgresql+psycopg2://127.0.0.1:1/none")).table(
        TEST_ENTITIES)
    assert table is not None
    away = TableTestEntities(table)
    backends[TEST_ENTITIES] = away
    story.create(layered("v"))

    def waiting() -> bool:  # each resource of the first layer tried twice (or the end)
        return rt.engine.stats.polls >= polls + 8 or story.stack().status in TERMINAL

    polls = rt.engine.stats.polls
    run_until(rt, waiting)
    assert story.stack().status == "IN_PROGRESS"
    assert not any(r.status == "FAILED" for vs in story.records().values() for r in vs)
    backends[TEST_ENTITIES] = real
    story.finish()
    assert_converged(story, "v")
    backends[TEST_ENTITIES] = away
    story.delete()
    polls = rt.engine.stats.polls
    run_until(rt, waiting)
    assert story.stack().status == "IN_PROGRESS", story.stack().status_reason
    backends[TEST_ENTITIES] = real
    stack = story.finish()
    assert stack.stack_status == "DELETE_COMPLETE", stack.status_reason
    assert story.entities() == {}


# Orphans: a worker frozen inside its create call wakes up after its lease was taken over.
# The call lands anyway (no check on the worker's side can stop a request on its way), its
# result is refused, and the sweeper removes what it made, unless the new holder adopted it.
def _frozen_inside_create(rt: Runtime, story: Story, *, lands_first: bool) -> str:
    """Run the one node of ``story``'s traversal on a worker that freezes inside its create,
    past its lease; meanwhile another worker takes the resource over and converges it. With
    ``lands_first`` the create lands before the freeze (the other worker finds it), else after
    the other worker made its own. Returns what the frozen worker's create made."""
    traversal_id = planned_here(rt, story)
    entities = entity_backend(rt)
    assert isinstance(entities, TableTestEntities)
    other = Engine(rt.store, rt.registry, worker_id="other-node:1.a:1", lease_seconds=LEASE)
    made: list[str] = []

    def frozen(owner: str, value: str, *, guard: object = None) -> str:
        del entities.create  # the instance attribute: the class's create again, for the other
        assert callable(guard)
        guard()  # the lease is good when the worker checks
        if lands_first:
            made.append(entities.create(owner, value))
        clock = rt.clock
        assert isinstance(clock, ManualClock)
        clock.advance(LEASE + 1)  # frozen past the lease
        with rt.store.begin() as tx:
            assert tx.take_over_expired(10)
        other.run_nodes(traversal_id, [0])
        if not lands_first:
            made.append(entities.create(owner, value))
        return made[0]

    entities.create = frozen  # type: ignore[method-assign]
    rt.engine.run_nodes(traversal_id, [0])
    assert rt.engine.stats.fenced_off == 1
    return made[0]


def _orphans(rt: Runtime) -> list[tuple[int, str]]:
    with rt.store.begin() as tx:
        return [(o.record_id, o.physical_id) for o in tx.pending_orphans(100)]


def test_an_orphan_a_step_made_after_its_lease_was_taken_over_is_removed(
        rt: Runtime, story: Story) -> None:
    story.create(template({"a": res("x")}))
    late = _frozen_inside_create(rt, story, lands_first=False)
    record = story.current()["a"]
    assert record.physical_id is not None and record.physical_id != late
    assert sorted(story.entities()) == sorted([late, record.physical_id])
    assert _orphans(rt) == [(record.id, late)]
    assert operations.store_stats(rt)[2] == 1  # the metrics' gauge
    sweeper = Sweeper(rt.engine, 5.0)
    # Someone holds the record: the orphan waits for the lease to be free.
    with rt.store.begin() as tx:
        assert tx.claim_records([record.id], "w:3/z", tx.now + LEASE)
    assert sweeper.sweep(force=True).counts["orphans waiting"] == 1
    assert late in story.entities()
    with rt.store.begin() as tx:
        tx.release([record.id], "w:3/z")
        token = tx.records_by_id([record.id])[record.id].fencing_token
    assert sweeper.sweep(force=True).counts["orphans removed"] == 1
    with rt.store.begin() as tx:  # a poll on its way (it names the token) still finds it
        assert tx.records_by_id([record.id])[record.id].fencing_token == token
    assert story.entities() == {record.physical_id: "x"}
    assert _orphans(rt) == []
    assert operations.store_stats(rt)[2] == 0
    assert_no_leases(rt)
    # Its events tell its life: made by the late step, removed by the sweeper.
    removed = [e for e in story.events() if e.physical_resource_id == late]
    assert [(e.resource_name, e.action, e.status) for e in removed] == [
        ("a", "CREATE", "IN_PROGRESS"), ("a", "CREATE", "COMPLETE"), ("a", "DELETE", "COMPLETE")]
    assert "recorded by nobody" in removed[-1].reason
    assert story.finish().stack_status == "CREATE_COMPLETE"
    assert story.entities() == {record.physical_id: "x"}


def test_what_the_new_holder_adopted_is_no_orphan(rt: Runtime, story: Story) -> None:
    story.create(template({"a": res("x")}))
    late = _frozen_inside_create(rt, story, lands_first=True)
    record = story.current()["a"]
    assert record.physical_id == late  # found by its owner key, and adopted
    assert _orphans(rt) == []  # adopted before the late result was refused: never noted
    # Adopted after it was noted (the new holder's step finished later): forgotten.
    with rt.store.begin() as tx:
        tx.note_orphans([NewOrphan(record.id, record.stack_id, "a",
                                   "OS::Heat::TestResource", late)])
    assert Sweeper(rt.engine, 5.0).sweep(force=True).counts["orphans adopted"] == 1
    assert _orphans(rt) == []
    assert story.entities() == {late: "x"}
    assert story.finish().stack_status == "CREATE_COMPLETE"
    assert [(e.action, e.status) for e in story.events() if e.physical_resource_id == late
            ][-1] == ("CREATE", "COMPLETE")


def test_an_orphan_whose_record_is_gone_is_removed(rt: Runtime, story: Story) -> None:
    story.create(template({"b": res("y")}))
    story.finish()
    stack_id = story.stack().id
    # Made for a record deleted since (its resource left the template): nobody holds it.
    entities = entity_backend(rt)
    assert isinstance(entities, TableTestEntities)
    late = entities.create(f"{stack_id}/999", "x")
    with rt.store.begin() as tx:
        tx.note_orphans([NewOrphan(999, stack_id, "a", "OS::Heat::TestResource", late)])
    assert Sweeper(rt.engine, 5.0).sweep(force=True).counts["orphans removed"] == 1
    assert sorted(story.entities().values()) == ["y"]
    assert _orphans(rt) == []
    assert_no_leases(rt)
    assert [e.resource_name for e in story.events() if e.physical_resource_id == late] == ["a"]


# Cancel without rollback while a step still holds its resource: whatever the step finishes
# is recorded as it is, and nothing stays IN_PROGRESS with nobody to poll it.
def _watch(rt: Runtime, record_id: int) -> float | None:
    """The record's lease or poll watch deadline (None: nobody holds or watches it)."""
    with rt.store.begin() as tx:
        value = tx.conn.execute(sqlalchemy.text(
            "SELECT lease_expires FROM resources WHERE id = :id"), {"id": record_id}).scalar()
    return None if value is None else float(value)


def _in_progress(story: Story) -> list[str]:
    return [r.name for versions in story.records().values() for r in versions
            if r.status == "IN_PROGRESS"]


def test_a_step_holding_its_resource_through_a_cancel_leaves_nothing_in_progress(
        rt: Runtime, story: Story) -> None:
    story.create(template({"a": res("x", action_wait_secs={"create": 60})}))
    traversal_id = planned_here(rt, story)
    entities = entity_backend(rt)
    assert isinstance(entities, TableTestEntities)
    made: list[str] = []

    def cancelled_meanwhile(owner: str, value: str, *, guard: object = None) -> str:
        del entities.create
        made.append(entities.create(owner, value, guard=guard))
        # The operator cancels while the step holds the lease: the cancel cannot touch it.
        stack = stacks.cancel_stack(rt, TENANT, story.name, rollback=False)
        assert stack.stack_status == "CREATE_FAILED"
        assert story.current()["a"].lease_owner is not None
        return made[0]

    entities.create = cancelled_meanwhile  # type: ignore[method-assign]
    assert rt.engine.run_nodes(traversal_id, [0]) == []  # nothing to poll: nobody will
    record = story.current()["a"]
    assert _in_progress(story) == []
    assert (record.action, record.status, record.physical_id) == ("CREATE", "FAILED", made[0])
    assert record.lease_owner is None and _watch(rt, record.id) is None
    last = [e for e in story.events() if e.resource_name == "a"][-1]
    assert (last.physical_resource_id, last.action, last.status) == (made[0], "CREATE", "FAILED")
    assert last.reason == "abandoned: Stack CREATE cancelled"
    assert story.stack().stack_status == "CREATE_FAILED"
    # The next request finds what the step made by the record's key and goes on from there.
    story.update(template({"a": res("x")}))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert story.entities() == {made[0]: "x"}


def test_a_poll_or_a_lapsed_watch_in_a_stopped_stack_abandons_the_operation(
        rt: Runtime, story: Story) -> None:
    """On PostgreSQL a step can record its operation as watched just as a cancel commits
    (it read the stack a moment before): the poll it sent, or the sweeper once the watch
    lapses, finds the stack stopped and abandons the operation."""
    for via_poll in (True, False):
        story.name = f"stopped-{via_poll}"
        story.create(template({"a": res("x", action_wait_secs={"create": 60})}))
        assert rt.inprocess is not None
        run_until(rt, lambda: "a" in story.current() and
                  story.current()["a"].status == "IN_PROGRESS")
        rt.inprocess.drop_pending()
        traversal_id = str(story.stack().traversal_id)
        stacks.cancel_stack(rt, TENANT, story.name, rollback=False)
        record = story.current()["a"]
        # What that step's commit leaves: the operation under way, a watch on it.
        with rt.store.begin() as tx:
            tx.conn.execute(sqlalchemy.text(
                "UPDATE resources SET status = 'IN_PROGRESS', lease_expires = :until "
                "WHERE id = :id"), {"until": tx.now + LEASE, "id": record.id})
        assert _in_progress(story) == ["a"]
        if via_poll:
            rt.engine.run_nodes(traversal_id, [0], expects=[record.fencing_token])
        else:
            clock = rt.clock
            assert isinstance(clock, ManualClock)
            clock.advance(LEASE + 1)
            Sweeper(rt.engine, 5.0).sweep(force=True)
        assert _in_progress(story) == []
        record = story.current()["a"]
        assert (record.status, _watch(rt, record.id)) == ("FAILED", None)
        last = [e for e in story.events() if e.resource_name == "a"][-1]
        assert (last.action, last.status) == ("CREATE", "FAILED")
        assert last.reason.startswith("abandoned: Stack CREATE cancelled")


# A delete that waited, and what a lost step made meanwhile: the sequence that leaked entities
# in the soaks of November 2026 (with the test backend's create idempotent by owner key, and
# without it). Entities by owner key, the resource's own: what the record does not name is
# found by it, whichever traversal comes next.
class Died(Exception):
    """The worker died between its steps' cloud calls and the commit of their results."""


def _delete_waits(story: Story) -> bool:
    record = story.current().get("a")
    return record is not None and (record.operation or {}).get("action") == "DELETE"


def test_a_delete_that_waited_removes_what_a_lost_step_made_meanwhile(
        rt: Runtime, story: Story) -> None:
    slow = res("x", action_wait_secs={"delete": 10})
    story.create(template({"a": slow, "b": res("y")}))
    story.finish()
    first = story.current()["a"].physical_id
    # An update drops a: its delete removes the entity at once, then waits 10 s.
    story.update(template({"b": res("y")}))
    run_until(rt, lambda: _delete_waits(story))
    assert first not in story.entities()
    # A newer request wants a back (a rollback, a request on top): a batch converges it, and
    # the record says a delete is under way, so it makes a anew; its worker dies before the
    # commit that would have recorded it.
    story.update(template({"a": slow, "b": res("y")}))
    traversal_id = planned_here(rt, story)
    with rt.store.begin() as tx:
        [seq] = [n.seq for n in tx.nodes(traversal_id, tx.ready_nodes(traversal_id))
                 if n.name == "a" and n.phase == "converge"]
    dying = Engine(rt.store, rt.registry, worker_id="dying-node:1.a:1", lease_seconds=LEASE)

    def die(*args: object, **kwargs: object) -> None:
        raise Died()

    dying.recorder.record = die  # type: ignore[method-assign,assignment]
    with pytest.raises(Died):
        dying.run_nodes(traversal_id, [seq])
    [made] = [eid for eid, value in story.entities().items() if value == "x"]
    assert made != first  # made, and recorded by nobody
    assert made not in {r.physical_id for rs in story.records().values() for r in rs}
    # The stack is deleted before anybody runs a's converge again: a's lease is taken over,
    # and its cleanup finds the delete that waited over. It ends with nothing of a left.
    rt.inprocess.drop_pending()
    story.delete()
    stack = recover(story)
    assert stack.stack_status == "DELETE_COMPLETE", stack.status_reason
    assert story.records() == {}
    assert story.entities() == {}
    assert any("dying-node:1.a:1" in e.reason and "taken over" in e.reason
               for e in story.events())
    assert_no_leases(rt)


def test_a_superseded_traversal_makes_no_record_for_a_resource_whose_record_vanished(
        rt: Runtime, story: Story) -> None:
    """A converge node whose record a superseded traversal deleted after this one was planned
    works on a record made for it, but only while its traversal is the stack's current one:
    a request accepted meanwhile plans the resource itself, and two records for one resource
    would create it twice."""
    story.create(template({"a": res("x", update_replace=True)}))
    story.finish()
    assert rt.inprocess is not None
    story.update(template({"a": res("y", update_replace=True)}))
    rt.inprocess.drop_pending()
    traversal_id = str(story.stack().traversal_id)
    rt.engine.plan(traversal_id)
    rt.inprocess.drop_pending()
    # What a superseded traversal's cleanup of it leaves: neither the entity nor the record.
    entity_backend(rt).delete(str(story.current()["a"].physical_id))
    with rt.store.begin() as tx:
        tx.conn.execute(sqlalchemy.text("DELETE FROM resources WHERE name = 'a'"))
    made_before = story.created_total()
    claimer = rt.engine.claimer
    make_records = claimer.make_records
    newer: list[StackView] = []

    def accepted_meanwhile(batch: object, owner: str) -> None:
        newer.append(story.update(template({"a": res("z", update_replace=True)})))
        make_records(batch, owner)  # type: ignore[arg-type]

    claimer.make_records = accepted_meanwhile  # type: ignore[method-assign]
    rt.engine.run_nodes(traversal_id, [n for n in range(4)])
    assert newer, "the node did not need a record made"
    assert story.records() == {} and story.created_total() == made_before
    claimer.make_records = make_records  # type: ignore[method-assign]
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert [r.id for r in story.records()["a"]] == [story.current()["a"].id]
    assert list(story.entities().values()) == ["z"]
    assert story.created_total() == made_before + 1


def test_ready_nodes_of_a_traversal_that_moves_are_not_offered_again(
        rt: Runtime, story: Story) -> None:
    """A ready node untouched for a lease's length is lost only if its traversal stopped
    moving too: a long queue behind busy workers is not lost work."""
    story.create(layered("v"))
    traversal_id = planned_here(rt, story)
    clock = rt.clock
    assert isinstance(clock, ManualClock)
    with rt.store.begin() as tx:
        ready = tx.ready_nodes(traversal_id)
    assert ready
    clock.advance(LEASE + 1)
    with rt.store.begin() as tx:
        tx.count_done(traversal_id, 0, 0, "")  # a batch of another worker counted now
        assert tx.idle_ready_nodes(LEASE, 100) == {}
    clock.advance(LEASE + 1)  # and then nothing more: the traversal stalled
    with rt.store.begin() as tx:
        assert tx.idle_ready_nodes(LEASE, 100) == {traversal_id: sorted(ready)}
    recover(story)
    assert_converged(story, "v")


def test_a_node_waiting_its_turn_past_a_lease_is_not_queued_twice(rt: Runtime,
                                                                    story: Story) -> None:
    """A thousand nested traversals at once queue for minutes: a ready node untouched for a
    lease looks lost to the sweeper, but the in-process queue still holds it. It is not
    queued a second time (each copy was a claim, or a read that found it done), nor is a
    queued plan; a node the queue lost is offered again."""
    assert rt.inprocess is not None and isinstance(rt.clock, ManualClock)
    story.create(template({f"r{i:03}": res("v") for i in range(200)}))
    traversal_id = str(story.stack().traversal_id)
    rt.clock.advance(LEASE)  # the plan waits its turn: to the sweeper, a plan never sent
    rt.inprocess.run_periodic(force=True)
    assert [w.kind for w in rt.inprocess.queued() if w.traversal_id == traversal_id] == [PLAN]
    rt.inprocess.run(max_items=1)  # the plan: its batches are queued
    queued = rt.inprocess.queued()
    assert sorted(queued_seqs(queued, traversal_id)) == list(range(200))
    # The last batch is lost (a message dropped); the rest wait behind a long queue.
    rt.inprocess.drop_pending()
    rt.inprocess.dispatch(queued[:-1])
    lost = queued[-1].seqs
    rt.clock.advance(LEASE + 5)

    assert rt.inprocess.run_periodic(force=True)  # the sweeper finds them all "idle"
    after = queued_seqs(rt.inprocess.queued(), traversal_id)
    assert len(after) == len(set(after)), "a queued node was queued again"
    assert sorted(after) == list(range(200))  # what the queue lost is back
    assert lost and set(lost) <= set(after)
    done = recover(story)
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason
    assert len(entity_backend(rt).live()) == 200


def queued_seqs(queued: list[Work], traversal_id: str) -> list[int]:
    return [s for w in queued if w.kind == NODES and w.traversal_id == traversal_id
            for s in w.seqs]
