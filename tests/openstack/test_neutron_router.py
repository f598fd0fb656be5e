"""Routers, their interfaces and the floating IPs they carry, driven by the engine in the
simulated cloud: gateways changed in place, interfaces adopted and removed through Neutron's
refusals, floating IPs waiting for the router that reaches their port, and associations."""

from __future__ import annotations

from convergence.services import stacks
from tests.engine.harness import TENANT, Story, hot
from tests.openstack.conftest import Cloud

LAN = """
net:
  type: OS::Neutron::Net
  properties: {name: lan}
subnet:
  type: OS::Neutron::Subnet
  properties: {network: {get_resource: net}, cidr: 10.40.0.0/24}
router:
  type: OS::Neutron::Router
  properties:
    name: edge
    external_gateway_info: GATEWAY
iface:
  type: OS::Neutron::RouterInterface
  properties: {router: {get_resource: router}, subnet: {get_resource: subnet}}
  depends_on: IFACE_AFTER
host:
  type: OS::Neutron::Port
  properties:
    network: {get_resource: net}
    fixed_ips: [{subnet: {get_resource: subnet}}]
"""


def lan(gateway: str = "{network: public}", iface_after: str = "[subnet]",
        more: str = "") -> str:
    return hot(LAN.replace("GATEWAY", gateway).replace("IFACE_AFTER", iface_after) + more)


