"""The API process dies after it committed a request and before anything was enqueued.

A second API process is given a broker that accepts connections and never answers (a
black-hole listener), so its request's transaction commits (the stack's generation moves,
the traversal row is PLANNING) and the enqueue then hangs. Once the new generation is visible
in the database, that API is killed (``kill -9``). Nothing was ever sent to Redis for that
traversal, yet the stack converges through the workers on the real broker: the sweeper
re-plans a traversal left in PLANNING.
"""

from __future__ import annotations

import contextlib
import threading

import httpx
import pytest

from tests.faults.cluster import FaultCluster, wait_for
from tests.faults.conftest import settle
from tests.faults.workload import TENANT, Tracked, Workload, make_spec, mutate, template


def _send_and_kill(cluster: FaultCluster, method: str, path: str, body: dict[str, object],
                   committed: str, **params: object) -> None:
    """Send the request to a hanging API; kill -9 it once ``committed`` (a query) is true."""
    with cluster.hanging_api() as api:
        def send() -> None:
            # It is killed mid-request: no answer is the point.
            with contextlib.suppress(httpx.HTTPError):
                httpx.request(method, f"{api.url}/v1/{TENANT}{path}", json=body, timeout=60)

        thread = threading.Thread(target=send, daemon=True)
        thread.start()
        if not wait_for(lambda: cluster.query(committed, **params), 30):
            pytest.fail(f"the request never committed\n{api.tail()}", pytrace=False)
        api.kill()
        cluster.record_fault("API killed after commit", api.url)
        thread.join(10)


def test_update_committed_then_api_killed(cluster: FaultCluster, workload: Workload) -> None:
    t = workload.create("layered", size=8)
    settle(cluster, [t])
    spec = mutate(t.shape, t.spec, workload.rng, workload.wait)
    _send_and_kill(cluster, "PUT", f"/stacks/{t.name}/{t.id}", {"template": template(spec)},
                   "SELECT 1 FROM stacks WHERE id = :id AND generation = :g", id=t.id,
                   g=t.generation + 1)
    t.spec, t.generation = spec, t.generation + 1
    settle(cluster, [t])


def test_create_committed_then_api_killed(cluster: FaultCluster, workload: Workload) -> None:
    spec = make_spec("wide", workload.rng, 10, workload.wait)
    t = Tracked(f"hang-{workload.rng.randrange(10**6)}", "wide", spec)
    _send_and_kill(cluster, "POST", "/stacks", {"stack_name": t.name,
                                                "template": template(spec)},
                   "SELECT 1 FROM stacks WHERE name = :name AND tenant = :tenant",
                   name=t.name, tenant=TENANT)
    t.id = cluster.query("SELECT id FROM stacks WHERE name = :name AND tenant = :tenant",
                         name=t.name, tenant=TENANT)[0].id
    t.generation = 1
    settle(cluster, [t])
