"""Ports, with the network around them, made, updated and deleted by the engine in the
simulated cloud: the story of an application's network, from a private subnet routed to
``public`` to a port with its security group and a floating IP, and back to nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from convergence.plugins.base import PluginContext
from convergence.plugins.openstack.neutron_floatingip import FloatingIP
from convergence.plugins.openstack.neutron_port import Port
from convergence.plugins.openstack.neutron_router import Router, RouterInterface
from convergence.plugins.openstack.neutron_secgroup import SecurityGroup, SecurityGroupRule
from convergence.plugins.openstack.resource import OpenStackResource
from convergence.ports.clock import ManualClock
from convergence.runtime import Runtime
from convergence.template.properties import with_defaults
from tests.engine.harness import Story, hot
from tests.openstack.conftest import Cloud

APP = """
net:
  type: OS::Neutron::Net
  properties: {name: app}
subnet:
  type: OS::Neutron::Subnet
  properties: {network: {get_resource: net}, cidr: 10.20.0.0/24, name: app-v4}
router:
  type: OS::Neutron::Router
  properties:
    name: app-router
    external_gateway_info: {network: public}
iface:
  type: OS::Neutron::RouterInterface
  properties: {router: {get_resource: router}, subnet: {get_resource: subnet}}
web:
  type: OS::Neutron::SecurityGroup
  properties:
    name: web
    rules: [{protocol: tcp, port_range_min: 80, port_range_max: 80}]
db:
  type: OS::Neutron::SecurityGroup
  properties:
    name: db
    rules: [{protocol: tcp, port_range_min: 5432, port_range_max: 5432}]
port:
  type: OS::Neutron::Port
  properties:
    name: front
    network: {get_resource: net}
    fixed_ips: [{subnet: {get_resource: subnet}, ip_address: 10.20.0.10}]
    security_groups: [GROUPS]
    tags: [front]
spare:
  type: OS::Neutron::Port
  properties:
    name: spare
    network: {get_attr: [net, name]}  # by name, as the cloud has it then
    fixed_ips: [{subnet: {get_resource: subnet}}]
    security_groups: [{get_attr: [db, show, name]}]
  depends_on: [db]
fip:
  type: OS::Neutron::FloatingIP
  properties:
    floating_network: public
    port_id: {get_resource: FIP_PORT}
  depends_on: [iface]
"""


def app(groups: str = "{get_resource: web}", fip_port: str = "port") -> str:
    return hot(APP.replace("GROUPS", groups).replace("FIP_PORT", fip_port))


def owned(tags: list[str]) -> bool:
    return any(t.startswith("convergence:") for t in tags)


def test_an_application_network_is_made_updated_in_place_and_deleted(
        story: Story, cloud: Cloud) -> None:
    story.create(app())
    assert story.finish().stack_status == "CREATE_COMPLETE"
    records = story.current()
    sdk = cloud.sdk.network
    public = sdk.find_network("public")
    port = sdk.get_port(records["port"].physical_id)
    subnet = sdk.get_subnet(records["subnet"].physical_id)
    web = sdk.get_security_group(records["web"].physical_id)
    assert port.fixed_ips == [{"subnet_id": subnet.id, "ip_address": "10.20.0.10"}]
    assert port.security_group_ids == [web.id]
    assert port.name == "front" and "front" in port.tags and owned(port.tags)
    assert records["port"].attributes["fixed_ips"][0]["ip_address"] == "10.20.0.10"
    assert records["port"].attributes["subnets"][0]["cidr"] == "10.20.0.0/24"
    assert records["port"].attributes["network"]["name"] == "app"

    router = sdk.get_router(records["router"].physical_id)
    assert router.external_gateway_info["network_id"] == public.id
    assert owned(router.tags)
    assert records["iface"].physical_id == f"{router.id}:subnet_id={subnet.id}"
    (interface,) = sdk.ports(device_id=router.id, device_owner="network:router_interface")
    assert interface.fixed_ips[0]["ip_address"] == "10.20.0.1"

    fip = sdk.get_ip(records["fip"].physical_id)
    assert (fip.port_id, fip.fixed_ip_address, fip.router_id) == (port.id, "10.20.0.10",
                                                                  router.id)
    assert fip.floating_network_id == public.id and owned(fip.tags)
    assert records["fip"].attributes["floating_ip_address"] == fip.floating_ip_address
    assert records["spare"].attributes["security_groups"] == [records["db"].physical_id]

    # The port joins a second group, the floating IP moves to the spare port: in place.
    story.update(app(groups="{get_resource: web}, db", fip_port="spare"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    after = story.current()
    assert {n: r.physical_id for n, r in after.items()} == \
        {n: r.physical_id for n, r in records.items()}
    assert set(sdk.get_port(port.id).security_group_ids) == {web.id,
                                                             records["db"].physical_id}
    moved = sdk.get_ip(fip.id)
    assert moved.port_id == records["spare"].physical_id
    assert moved.floating_ip_address == fip.floating_ip_address
    assert after["fip"].attributes["port_id"] == records["spare"].physical_id

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.names("network") == ["public"]
    assert cloud.count("subnet") == 1  # public's own
    assert cloud.count("router") == 0 and cloud.count("floatingip") == 0
    assert all(p.network_id == public.id for p in sdk.ports())
    assert [g.name for g in sdk.security_groups()] == ["default"]


PORT = """
net:
  type: OS::Neutron::Net
  properties: {name: app}
other:
  type: OS::Neutron::Net
  properties: {name: other}
