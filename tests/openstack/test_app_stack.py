"""The whole application stack of the integration tier's cloud scenario, on the embedded tier
(SQLite, the in-process dispatcher, one clock for the engine and the cloud): a network,
subnet, router and security group; three servers on ports, each with a volume and a floating
IP; created, updated (a server replaced, one changed in place, one on a second network), a
server deleted behind the engine's back found by ``check`` and made again by ``--converge``,
another repaired by the observer, and deleted with nothing left in the cloud."""

from __future__ import annotations

from convergence.engine.observer import Observer
from convergence.runtime import Runtime
from convergence.services import stacks
from tests.engine.harness import TENANT, Story
from tests.integration.test_cloud_distributed import SERVERS, template
from tests.openstack.conftest import Cloud

KINDS = ("server", "port", "network", "subnet", "router", "floatingip", "volume",
         "security_group")


def counts(cloud: Cloud) -> dict[str, int]:
    with cloud.state.locked():
        return {kind: sum(1 for o in cloud.state.kind(kind).values()
                          if kind != "security_group" or o.get("name") != "default")
                for kind in KINDS}


def test_the_application_stack_on_the_embedded_tier(
        story: Story, cloud: Cloud, rt: Runtime) -> None:
    sdk = cloud.sdk
    before = counts(cloud)
    story.create(template(), observe=True)
    assert story.finish().stack_status == "CREATE_COMPLETE"
    records = story.current()
    servers = [sdk.compute.get_server(records[f"server{i}"].physical_id)
               for i in range(SERVERS)]
    for i, server in enumerate(servers):
        assert server.status == "ACTIVE"
        assert sdk.network.get_ip(records[f"fip{i}"].physical_id).port_id == \
            records[f"port{i}"].physical_id
        volume = sdk.block_storage.get_volume(records[f"vol{i}"].physical_id)
        assert [a["server_id"] for a in volume.attachments] == [server.id]

    story.update(template(flavor0="m1.small", role1="db", second_network=True), observe=False)
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    now = story.current()
    new0 = sdk.compute.get_server(now["server0"].physical_id)
    assert new0.id != servers[0].id and sdk.compute.find_server(servers[0].id) is None
    assert [a["server_id"] for a in sdk.block_storage.get_volume(
        now["vol0"].physical_id).attachments] == [new0.id]
    assert sdk.compute.get_server(now["server1"].physical_id).metadata == {"role": "db"}
    assert now["server1"].physical_id == servers[1].id
    assert len(sdk.compute.get_server(now["server2"].physical_id).addresses) == 2

    sdk.compute.delete_server(servers[1].id)
    stacks.check_stack(rt, TENANT, story.name)
    assert story.finish().stack_status == "CHECK_FAILED"
    stacks.update_stack(rt, TENANT, story.name, None, existing=True, converge=True)
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    again = story.current()["server1"].physical_id
    assert again != servers[1].id and sdk.compute.get_server(again).status == "ACTIVE"

    stacks.update_stack(rt, TENANT, story.name, None, existing=True, observe=True)
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    sdk.compute.delete_server(servers[2].id)
    report = Observer(rt.engine, period=60.0).observe(force=True)
    assert {f.record.name for f in report.findings} >= {"server2"}
    rt.dispatcher.dispatch(report.work)
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    repaired = story.current()["server2"].physical_id
    assert repaired != servers[2].id and sdk.compute.get_server(repaired).status == "ACTIVE"

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert counts(cloud) == before
