"""A real stack on the integration tier: PostgreSQL, Redis, worker processes, and the
simulated cloud they all reach as their cloud (``OS_CLOUD``), looked at through the test's own
openstacksdk connection.

A network, subnet, router and security group; three servers on ports of their own, each with
a volume and a floating IP. Created; updated (a flavor change replaces a server and its volume
moves to the replacement, metadata changes in place, a network is added to a server); a
server deleted behind the engine's back is found by ``stack check`` and recreated by
``--converge``, another by the observer; deleted, with nothing of it left in the cloud.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import openstack
import pytest

from convergence.services import queries, stacks
from tests.engine.harness import TENANT, Story
from tests.integration.conftest import WAIT_TIMEOUT, Cluster

SERVERS = 3
KINDS = ("server", "port", "network", "subnet", "router", "floatingip", "volume",
         "volume_attachment", "security_group")


def template(flavor0: str = "m1.tiny", role1: str = "web", second_network: bool = False) -> str:
    extra = """
  net2:
    type: OS::Neutron::Net
  sub2:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net2}, cidr: 10.61.0.0/24}
""" if second_network else ""
    text = f"""heat_template_version: 2018-08-31
resources:
  net:
    type: OS::Neutron::Net
  sub:
    type: OS::Neutron::Subnet
    properties: {{network: {{get_resource: net}}, cidr: 10.60.0.0/24}}
  router:
    type: OS::Neutron::Router
    properties: {{external_gateway_info: {{network: public}}}}
  iface:
    type: OS::Neutron::RouterInterface
    properties: {{router: {{get_resource: router}}, subnet: {{get_resource: sub}}}}
  web_sg:
    type: OS::Neutron::SecurityGroup
    properties:
      rules: [{{protocol: tcp, port_range_min: 22, port_range_max: 22}}]
{extra}"""
    for i in range(SERVERS):
        flavor = flavor0 if i == 0 else "m1.tiny"
        role = role1 if i == 1 else "web"
        networks = "[{port: {get_resource: port" + str(i) + "}}"
        if second_network and i == 2:
            networks += ", {network: {get_resource: net2}}"
        networks += "]"
        text += f"""
  port{i}:
    type: OS::Neutron::Port
    properties: {{network: {{get_resource: net}}, security_groups: [{{get_resource: web_sg}}]}}
  server{i}:
    type: OS::Nova::Server
    properties:
      flavor: {flavor}
      flavor_update_policy: REPLACE
      image: cirros
      networks: {networks}
      metadata: {{role: {role}}}
  vol{i}:
    type: OS::Cinder::Volume
    properties: {{size: 1}}
  attach{i}:
    type: OS::Cinder::VolumeAttachment
    properties: {{instance_uuid: {{get_resource: server{i}}}, volume_id: {{get_resource: vol{i}}}}}
  fip{i}:
    type: OS::Neutron::FloatingIP
    properties: {{floating_network: public, port_id: {{get_resource: port{i}}}}}