subnet:
  type: OS::Neutron::Subnet
  properties: {network: {get_resource: net}, cidr: 10.30.0.0/24}
other_subnet:
  type: OS::Neutron::Subnet
  properties: {network: {get_resource: other}, cidr: 10.31.0.0/24}
port:
  type: OS::Neutron::Port
  properties:
    network: PORT_NET
    fixed_ips: [{subnet: SUBNET, ip_address: ADDRESS}]
    allowed_address_pairs: [{ip_address: 10.30.0.200}]
    POLICY
  depends_on: [subnet, other_subnet]
"""


def port(address: str = "10.30.0.5", net: str = "{get_resource: net}",
         subnet: str = "{get_resource: subnet}", policy: str = "name: lone") -> str:
    return hot(PORT.replace("PORT_NET", net).replace("SUBNET", subnet)
               .replace("ADDRESS", address).replace("POLICY", policy))


def test_a_fixed_ip_changes_in_place_and_another_network_replaces_the_port(
        story: Story, cloud: Cloud) -> None:
    story.create(port())
    assert story.finish().stack_status == "CREATE_COMPLETE"
    first = story.current()["port"].physical_id
    found = cloud.sdk.network.get_port(first)
    assert found.fixed_ips[0]["ip_address"] == "10.30.0.5"
    assert found.allowed_address_pairs[0]["ip_address"] == "10.30.0.200"
    assert found.security_group_ids == [cloud.sdk.network.find_security_group("default").id]

    story.update(port(address="10.30.0.6"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert story.current()["port"].physical_id == first
    assert cloud.sdk.network.get_port(first).fixed_ips[0]["ip_address"] == "10.30.0.6"

    story.update(port(address="10.31.0.6", net="{get_resource: other}",
                      subnet="{get_resource: other_subnet}"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    second = story.current()["port"].physical_id
    assert second != first
    assert cloud.sdk.network.find_port(first) is None
    assert cloud.sdk.network.get_port(second).fixed_ips[0]["ip_address"] == "10.31.0.6"


def test_replace_always_replaces_the_port_on_any_change(story: Story, cloud: Cloud) -> None:
    story.create(port(policy="name: lone\n    replacement_policy: REPLACE_ALWAYS"))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    first = story.current()["port"].physical_id
    story.update(port(address="10.30.0.7",
                      policy="name: lone\n    replacement_policy: REPLACE_ALWAYS"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    second = story.current()["port"].physical_id
    assert second != first and cloud.sdk.network.find_port(first) is None
    assert cloud.sdk.network.get_port(second).fixed_ips[0]["ip_address"] == "10.30.0.7"


def test_an_address_another_port_holds_fails_with_the_clouds_message(
        story: Story, cloud: Cloud) -> None:
    story.create(port(address="10.30.0.2"), disable_rollback=True)  # DHCP's port has it
    stack = story.finish()
    assert stack.stack_status == "CREATE_FAILED"
    reason = story.current()["port"].status_reason
    assert "IP address 10.30.0.2 already allocated in subnet" in reason, reason


def _twice(rt: Runtime, clock: ManualClock, plugin: OpenStackResource,
           props: Mapping[str, Any], key: str) -> tuple[str | None, str | None]:
    """Create as a step does, then again as the same record's step repeats it after an
    interruption (the first result never recorded)."""
    ctx = PluginContext(owner=f"stack-id/{key}", stack_id="stack-id", stack_name="crashy",
                        resource_name=key, now=clock.now, backends=rt.registry.backends)
    full = with_defaults(plugin.schema.properties, dict(props))
    first = plugin.create(ctx, full).physical_id
    clock.advance(10)
    second = plugin.create(ctx, full).physical_id
    return first, second


def test_a_repeated_create_adopts_what_the_first_made(
        rt: Runtime, cloud: Cloud, clock: ManualClock) -> None:
    sdk = cloud.sdk.network
    net = sdk.create_network(name="again")
    subnet = sdk.create_subnet(network_id=net.id, cidr="10.50.0.0/24", ip_version=4,
                               enable_dhcp=False)
    ports = _twice(rt, clock, Port(), {"network": "again"}, "port")
    assert ports[0] == ports[1] and len(list(sdk.ports(network_id=net.id))) == 1
    routers = _twice(rt, clock, Router(), {"external_gateway_info": {"network": "public"}},
                     "router")
    assert routers[0] == routers[1] and cloud.count("router") == 1
    ifaces = _twice(rt, clock, RouterInterface(), {"router": routers[0], "subnet": subnet.id},
                    "iface")
    assert ifaces[0] == ifaces[1] == f"{routers[0]}:subnet_id={subnet.id}"
    fips = _twice(rt, clock, FloatingIP(), {"floating_network": "public",
                                            "port_id": ports[0]}, "fip")
    assert fips[0] == fips[1] and cloud.count("floatingip") == 1
    assert sdk.get_ip(str(fips[0])).port_id == ports[0]
    rules = [{"protocol": "tcp", "port_range_min": 22, "port_range_max": 22}]
    groups = _twice(rt, clock, SecurityGroup(), {"rules": rules}, "group")
    assert groups[0] == groups[1]
    assert len(list(sdk.security_group_rules(security_group_id=groups[0]))) == 3
    assert sdk.get_security_group(str(groups[0])).name.startswith("crashy-group-")
    added = _twice(rt, clock, SecurityGroupRule(), {"security_group": groups[0],
                                                    "port_range_min": 443,
                                                    "port_range_max": 443}, "rule")
    assert added[0] == added[1]
    assert len(list(sdk.security_group_rules(security_group_id=groups[0]))) == 4
