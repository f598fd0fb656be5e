"""The lease keeper tells lost leases from leases let go of: a renewal that finds a batch's
records released by its own recording keeps the batch's owner good; one that finds a record
still in hand taken over by someone else marks it lost, and the steps stop calling the cloud.

Real rows in a real SQLite database (the records of a created stack), leased and released
through the store's own statements, as the batch runner and the sweeper do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from convergence.engine.leases import LeaseKeeper
from convergence.runtime import Runtime, open_runtime
from convergence.services import running, stacks
from convergence.settings import Settings

from .harness import TENANT, res, template

OWNER = "worker-1/1"


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    runtime = open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}"))
    yield runtime
    runtime.store.engine.dispose()


def _leased(rt: Runtime) -> list[int]:
    stack = stacks.create_stack(rt, TENANT, "s", template(
        {f"r{i}": res(f"v{i}") for i in range(4)}))
    stack = running.wait_for_stack(rt, TENANT, stack.id)
    with rt.store.begin() as tx:
        ids = sorted(r.id for r in tx.records(stack.id))
        claimed = tx.claim_records(ids, OWNER, tx.now + 30.0)
    assert sorted(claimed) == ids
    return ids


def test_records_let_go_of_by_their_batch_are_not_lost(rt: Runtime) -> None:
    ids = _leased(rt)
    keeper = LeaseKeeper(rt.store, 30.0)
    with keeper.holding(OWNER):
        keeper.add(OWNER, ids)
        keeper.leaving(OWNER, ids[:2])
        with rt.store.begin() as tx:  # the batch's recording commits: released
            tx.release(ids[:2], OWNER)
        keeper.renew()  # before the batch runner dropped them
        assert keeper.good(OWNER)
        keeper.drop(OWNER, ids[:2])
        keeper.renew()
        assert keeper.good(OWNER)
        with rt.store.read() as tx:
            leased = {r.id: r.lease_owner for r in tx.records_by_id(ids).values()}
        assert leased == {ids[0]: None, ids[1]: None, ids[2]: OWNER, ids[3]: OWNER}


def test_a_record_in_hand_taken_over_is_lost(rt: Runtime) -> None:
    ids = _leased(rt)
    keeper = LeaseKeeper(rt.store, 30.0)
    with keeper.holding(OWNER):
        keeper.add(OWNER, ids)
        keeper.leaving(OWNER, ids[:1])
        with rt.store.begin() as tx:  # someone else's: let go of with the token bumped
            tx.release_owned(OWNER)
        keeper.renew()
        assert not keeper.good(OWNER)
