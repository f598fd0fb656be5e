"""Networks and subnets made, updated and deleted by the engine in the simulated cloud."""

from __future__ import annotations

import pytest

from convergence.template import TemplateError
from tests.engine.harness import Story, hot
from tests.openstack.conftest import Cloud

NET = """
net:
  type: OS::Neutron::Net
  properties: {{name: {name}, tags: [{tag}]}}
subnet:
  type: OS::Neutron::Subnet
  properties:
    network: {{get_resource: net}}
    cidr: 10.8.0.0/24
    dns_nameservers: [{dns}]
    name: app-v4
"""


def test_a_network_and_subnet_are_made_updated_in_place_and_deleted(
        story: Story, cloud: Cloud) -> None:
    story.create(hot(NET.format(name="app", tag="blue", dns="8.8.8.8")))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    records = story.current()
    net = cloud.sdk.network.get_network(records["net"].physical_id)
    subnet = cloud.sdk.network.get_subnet(records["subnet"].physical_id)
    assert (net.name, subnet.network_id, subnet.cidr) == ("app", net.id, "10.8.0.0/24")
    assert "blue" in net.tags and any(t.startswith("convergence:") for t in net.tags)
    assert records["subnet"].attributes["gateway_ip"] == "10.8.0.1"

    story.update(hot(NET.format(name="app2", tag="green", dns="1.1.1.1")))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    after = story.current()
    assert after["net"].physical_id == net.id  # in place
    assert after["subnet"].physical_id == subnet.id
    net = cloud.sdk.network.get_network(net.id)
    assert net.name == "app2" and "green" in net.tags and "blue" not in net.tags
    assert cloud.sdk.network.get_subnet(subnet.id).dns_nameservers == ["1.1.1.1"]

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.sdk.network.find_network(net.id) is None
    assert cloud.names("network") == ["public"]
    assert cloud.count("subnet") == 1  # public's own


def test_a_cidr_change_replaces_the_subnet(story: Story, cloud: Cloud) -> None:
    story.create(hot(NET.format(name="app", tag="blue", dns="8.8.8.8")))
    story.finish()
    old = story.current()["subnet"].physical_id
    story.update(hot(NET.format(name="app", tag="blue", dns="8.8.8.8")
                     .replace("10.8.0.0/24", "10.9.0.0/24")))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    new = story.current()["subnet"].physical_id
    assert new != old
    assert cloud.sdk.network.find_subnet(old) is None
    assert cloud.sdk.network.get_subnet(new).cidr == "10.9.0.0/24"


def test_a_subnet_on_a_network_that_does_not_exist_fails_saying_so(story: Story,
                                                                   cloud: Cloud) -> None:
    text = hot("""
subnet:
  type: OS::Neutron::Subnet
  properties: {network: short-lived, cidr: 10.70.0.0/24}
""")
    with pytest.raises(TemplateError) as caught:  # refused before anything is stored
        story.create(text.replace("short-lived", "no-such-network"))
    assert str(caught.value.problems[0]) == ("resources.subnet.properties.network: network "
                                             "'no-such-network' not found in the cloud")
    # A network there when the request was accepted and gone when the subnet is made.
    network = cloud.sdk.network.create_network(name="short-lived")
    story.create(text, disable_rollback=True)
    cloud.sdk.network.delete_network(network)
    stack = story.finish()
    assert stack.stack_status == "CREATE_FAILED"
    assert "short-lived" in stack.status_reason
    assert "engine fault" not in stack.status_reason and "Absent" not in stack.status_reason