def test_a_routers_gateway_changes_in_place(story: Story, cloud: Cloud) -> None:
    story.create(lan())
    assert story.finish().stack_status == "CREATE_COMPLETE"
    router_id = story.current()["router"].physical_id
    public = cloud.sdk.network.find_network("public")
    gateway = cloud.sdk.network.get_router(router_id).external_gateway_info
    assert gateway["network_id"] == public.id and gateway["enable_snat"] is True

    story.update(lan(gateway="{network: public, enable_snat: false, external_fixed_ips: "
                             "[{ip_address: 172.24.4.77}]}"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    record = story.current()["router"]
    assert record.physical_id == router_id
    gateway = cloud.sdk.network.get_router(router_id).external_gateway_info
    assert gateway["enable_snat"] is False
    assert [ip["ip_address"] for ip in gateway["external_fixed_ips"]] == ["172.24.4.77"]
    assert record.attributes["external_gateway_info"]["enable_snat"] is False

    story.update(lan(gateway="null"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert story.current()["router"].physical_id == router_id
    assert cloud.sdk.network.get_router(router_id).external_gateway_info is None


def test_an_interface_whose_removal_is_refused_for_a_while_is_removed_in_the_end(
        story: Story, cloud: Cloud) -> None:
    story.create(lan())
    assert story.finish().stack_status == "CREATE_COMPLETE"
    router_id = story.current()["router"].physical_id
    cloud.control.add_rule("delete_conflict", kind="router_interface", count=2)

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.control.rules() == []  # refused twice, then asked again
    assert cloud.sdk.network.find_router(router_id) is None
    assert cloud.names("network") == ["public"] and cloud.count("router") == 0


def test_an_interface_the_router_already_has_is_adopted(story: Story, cloud: Cloud) -> None:
    sdk = cloud.sdk.network
    net = sdk.create_network(name="shared-lan")
    subnet = sdk.create_subnet(network_id=net.id, cidr="10.41.0.0/24", ip_version=4,
                               name="shared-v4")
    router = sdk.create_router(name="shared-edge")
    sdk.add_interface_to_router(router, subnet_id=subnet.id)  # as an interrupted attempt did

    story.create(hot("""
    iface:
      type: OS::Neutron::RouterInterface
      properties: {router: shared-edge, subnet: shared-v4}
    """))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    assert story.current()["iface"].physical_id == f"{router.id}:subnet_id={subnet.id}"
    assert len(list(sdk.ports(device_id=router.id))) == 1

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert list(sdk.ports(device_id=router.id)) == []
    assert sdk.get_router(router.id).name == "shared-edge"  # not the stack's


def test_an_interface_on_a_port(story: Story, cloud: Cloud) -> None:
    story.create(hot("""
    net:
      type: OS::Neutron::Net
    subnet:
      type: OS::Neutron::Subnet
      properties: {network: {get_resource: net}, cidr: 10.42.0.0/24}
    router:
      type: OS::Neutron::Router
    leg:
      type: OS::Neutron::Port
      properties:
        network: {get_resource: net}
        fixed_ips: [{subnet: {get_resource: subnet}, ip_address: 10.42.0.254}]
    iface:
      type: OS::Neutron::RouterInterface
      properties: {router_id: {get_resource: router}, port: {get_resource: leg}}
    """))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    records = story.current()
    router_id, port_id = records["router"].physical_id, records["leg"].physical_id
    assert records["iface"].physical_id == f"{router_id}:port_id={port_id}"
    port = cloud.sdk.network.get_port(port_id)
    assert (port.device_id, port.device_owner) == (router_id, "network:router_interface")

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.count("router") == 0 and cloud.names("network") == ["public"]


SLOW_IFACE = """
slow:
  type: OS::Heat::TestResource
  properties: {value: later, wait_secs: 30}
fip:
  type: OS::Neutron::FloatingIP
  properties: {floating_network: public, port_id: PORT}
"""


def test_a_floating_ip_comes_after_the_interface_that_reaches_its_port(
        story: Story, cloud: Cloud) -> None:
    # Nothing in the template orders the floating IP after the interface: Heat's implicit
    # dependency does (and deletes it first).
    story.create(lan(iface_after="[slow]",
                     more=SLOW_IFACE.replace("PORT", "{get_resource: host}")))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    records = story.current()
    fip = cloud.sdk.network.get_ip(records["fip"].physical_id)
    assert fip.port_id == records["host"].physical_id
    assert fip.router_id == records["router"].physical_id
    order = [(e.resource_name, e.status) for e in story.events() if e.action == "CREATE"]
    assert order.index(("iface", "COMPLETE")) < order.index(("fip", "IN_PROGRESS"))
    assert all(e.status != 404 for e in cloud.control.journal(service="network")
               if "/floatingips" in e.path)

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    order = [(e.resource_name, e.status) for e in story.events() if e.action == "DELETE"]
    assert order.index(("fip", "COMPLETE")) < order.index(("iface", "IN_PROGRESS"))
    assert cloud.count("floatingip") == 0 and cloud.count("router") == 0


def test_a_floating_ip_waits_for_the_router_that_reaches_its_port(
        story: Story, cloud: Cloud) -> None:
    # The port is named by a call no implicit dependency reads: the floating IP is made at
    # once and associated when the interface is there.
    story.create(lan(iface_after="[slow]",
                     more=SLOW_IFACE.replace("PORT", "{get_attr: [host, show, id]}")))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    records = story.current()
    fip = cloud.sdk.network.get_ip(records["fip"].physical_id)
    assert fip.port_id == records["host"].physical_id
    assert fip.router_id == records["router"].physical_id
    assert records["fip"].attributes["router_id"] == records["router"].physical_id
    tries = [e.status for e in cloud.control.journal(method="PUT")
             if e.path.endswith(f"/floatingips/{fip.id}")]
    assert tries[0] == 404 and tries[-1] == 200  # it did wait for the interface


def test_a_floating_ip_no_router_reaches_fails_with_the_clouds_message(
        story: Story, cloud: Cloud) -> None:
    story.create(hot("""
    net:
      type: OS::Neutron::Net
    subnet:
      type: OS::Neutron::Subnet
      properties: {network: {get_resource: net}, cidr: 10.43.0.0/24}
    port:
      type: OS::Neutron::Port
      properties: {network: {get_resource: net}, fixed_ips: [{subnet: {get_resource: subnet}}]}
    fip:
      type: OS::Neutron::FloatingIP
      properties: {floating_network: public, port_id: {get_resource: port}}
    """), disable_rollback=True)
    assert story.finish().stack_status == "CREATE_FAILED"
    reason = story.current()["fip"].status_reason
    assert "External network" in reason and "is not reachable from subnet" in reason, reason


ASSOCIATION = """
spare:
  type: OS::Neutron::Port
  properties:
    network: {get_resource: net}
    fixed_ips: [{subnet: {get_resource: subnet}}]
fip:
  type: OS::Neutron::FloatingIP
  properties: {floating_network: public}
  depends_on: [router]
"""
LINK = """
link:
  type: OS::Neutron::FloatingIPAssociation
  properties: {floatingip_id: {get_resource: fip}, port_id: {get_resource: PORT}}
  depends_on: [iface]
"""


def test_an_association_moves_a_floating_ip_and_takes_it_off_when_it_goes(
        story: Story, cloud: Cloud) -> None:
    story.create(lan(more=ASSOCIATION + LINK.replace("PORT", "host")))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    records = story.current()
    fip_id = records["fip"].physical_id
    assert records["link"].physical_id == fip_id
    assert cloud.sdk.network.get_ip(fip_id).port_id == records["host"].physical_id

    story.update(lan(more=ASSOCIATION + LINK.replace("PORT", "spare")))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert story.current()["link"].physical_id == fip_id  # in place
    assert cloud.sdk.network.get_ip(fip_id).port_id == records["spare"].physical_id

    story.update(lan(more=ASSOCIATION))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    fip = cloud.sdk.network.get_ip(fip_id)
    assert fip.port_id is None and fip.status == "DOWN"  # the floating IP itself stays

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.count("floatingip") == 0 and cloud.count("router") == 0


def test_a_check_sees_an_interface_and_a_name_changed_behind_its_back_and_converging_repairs(
        story: Story, cloud: Cloud) -> None:
    story.create(lan())
    assert story.finish().stack_status == "CREATE_COMPLETE"
    records = story.current()
    router_id, subnet_id = records["router"].physical_id, records["subnet"].physical_id
    sdk = cloud.sdk.network
    sdk.remove_interface_from_router(router_id, subnet_id=subnet_id)
    sdk.update_router(router_id, name="renamed")

    stacks.check_stack(story.rt, TENANT, story.name)
    assert story.finish().stack_status == "CHECK_FAILED"
    current = story.current()
    assert "has no interface" in current["iface"].status_reason
    assert "name is 'renamed', was 'edge'" in current["router"].status_reason
    assert (current["host"].action, current["host"].status) == ("CHECK", "COMPLETE")

    stacks.update_stack(story.rt, TENANT, story.name, existing=True, converge=True)
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert sdk.get_router(router_id).name == "edge"
    (port,) = sdk.ports(device_id=router_id, device_owner="network:router_interface")
    assert port.fixed_ips[0]["subnet_id"] == subnet_id
