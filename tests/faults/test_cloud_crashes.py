"""A worker killed between the cloud's create and the database write: exactly one server.

The fault tier's cluster serves a simulated OpenStack cloud that every worker reaches as its
cloud (``OS_CLOUD``). A ``late_answer`` rule makes Nova create the server at once and answer
seconds later: the worker that asked is killed (``kill -9`` of its whole group) while it
waits, so the server exists and no record names it. Another worker takes the resource over
when the lease runs out, finds the server by the record's key (its tag) and adopts it: the
stack completes with one server, its record naming it, and the stack's delete leaves none.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.faults.cluster import FaultCluster, wait_for
from tests.faults.conftest import QUIET_TIMEOUT

TEMPLATE: dict[str, Any] = {
    "heat_template_version": "2018-08-31",
    "resources": {
        "net": {"type": "OS::Neutron::Net"},
        "subnet": {"type": "OS::Neutron::Subnet",
                   "properties": {"network": {"get_resource": "net"},
                                  "cidr": "10.30.0.0/24"}},
        "web": {"type": "OS::Nova::Server", "depends_on": ["subnet"],
                "properties": {"name": "crash-web", "flavor": "m1.tiny", "image": "cirros",
                               "networks": [{"network": {"get_resource": "net"}}]}},
    },
}


def _servers(cluster: FaultCluster) -> list[dict[str, Any]]:
    assert cluster.cloud is not None
    with cluster.cloud.locked():
        return [dict(s) for s in cluster.cloud.kind("server").values()
                if s.get("name") == "crash-web"]


def _stack(api: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = httpx.get(f"{api}/v1/t1/stacks/{name}", follow_redirects=True,
                                      timeout=10).json()["stack"]
    return found


def _wait_stack(api: str, name: str) -> dict[str, Any]:
    deadline = time.monotonic() + QUIET_TIMEOUT
    while True:
        stack = _stack(api, name)
        if not stack["stack_status"].endswith("IN_PROGRESS"):
            return stack
        assert time.monotonic() < deadline, stack["stack_status"]
        time.sleep(0.2)


def test_a_worker_killed_between_the_create_call_and_its_write_leaves_one_server(
        cluster: FaultCluster) -> None:
    from convergence_simcloud.client import SimControl

    assert cluster.api is not None
    api = cluster.api.url
    SimControl(cluster.cloud_url).add_rule(
        "late_answer", service="compute", method="POST", path="/compute/v2.1/servers",
        seconds=10.0, count=1)
    r = httpx.post(f"{api}/v1/t1/stacks", json={"stack_name": "crash-one",
                                                 "template": TEMPLATE}, timeout=10)
    assert r.status_code == 201, r.text
    # Nova made the server; its answer is on the way for 10 s: the worker waits for it.
    assert wait_for(lambda: _servers(cluster), 60), "no server was made"
    rows = wait_for(lambda: cluster.query(
        "SELECT lease_owner FROM resources WHERE name = 'web' AND lease_owner IS NOT NULL"), 10)
    assert rows, "nobody holds the server's record"
    holder = next(w for w in cluster.live_workers()
                  if rows[0].lease_owner.startswith(f"{w.node}:"))
    cluster.kill9(holder)

    stack = _wait_stack(api, "crash-one")
    assert stack["stack_status"] == "CREATE_COMPLETE", stack["stack_status_reason"]
    servers = _servers(cluster)
    assert len(servers) == 1
    web = cluster.query("SELECT physical_id FROM resources WHERE name = 'web' "
                        "AND stack_id = :sid", sid=stack["id"])
    assert [w.physical_id for w in web] == [servers[0]["id"]]  # adopted, not made again

    r = httpx.delete(f"{api}/v1/t1/stacks/crash-one/{stack['id']}", timeout=10)
    assert r.status_code == 204, r.text
    deleted = _wait_stack(api, f"crash-one/{stack['id']}")
    assert deleted["stack_status"] == "DELETE_COMPLETE", deleted["stack_status_reason"]
    assert _servers(cluster) == []
