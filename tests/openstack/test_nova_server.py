"""Servers made, updated in place, resized, rebuilt, replaced, snapshotted and deleted by the
engine in the simulated cloud, told as stories and checked against what the cloud holds."""

from __future__ import annotations

import base64
import time

import pytest

from convergence.plugins.base import PluginContext
from convergence.plugins.openstack.nova_server import Server
from convergence.ports.clock import ManualClock
from convergence.runtime import Runtime
from convergence.services import stacks
from convergence.template.properties import with_defaults
from tests.corpus.corpus import ROOT as CORPUS
from tests.engine.harness import TENANT, Story, hot
from tests.openstack.conftest import Cloud

NET = """
net:
  type: OS::Neutron::Net
  properties: {name: app}
subnet:
  type: OS::Neutron::Subnet
  properties: {network: {get_resource: net}, cidr: 10.8.0.0/24}
"""


def server(flavor: str = "m1.tiny", image: str = "cirros", role: str = "web",
           name: str = "app-server", tags: str = "[blue]", networks: str = "",
           extra: str = "", resources: str = "", depends: str = "subnet",
           policy: str = "Delete") -> str:
    networks = networks or "[{network: {get_resource: net}}]"
    return hot(NET + resources + f"""
server:
  type: OS::Nova::Server
  depends_on: {depends}
  deletion_policy: {policy}
  properties:
    name: {name}
    image: {image}
    flavor: {flavor}
    networks: {networks}
    metadata: {{role: {role}, size: 3}}
    tags: {tags}
{extra}""")


def nova_ports(cloud: Cloud) -> list[str]:
    return [p.id for p in cloud.sdk.network.ports() if p.device_owner.startswith("compute:")]


def test_a_server_is_made_on_a_new_network_with_heat_attributes(
        story: Story, cloud: Cloud) -> None:
    story.create(server())
    assert story.finish().stack_status == "CREATE_COMPLETE"
    record = story.current()["server"]
    found = cloud.sdk.compute.get_server(record.physical_id)
    assert (found.name, found.status, found.flavor.name) == ("app-server", "ACTIVE", "m1.tiny")
    assert found.metadata == {"role": "web", "size": "3"}  # not a string: stored as JSON
    assert "blue" in found.tags and any(t.startswith("convergence:") for t in found.tags)
    net = story.current()["net"].physical_id
    address = found.addresses["app"][0]["addr"]
    attributes = record.attributes
    assert attributes["first_address"] == address
    assert address.startswith("10.8.0.")
    assert attributes["networks"] == {"app": [address], net: [address]}
    [interface] = cloud.sdk.compute.server_interfaces(found.id)
    assert attributes["addresses"]["app"][0]["port"] == interface.port_id
    assert attributes["addresses"][net] == attributes["addresses"]["app"]
    assert attributes["instance_name"] == found.instance_name
    assert attributes["instance_name"].startswith("instance-")
    assert attributes["tags"] == ["blue"]
    assert attributes["name"] == "app-server"
    assert attributes["show"]["id"] == found.id
    assert attributes["console_urls"] == {} and attributes["os_collect_config"] == {}
    assert [(e.action, e.status) for e in story.events() if e.resource_name == "server"] == \
        [("CREATE", "IN_PROGRESS"), ("CREATE", "COMPLETE")]

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.count("server") == 0
    assert cloud.sdk.compute.find_server(found.id) is None
    assert nova_ports(cloud) == []  # the port Nova made went with its server