"""
    return text


@pytest.fixture
def sdk(cluster: Cluster) -> Iterator[Any]:
    from openstack.config import loader

    region = loader.OpenStackConfig(config_files=[str(cluster.clouds_file)],
                                    load_envvars=False).get_one(cloud="simcloud")
    conn = openstack.connection.Connection(config=region)
    yield conn
    conn.close()


def counts(cluster: Cluster) -> dict[str, int]:
    """The cloud's objects by kind, but the default security group a project gets from the
    cloud itself on first use."""
    with cluster.cloud.locked():
        return {kind: sum(1 for o in cluster.cloud.kind(kind).values()
                          if kind != "security_group" or o.get("name") != "default")
                for kind in KINDS}


def wait_until(predicate: Any, what: str, cluster: Cluster) -> Any:
    deadline = time.monotonic() + WAIT_TIMEOUT
    while not (found := predicate()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not reached\n" + cluster.logs_tail(), pytrace=False)
        time.sleep(0.2)
    return found


def why(story: Story) -> list[tuple[str, str, str, str]]:
    return [(e.resource_name, e.action, e.status, e.reason) for e in story.events()
            if e.status == "FAILED"]


def test_servers_with_ports_volumes_and_floating_ips_on_workers(
        story: Story, cluster: Cluster, sdk: Any) -> None:
    before = counts(cluster)
    story.create(template(), observe=True)
    done = story.finish()
    assert done.stack_status == "CREATE_COMPLETE", why(story)
    records = story.current()
    servers = {i: sdk.compute.get_server(records[f"server{i}"].physical_id)
               for i in range(SERVERS)}
    assert all(s.status == "ACTIVE" for s in servers.values())
    for i in range(SERVERS):
        fip = sdk.network.get_ip(records[f"fip{i}"].physical_id)
        port = sdk.network.get_port(records[f"port{i}"].physical_id)
        assert fip.port_id == port.id and port.device_id == servers[i].id
        assert port.security_group_ids == [records["web_sg"].physical_id]
        volume = sdk.block_storage.get_volume(records[f"vol{i}"].physical_id)
        assert volume.status == "in-use"
        assert [a["server_id"] for a in volume.attachments] == [servers[i].id]

    # Update: server0 replaced (flavor), server1's metadata in place, server2 on a new network.
    story.update(template(flavor0="m1.small", role1="db", second_network=True))
    assert story.finish().stack_status == "UPDATE_COMPLETE", why(story)
    now = story.current()
    new0 = sdk.compute.get_server(now["server0"].physical_id)
    assert new0.id != servers[0].id and new0.flavor["original_name"] == "m1.small"
    assert sdk.compute.find_server(servers[0].id) is None  # the old one is gone
    volume0 = sdk.block_storage.get_volume(now["vol0"].physical_id)
    assert [a["server_id"] for a in volume0.attachments] == [new0.id]
    assert sdk.network.get_port(now["port0"].physical_id).device_id == new0.id
    assert sdk.network.get_ip(now["fip0"].physical_id).port_id == now["port0"].physical_id
    server1 = sdk.compute.get_server(now["server1"].physical_id)
    assert server1.id == servers[1].id and server1.metadata == {"role": "db"}
    server2 = sdk.compute.get_server(now["server2"].physical_id)
    assert server2.id == servers[2].id and len(server2.addresses) == 2

    # server1 vanishes behind the engine's back (the observer told to look away): check
    # finds it (and its volume's attachment gone with it), --converge makes it again.
    stacks.update_stack(story.rt, TENANT, story.name, None, existing=True, observe=False)
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    sdk.compute.delete_server(server1.id)
    wait_until(lambda: sdk.compute.find_server(server1.id) is None, "server1 gone", cluster)
    stacks.check_stack(story.rt, TENANT, story.name)
    assert story.finish().stack_status == "CHECK_FAILED"
    failed = {e.resource_name for e in story.events()
              if e.action == "CHECK" and e.status == "FAILED"}
    assert failed == {story.name, "server1", "attach1"}
    stacks.update_stack(story.rt, TENANT, story.name, None, existing=True, converge=True)
    assert story.finish().stack_status == "UPDATE_COMPLETE", why(story)
    again = story.current()["server1"].physical_id
    assert again != server1.id and sdk.compute.get_server(again).status == "ACTIVE"
    assert sdk.block_storage.get_volume(now["vol1"].physical_id).attachments[0][
        "server_id"] == again

    # The observer (the stack opts in again) repairs server2 by itself.
    stacks.update_stack(story.rt, TENANT, story.name, None, existing=True, observe=True)
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    generation = story.stack().generation
    sdk.compute.delete_server(server2.id)
    repaired = wait_until(
        lambda: (s := story.stack()).generation > generation and s.status == "COMPLETE"
        and s.observed_generation == s.generation and story.current()["server2"].physical_id
        != server2.id and story.current()["server2"].physical_id, "the observer's repair",
        cluster)
    assert sdk.compute.get_server(repaired).status == "ACTIVE"
    view = queries.get_stack(story.rt, TENANT, story.name)
    assert view.action == "UPDATE"  # the observer's generation is an update, like any other

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE", why(story)
    assert counts(cluster) == before
