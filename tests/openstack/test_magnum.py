"""The Magnum example (``examples/magnum``) against the simulated cloud, on the embedded tier:
a Kubernetes-style cluster of node groups, each node a nested stack of a port and a server.

What is checked is what the cloud holds, read through the test's own openstacksdk: the
servers of each group with their flavor and zone, their addresses in the stack's outputs; a
worker group scaled from 5 to 50 and back to 10 with named members removed (gone from the
cloud, their names never used again); and a new image rolled through the workers with never
more than one node of a group down at any moment, sampled from the cloud between every two
pieces of the engine's work.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from convergence.ports.clock import ManualClock
from convergence.runtime import Runtime
from convergence_simcloud.client import SimControl
from convergence_simcloud.seed import Seed, default_quota
from convergence_simcloud.serve import clouds_yaml
from convergence_simcloud.serve import running as serving
from convergence_simcloud.state import Options, SimCloud
from tests.engine.harness import Story
from tests.openstack.conftest import Cloud, _region

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "magnum"


@pytest.fixture
def cloud(clock: ManualClock, tmp_path: Path) -> Iterator[Cloud]:
    """A cloud with room for a 60-node cluster."""
    import openstack

    quota = {**default_quota(), "instances": 200, "cores": 2000, "ram": 10_000_000}
    state = SimCloud(Seed(compute_quota=quota), options=Options(build_seconds=20.0),
                     clock=clock)
    with serving(state) as url:
        path = tmp_path / "clouds.yaml"
        path.write_text(clouds_yaml(url))
        sdk = openstack.connection.Connection(config=_region(path))
        yield Cloud(state, url, SimControl(url), sdk, path)
        sdk.close()


def files() -> dict[str, str]:
    return {"node.yaml": (EXAMPLE / "node.yaml").read_text()}


def template() -> str:
    return (EXAMPLE / "cluster.yaml").read_text()


def servers(cloud: Cloud) -> list[Any]:
    return list(cloud.sdk.compute.servers(details=True))


def group_of(server: Any) -> str:
    meta = server.metadata or {}
    if meta.get("role") == "master":
        return "masters"
    return "workers_a" if server.availability_zone == "nova" else "workers_b"


def outputs(story: Story) -> dict[str, Any]:
    return {k: v["value"] for k, v in story.stack().outputs.items()}


def create(story: Story) -> None:
    story.create(template(), files=files())
    done = story.finish()
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason


def test_the_cluster_is_its_node_groups_in_the_cloud(story: Story, cloud: Cloud) -> None:
    create(story)
    found = servers(cloud)
    assert Counter(group_of(s) for s in found) == {"masters": 3, "workers_a": 5,
                                                  "workers_b": 3}
    flavors = {(group_of(s), s.flavor["original_name"], s.availability_zone) for s in found}
    assert flavors == {("masters", "m1.small", "nova"), ("workers_a", "m1.small", "nova"),
                       ("workers_b", "m1.medium", "az2")}
    assert all(s.status == "ACTIVE" for s in found)
    out = outputs(story)
    addresses = {ip["ip_address"] for p in cloud.sdk.network.ports()
                 for ip in p.fixed_ips if p.device_owner == "compute:nova" or p.device_id}
    listed = out["master_addresses"] + out["worker_a_addresses"] + out["worker_b_addresses"]
    assert len(listed) == 11 and set(listed) <= addresses
    assert out["api_address"]
    assert out["worker_a_members"] == [f"wa-{i}" for i in range(5)]


def test_a_worker_group_scales_out_and_back_removing_named_members(story: Story,
                                                                   cloud: Cloud) -> None:
    create(story)
    story.update(None, existing=True, parameters={"worker_a_count": 50})
    grown = story.finish()
    assert grown.stack_status == "UPDATE_COMPLETE", grown.status_reason
    assert Counter(group_of(s) for s in servers(cloud))["workers_a"] == 50
    assert len(outputs(story)["worker_a_addresses"]) == 50
    before = {m: ip for m, ip in zip(outputs(story)["worker_a_members"],
                                     outputs(story)["worker_a_addresses"], strict=True)}
    story.update(None, existing=True, parameters={"worker_a_count": 10,
                                                  "worker_a_removals": "wa-3,wa-7"})
    shrunk = story.finish()
    assert shrunk.stack_status == "UPDATE_COMPLETE", shrunk.status_reason
    members = outputs(story)["worker_a_members"]
    assert members == ["wa-0", "wa-1", "wa-2", "wa-4", "wa-5", "wa-6", "wa-8", "wa-9",
                       "wa-10", "wa-11"]
    assert Counter(group_of(s) for s in servers(cloud)) == {"masters": 3, "workers_a": 10,
                                                           "workers_b": 3}
    # The members that stayed kept their nodes (the same addresses); removed ones are gone.
    assert dict(zip(members, outputs(story)["worker_a_addresses"], strict=True)) == \
        {m: before[m] for m in members}
    story.update(None, existing=True, parameters={"worker_a_count": 12})
    story.finish()
    assert outputs(story)["worker_a_members"][-2:] == ["wa-50", "wa-51"]  # never reused


def test_a_new_image_rolls_through_the_workers_one_node_at_a_time(
        story: Story, cloud: Cloud, rt: Runtime) -> None:
    create(story)
    image = {i.name: i.id for i in cloud.sdk.image.images()}["ubuntu"]
    story.update(None, existing=True, parameters={"worker_image": "ubuntu"})
    most: Counter[str] = Counter()
    samples = 0

    def sample() -> bool:
        nonlocal samples
        samples += 1
        down = Counter(group_of(s) for s in servers(cloud) if s.status != "ACTIVE")
        for group, n in down.items():
            most[group] = max(most[group], n)
        return story.stack().status != "IN_PROGRESS"

    assert rt.inprocess is not None
    assert rt.inprocess.run(until=sample)
    done = story.stack()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    workers = [s for s in servers(cloud) if group_of(s) != "masters"]
    assert len(workers) == 8 and all(s.image["id"] == image for s in workers)
    assert all(s.image["id"] != image for s in servers(cloud) if group_of(s) == "masters")
    assert samples > 20
    assert most["workers_a"] == 1 and most["workers_b"] == 1  # never two down at once
    assert most["masters"] == 0
