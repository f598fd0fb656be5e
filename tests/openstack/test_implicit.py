"""Heat's implicit dependencies: a server and a port come after the subnets of their network,
a floating IP after the router interface and gateway that reach its port, without the
template saying so; one that would close a cycle is left out."""

from __future__ import annotations

from convergence.plugins.registry import PluginRegistry
from convergence.template import validate_stack
from tests.engine.harness import Story, hot
from tests.openstack.conftest import Cloud

NETWORK = """
net:
  type: OS::Neutron::Net
sub:
  type: OS::Neutron::Subnet
  properties: {network: {get_resource: net}, cidr: 10.9.0.0/24}
other:
  type: OS::Neutron::Subnet
  properties: {network: public, cidr: 10.10.0.0/24}
router:
  type: OS::Neutron::Router
  properties: {external_gateway_info: {network: public}}
iface:
  type: OS::Neutron::RouterInterface
  properties: {router: {get_resource: router}, subnet: {get_resource: sub}}
port:
  type: OS::Neutron::Port
  properties: {network: {get_resource: net}}
server:
  type: OS::Nova::Server
  properties:
    flavor: m1.tiny
    image: cirros
    networks: [{network: {get_resource: net}}, {port: {get_resource: port}}]
fip:
  type: OS::Neutron::FloatingIP
  properties: {floating_network: public, port_id: {get_resource: port}}
"""


def graph(text: str) -> dict[str, frozenset[str]]:
    registry = PluginRegistry.from_entry_points()
    return dict(validate_stack(text, catalog=registry).dependencies)


def test_the_implicit_dependencies_heat_adds() -> None:
    found = graph(hot(NETWORK))
    assert found["port"] == {"net", "sub"}
    assert found["server"] == {"net", "port", "sub"}
    assert found["fip"] == {"port", "iface", "router"}
    assert found["iface"] == {"router", "sub"}  # nothing implicit: nothing it would wait on


def test_an_implicit_dependency_that_would_close_a_cycle_is_left_out() -> None:
    text = hot(NETWORK.replace("  properties: {network: {get_resource: net}, cidr: 10.9.0.0/24}",
                               "  depends_on: [server]\n"
                               "  properties: {network: {get_resource: net}, cidr: 10.9.0.0/24}"))
    found = graph(text)
    assert "server" in found["sub"] and "sub" not in found["server"]


def test_a_server_on_a_new_network_boots_once_its_subnet_is_there(
        story: Story, cloud: Cloud) -> None:
    story.create(hot("""
net:
  type: OS::Neutron::Net
server:
  type: OS::Nova::Server
  properties:
    flavor: m1.tiny
    image: cirros
    networks: [{network: {get_resource: net}}]
sub:
  type: OS::Neutron::Subnet
  properties: {network: {get_resource: net}, cidr: 10.11.0.0/24}
"""))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    server = cloud.sdk.compute.get_server(story.current()["server"].physical_id)
    (addresses,) = server.addresses.values()
    assert addresses[0]["addr"].startswith("10.11.0.")
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.count("server") == 0 and cloud.names("network") == ["public"]