def test_metadata_tags_and_name_change_in_place(story: Story, cloud: Cloud) -> None:
    story.create(server())
    story.finish()
    before = story.current()["server"].physical_id
    story.update(server(role="db", name="app-renamed", tags="[green]"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    record = story.current()["server"]
    assert record.physical_id == before
    found = cloud.sdk.compute.get_server(before)
    assert found.metadata == {"role": "db", "size": "3"}
    assert found.name == "app-renamed"
    assert "green" in found.tags and "blue" not in found.tags
    assert any(t.startswith("convergence:") for t in found.tags)  # the record's key stays
    assert record.attributes["tags"] == ["green"]
    assert record.attributes["name"] == "app-renamed"
    assert cloud.count("server") == 1


def test_a_flavor_change_resizes_the_server_in_place(story: Story, cloud: Cloud) -> None:
    story.create(server())
    story.finish()
    before = story.current()["server"].physical_id
    story.update(server(flavor="m1.small"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert story.current()["server"].physical_id == before
    found = cloud.sdk.compute.get_server(before)
    assert (found.flavor.name, found.status) == ("m1.small", "ACTIVE")  # confirmed
    assert cloud.count("server") == 1


def test_a_flavor_change_with_the_replace_policy_makes_a_new_server(
        story: Story, cloud: Cloud) -> None:
    policy = "    flavor_update_policy: REPLACE"
    story.create(server(extra=policy))
    story.finish()
    before = story.current()["server"].physical_id
    story.update(server(flavor="m1.small", extra=policy))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    after = story.current()["server"].physical_id
    assert after != before
    assert cloud.sdk.compute.find_server(before) is None
    assert cloud.sdk.compute.get_server(after).flavor.name == "m1.small"
    assert cloud.count("server") == 1


def test_a_server_marked_unhealthy_is_replaced_by_the_next_update(
        story: Story, cloud: Cloud) -> None:
    story.create(server())
    assert story.finish().stack_status == "CREATE_COMPLETE"
    before = story.current()["server"].physical_id
    stacks.mark_resource_health(story.rt, TENANT, story.name, "server", True, "disk errors")
    assert (story.current()["server"].action, story.current()["server"].status) == \
        ("CHECK", "FAILED")
    story.update(server())  # the same template: only the mark makes it act
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    after = story.current()["server"]
    assert after.physical_id != before and after.status == "COMPLETE"
    assert cloud.sdk.compute.find_server(before) is None
    assert cloud.sdk.compute.get_server(after.physical_id).status == "ACTIVE"
    assert cloud.count("server") == 1


def test_an_image_change_rebuilds_the_server(story: Story, cloud: Cloud) -> None:
    story.create(server(flavor="m1.small"))
    story.finish()
    before = story.current()["server"].physical_id
    story.update(server(flavor="m1.small", image="ubuntu"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert story.current()["server"].physical_id == before
    ubuntu = cloud.sdk.image.find_image("ubuntu")
    found = cloud.sdk.compute.get_server(before)
    assert (found.image.id, found.status) == (ubuntu.id, "ACTIVE")


def test_an_image_change_with_the_replace_policy_makes_a_new_server(
        story: Story, cloud: Cloud) -> None:
    policy = "    image_update_policy: REPLACE"
    story.create(server(flavor="m1.small", extra=policy))
    story.finish()
    before = story.current()["server"].physical_id
    story.update(server(flavor="m1.small", image="ubuntu", extra=policy))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert story.current()["server"].physical_id != before
    assert cloud.sdk.compute.find_server(before) is None


def test_a_server_that_goes_to_error_fails_with_the_fault_message(
        story: Story, cloud: Cloud) -> None:
    cloud.control.add_rule("error_after", kind="server", name="app-server", seconds=0,
                           message="No valid host was found.")
    story.create(server(), disable_rollback=True)
    assert story.finish().stack_status == "CREATE_FAILED"
    record = story.current()["server"]
    assert (record.action, record.status) == ("CREATE", "FAILED")
    assert "No valid host was found." in record.status_reason
    assert any(e.resource_name == "server" and e.status == "FAILED"
               and "No valid host was found." in e.reason for e in story.events())


def test_networks_change_by_attaching_and_detaching_interfaces(
        story: Story, cloud: Cloud) -> None:
    other = """
net2:
  type: OS::Neutron::Net
  properties: {name: back}
subnet2:
  type: OS::Neutron::Subnet
  properties: {network: {get_resource: net2}, cidr: 10.9.0.0/24}
"""
    story.create(server(resources=other))
    story.finish()
    before = story.current()["server"].physical_id
    [first] = nova_ports(cloud)

    both = "[{network: {get_resource: net}}, {network: {get_resource: net2}, " \
           "fixed_ip: 10.9.0.50}]"
    story.update(server(resources=other, networks=both, depends="[subnet, subnet2]"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    record = story.current()["server"]
    assert record.physical_id == before
    found = cloud.sdk.compute.get_server(before)
    assert sorted(found.addresses) == ["app", "back"]
    assert found.addresses["back"][0]["addr"] == "10.9.0.50"
    assert record.attributes["networks"]["back"] == ["10.9.0.50"]
    assert first in nova_ports(cloud)  # the interface the change kept was not touched

    story.update(server(resources=other, networks="[{network: {get_resource: net2}, "
                                                  "fixed_ip: 10.9.0.50}]",
                        depends="[subnet, subnet2]"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    found = cloud.sdk.compute.get_server(before)
    assert sorted(found.addresses) == ["back"]
    assert first not in nova_ports(cloud)  # detached, and Nova's port deleted with it
    assert len(nova_ports(cloud)) == 1


def test_a_subnet_entry_gets_a_port_of_the_servers_own_deleted_with_it(
        story: Story, cloud: Cloud) -> None:
    story.create(server(networks="[{subnet: {get_resource: subnet}, "
                                 "port_extra_properties: {admin_state_up: true}}]",
                        extra="    security_groups: [default]"))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    found = cloud.sdk.compute.get_server(story.current()["server"].physical_id)
    [port] = [p for p in cloud.sdk.network.ports() if p.name == "server-port-0"]
    assert port.device_id == found.id
    [group] = port.security_group_ids
    assert cloud.sdk.network.get_security_group(group).name == "default"
    assert any(t.startswith("convergence:") for t in port.tags)
    assert port.fixed_ips[0]["subnet_id"] == story.current()["subnet"].physical_id

    story.update(server(networks="[{subnet: {get_resource: subnet}, "
                                 "port_extra_properties: {admin_state_up: false}}]",
                        extra="    security_groups: [default]"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert cloud.sdk.network.get_port(port.id).is_admin_state_up is False  # in place
    assert cloud.sdk.network.get_port(port.id).device_id == found.id

    story.update(server(networks="[{network: {get_resource: net}, fixed_ip: 10.8.0.77}]",
                        extra="    security_groups: [default]"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert story.current()["server"].physical_id == found.id
    assert cloud.sdk.network.find_port(port.id) is None  # detached, then deleted
    assert cloud.sdk.compute.get_server(found.id).addresses["app"][0]["addr"] == "10.8.0.77"

    story.update(server(networks="[{subnet: {get_resource: subnet}}]",
                        extra="    security_groups: [default]"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    [again] = [p for p in cloud.sdk.network.ports() if p.name == "server-port-0"]
    assert again.device_id == found.id and nova_ports(cloud) == [again.id]
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.sdk.network.find_port(again.id) is None


def test_a_failed_create_is_made_anew_by_the_next_update(story: Story, cloud: Cloud) -> None:
    rule = cloud.control.add_rule("error_after", kind="server", name="app-server", seconds=0,
                                  message="No valid host was found.")
    story.create(server(), disable_rollback=True)
    assert story.finish().stack_status == "CREATE_FAILED"
    failed = story.current()["server"].physical_id
    cloud.control.remove_rule(rule.id)
    story.update(server())
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    made = story.current()["server"].physical_id
    assert made != failed
    assert cloud.sdk.compute.find_server(failed) is None  # the failure is not adopted
    assert cloud.sdk.compute.get_server(made).status == "ACTIVE"


def test_a_create_cut_short_finds_its_server_again(rt: Runtime, cloud: Cloud) -> None:
    plugin = Server()
    ctx = PluginContext(owner="direct-stack/7", stack_id="direct-stack", stack_name="direct",
                        resource_name="server", now=time.time, backends=rt.registry.backends)
    props = with_defaults(plugin.schema.properties, {
        "flavor": "m1.tiny", "image": "cirros", "networks": [{"allocate_network": "none"}]})
    first = plugin.create(ctx, props)
    again = plugin.create(ctx, props)  # as a worker that died before recording the first
    assert not first.done and again.physical_id == first.physical_id
    assert cloud.count("server") == 1
    assert plugin.delete(ctx, None, props).done  # with no id recorded: found by its tag
    assert cloud.count("server") == 0


USER_DATA = """    user_data: "#!/bin/sh\\necho {word}\\n"
    user_data_format: {form}
    user_data_update_policy: {policy}"""


@pytest.mark.parametrize(("policy", "form"), [("REPLACE", "RAW"), ("IGNORE", "HEAT_CFNTOOLS"),
                                               ("REBUILD", "SOFTWARE_CONFIG")])
def test_user_data_changes_follow_the_user_data_update_policy(
        story: Story, cloud: Cloud, policy: str, form: str) -> None:
    story.create(server(extra=USER_DATA.format(word="hello", form=form, policy=policy)))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    before = story.current()["server"].physical_id

    def sent(server_id: str) -> str:
        return base64.b64decode(cloud.sdk.compute.get_server(server_id).user_data).decode()

    assert "#!/bin/sh\necho hello\n" in sent(before)
    if form == "RAW":
        assert sent(before) == "#!/bin/sh\necho hello\n"
    else:  # a cloud-init multipart holding the script
        assert sent(before).startswith("Content-Type: multipart/mixed")
    story.update(server(extra=USER_DATA.format(word="again", form=form, policy=policy)))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    after = story.current()["server"].physical_id
    assert (after == before) is (policy != "REPLACE")
    assert ("echo again" in sent(after)) is (policy != "IGNORE")
    assert cloud.count("server") == 1


def test_a_server_boots_from_volumes(story: Story, cloud: Cloud, clock: ManualClock) -> None:
    cirros = cloud.sdk.image.find_image("cirros")
    given = cloud.sdk.block_storage.create_volume(size=1, image_id=cirros.id, name="given")
    clock.advance(5)
    assert cloud.sdk.block_storage.get_volume(given.id).status == "available"
    story.create(hot(NET + f"""
from_image:
  type: OS::Nova::Server
  depends_on: subnet
  properties:
    flavor: m1.tiny
    networks: [{{network: {{get_resource: net}}}}]
    block_device_mapping_v2: [{{image: cirros, volume_size: 2, delete_on_termination: true}}]
from_volume:
  type: OS::Nova::Server
  depends_on: subnet
  properties:
    flavor: m1.tiny
    networks: [{{network: {{get_resource: net}}}}]
    block_device_mapping: [{{device_name: vda, volume_id: {given.id}}}]
"""))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    records = story.current()
    made = cloud.sdk.compute.get_server(records["from_image"].physical_id)
    [volume] = made.attached_volumes
    assert cloud.sdk.block_storage.get_volume(volume["id"]).size == 2
    assert not getattr(made.image, "id", None)  # booted from the volume, not an image
    assert made.name.startswith("stack-from_image-")  # Heat's physical name
    booted = cloud.sdk.compute.get_server(records["from_volume"].physical_id)
    assert [v["id"] for v in booted.attached_volumes] == [given.id]

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    left = cloud.sdk.block_storage.find_volume(volume["id"])
    assert left is None or left.status == "deleting"  # delete_on_termination
    assert cloud.sdk.block_storage.get_volume(given.id).status == "available"  # kept


PORTED = """
port:
  type: OS::Neutron::Port
  properties:
    network: {get_resource: net}
    fixed_ips: [{subnet: {get_resource: subnet}}]
"""


def test_a_replacement_takes_over_the_port_of_the_server_it_replaces(
        story: Story, cloud: Cloud) -> None:
    policy = "    flavor_update_policy: REPLACE"
    ported = "[{port: {get_resource: port}}]"
    story.create(server(resources=PORTED, networks=ported, extra=policy))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    before = story.current()["server"].physical_id
    port = story.current()["port"].physical_id
    assert cloud.sdk.network.get_port(port).device_id == before

    story.update(server(flavor="m1.small", resources=PORTED, networks=ported, extra=policy))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    after = story.current()["server"].physical_id
    assert after != before
    assert cloud.sdk.compute.find_server(before) is None
    assert cloud.sdk.network.get_port(port).device_id == after
    assert [i.port_id for i in cloud.sdk.compute.server_interfaces(after)] == [port]
    assert cloud.count("server") == 1
    # The port was detached from the old server before the new one booted on it, which
    # Nova refuses while the port is bound elsewhere.
    calls = [(e.method, e.path, e.status) for e in cloud.control.journal(service="compute")]
    detached = calls.index(("DELETE", f"/compute/v2.1/servers/{before}/os-interface/{port}",
                            202))
    booted = [n for n, (method, path, status) in enumerate(calls)
              if (method, path, status) == ("POST", "/compute/v2.1/servers", 202)]
    assert booted[0] < detached < booted[1]


def test_the_snapshot_deletion_policy_keeps_an_image_of_the_server(
        story: Story, cloud: Cloud) -> None:
    story.create(server(policy="Snapshot"))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    server_id = story.current()["server"].physical_id
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.sdk.compute.find_server(server_id) is None
    [image] = [i for i in cloud.sdk.image.images() if i.name == "app-server"]
    assert (image.status, image.instance_uuid) == ("active", server_id)


TEMPLATES = CORPUS / "heat-templates" / "hot"


def test_heat_templates_servers_in_new_neutron_net(story: Story, cloud: Cloud) -> None:
    cloud.sdk.compute.create_keypair(name="demo")
    text = (TEMPLATES / "servers_in_new_neutron_net.yaml").read_text()
    story.create(text, parameters={
        "key_name": "demo", "image": "cirros", "flavor": "m1.tiny", "public_net": "public",
        "private_net_name": "private", "private_net_cidr": "10.10.0.0/24",
        "private_net_gateway": "10.10.0.1", "private_net_pool_start": "10.10.0.10",
        "private_net_pool_end": "10.10.0.100"})
    stack = story.finish()
    assert stack.stack_status == "CREATE_COMPLETE", stack.status_reason
    outputs = {key: output["value"] for key, output in stack.outputs.items()}
    records = story.current()
    for name in ("server1", "server2"):
        found = cloud.sdk.compute.get_server(records[name].physical_id)
        port = cloud.sdk.network.get_port(records[f"{name}_port"].physical_id)
        assert port.device_id == found.id
        assert outputs[f"{name}_private_ip"] == port.fixed_ips[0]["ip_address"]
        assert found.key_name == "demo"
        floating = outputs[f"{name}_public_ip"]
        assert floating in [a["addr"] for a in found.addresses["private"]]
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.count("server") == 0


def test_heat_templates_servers_in_existing_neutron_net(story: Story, cloud: Cloud) -> None:
    # The tenant network, its subnet and its router to the outside exist before the stack.
    sdk = cloud.sdk.network
    cloud.sdk.compute.create_keypair(name="demo")
    net = sdk.create_network(name="existing")
    subnet = sdk.create_subnet(network_id=net.id, cidr="10.12.0.0/24", ip_version=4)
    router = sdk.create_router(external_gateway_info={
        "network_id": sdk.find_network("public").id})
    sdk.add_interface_to_router(router, subnet_id=subnet.id)
    text = (TEMPLATES / "servers_in_existing_neutron_net.yaml").read_text()
    story.create(text, parameters={
        "key_name": "demo", "image": "cirros", "flavor": "m1.tiny",
        "public_net_id": sdk.find_network("public").id, "private_net_id": net.id,
        "private_subnet_id": subnet.id})
    stack = story.finish()
    assert stack.stack_status == "CREATE_COMPLETE", stack.status_reason
    outputs = {key: output["value"] for key, output in stack.outputs.items()}
    records = story.current()
    for name in ("server1", "server2"):
        found = cloud.sdk.compute.get_server(records[name].physical_id)
        fip = sdk.get_ip(records[f"{name}_floating_ip"].physical_id)
        assert fip.port_id == records[f"{name}_port"].physical_id
        assert outputs[f"{name}_public_ip"] == fip.floating_ip_address
        assert outputs[f"{name}_private_ip"] == fip.fixed_ip_address
        assert fip.floating_ip_address in [a["addr"] for a in found.addresses["existing"]]
        group = sdk.get_security_group(records["server_security_group"].physical_id)
        assert sdk.get_port(fip.port_id).security_group_ids == [group.id]
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.count("server") == 0 and cloud.count("floatingip") == 0
    assert sdk.find_network("existing") is not None  # not the stack's: left alone
