"""Workers crash while a tree of nested stacks is made: a group of template resources, each a
nested stack of slow resources, with ``kill -9`` of random workers (the supervisor starts each
again) landing among the children's steps, the parents' parked nodes and their wake-ups.

Afterwards the tree is complete, as a flat stack would be: every stack of it CREATE_COMPLETE,
no lease held, and exactly one live test entity per resource of every nested stack, each the
one its record names (nothing made twice, nothing leaked).
"""

from __future__ import annotations

import json
import random
import time

import httpx

from tests.faults.cluster import Fault, FaultCluster
from tests.faults.conftest import QUIET_TIMEOUT, SEED
from tests.faults.workload import TENANT

MEMBERS, PER_MEMBER, KILLS = 6, 4, 6

NODE = json.dumps({
    "heat_template_version": "2018-08-31",
    "parameters": {"index": {"type": "string"}},
    "resources": {f"r{i}": {"type": "OS::Heat::TestResource", "properties": {
        "value": {"list_join": ["-", [{"get_param": "index"}, str(i)]]},
        "action_wait_secs": {"create": 1}}} for i in range(PER_MEMBER)},
    "outputs": {"value": {"value": {"get_attr": ["r0", "output"]}}}})

TREE = json.dumps({
    "heat_template_version": "2018-08-31",
    "resources": {"nodes": {"type": "OS::Heat::ResourceGroup", "properties": {
        "count": MEMBERS,
        "resource_def": {"type": "node.yaml", "properties": {"index": "%index%"}}}}},
    "outputs": {"values": {"value": {"get_attr": ["nodes", "value"]}}}})


def test_kill_9_while_a_tree_of_nested_stacks_is_made(cluster: FaultCluster) -> None:
    assert cluster.api is not None
    rng = random.Random(SEED)
    base = f"{cluster.api.url}/v1/{TENANT}"
    reply = httpx.post(f"{base}/stacks", json={"stack_name": "tree", "template": TREE,
                                               "files": {"node.yaml": NODE}}, timeout=30)
    assert reply.status_code == 201, reply.text
    root = reply.json()["stack"]["id"]
    faults: list[Fault] = []
    while len(faults) < KILLS:
        time.sleep(rng.uniform(0.3, 1.2))
        if cluster.live_workers():
            faults.append(cluster.kill9())
    deadline = time.monotonic() + QUIET_TIMEOUT
    while True:
        (row,) = cluster.query("SELECT status, action, status_reason FROM stacks WHERE id = :i",
                               i=root)
        held = cluster.query("SELECT id FROM resources WHERE lease_owner IS NOT NULL")
        if row.status != "IN_PROGRESS" and not held:
            break
        assert time.monotonic() < deadline, f"still {row.action}_{row.status}, {len(held)} held"
        time.sleep(0.5)
    assert (row.action, row.status) == ("CREATE", "COMPLETE"), row.status_reason
    tree = cluster.query("SELECT id, action, status, nested_depth FROM stacks "
                         "WHERE id = :i OR root_id = :i", i=root)
    assert len(tree) == 1 + 1 + MEMBERS  # the root, the group's stack, its members
    assert {(t.action, t.status) for t in tree} == {("CREATE", "COMPLETE")}
    members = [t.id for t in tree if t.nested_depth == 2]
    records = cluster.query("SELECT stack_id, name, physical_id FROM resources "
                            "WHERE stack_id = ANY(:ids) AND replaced_by IS NULL", ids=members)
    entities = cluster.query("SELECT id, owner FROM test_entities WHERE deleted_at IS NULL "
                             "AND split_part(owner, '/', 1) = ANY(:ids)", ids=members)
    assert len(records) == MEMBERS * PER_MEMBER
    assert sorted(e.id for e in entities) == sorted(str(r.physical_id) for r in records)
    made = cluster.query("SELECT owner, count(*) AS n FROM test_entities "
                         "WHERE split_part(owner, '/', 1) = ANY(:ids) GROUP BY owner",
                         ids=members)
    assert {m.n for m in made} == {1}  # no resource made twice, whatever the kills hit
    assert any(f.held for f in faults), "no kill found a lease held: it proved nothing"
