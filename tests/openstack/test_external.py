"""External resources (``external_id``), as Heat takes them: the object is there already and
not the stack's; its attributes are read, nothing is made, and the stack's delete leaves it."""

from __future__ import annotations

from tests.engine.harness import Story
from tests.openstack.conftest import Cloud

TEMPLATE = """
heat_template_version: newton
parameters:
  server_id: {type: string}
resources:
  external_server:
    type: OS::Nova::Server
    external_id: {get_param: server_id}
outputs:
  address: {value: {get_attr: [external_server, first_address]}}
"""


def _server(cloud: Cloud) -> str:
    net = cloud.sdk.network.create_network(name="theirs")
    cloud.sdk.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.60.0.0/24")
    server = cloud.sdk.compute.create_server(
        name="theirs", flavor_id=cloud.sdk.compute.find_flavor("m1.tiny").id,
        image_id=cloud.sdk.image.find_image("cirros").id, networks=[{"uuid": net.id}])
    cloud.state.clock.advance(30)  # type: ignore[attr-defined]
    return str(server.id)


def test_an_external_server_is_adopted_read_and_left_behind(story: Story, cloud: Cloud) -> None:
    server_id = _server(cloud)
    story.create(TEMPLATE, parameters={"server_id": server_id})
    stack = story.finish()
    assert stack.stack_status == "CREATE_COMPLETE", stack.status_reason
    assert story.current()["external_server"].physical_id == server_id
    address = cloud.sdk.compute.get_server(server_id).addresses["theirs"][0]["addr"]
    assert stack.outputs["address"]["value"] == address
    assert [s.id for s in cloud.sdk.compute.servers()] == [server_id]  # nothing made
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.sdk.compute.get_server(server_id).status == "ACTIVE"  # not the stack's


def test_an_external_server_that_is_not_there_fails_saying_so(story: Story,
                                                              cloud: Cloud) -> None:
    story.create(TEMPLATE, parameters={"server_id": "no-such-server"}, disable_rollback=True)
    stack = story.finish()
    assert stack.stack_status == "CREATE_FAILED"
    assert "external server no-such-server not found" in stack.status_reason
    assert list(cloud.sdk.compute.servers()) == []
