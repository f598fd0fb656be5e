"""Custom constraints checked against the cloud when a template is accepted: a flavor, an
image, a network or a key pair the cloud does not have refuses the request with an error
naming the property (or the parameter), and nothing is stored or made. The common ones
(addresses, CIDRs, DNS names) need no cloud."""

from __future__ import annotations

import pytest

from convergence.errors import NotFound
from convergence.runtime import Runtime
from convergence.services import queries, templates
from convergence.template import TemplateError
from tests.engine.harness import TENANT, Story, hot
from tests.openstack.conftest import Cloud

SERVER = """
net:
  type: OS::Neutron::Net
server:
  type: OS::Nova::Server
  properties:
    flavor: {flavor}
    image: {image}
    key_name: {key}
    networks: [{{network: {network}}}]
"""


def server(flavor: str = "m1.small", image: str = "cirros", key: str = "mine",
           network: str = "public") -> str:
    return hot(SERVER.format(flavor=flavor, image=image, key=key, network=network))


def refusal(story: Story, text: str, **kwargs: object) -> list[str]:
    with pytest.raises(TemplateError) as caught:
        story.create(text, **kwargs)
    return [str(p) for p in caught.value.problems]


@pytest.fixture
def key(cloud: Cloud) -> str:
    cloud.sdk.compute.create_keypair(name="mine")
    return "mine"


def test_what_the_cloud_lacks_is_refused_naming_the_property(
        story: Story, cloud: Cloud, rt: Runtime, key: str) -> None:
    problems = refusal(story, server(flavor="m1.huge", image="no-such-image", key="theirs",
                                     network="nowhere"))
    assert sorted(problems) == [
        "resources.server.properties.flavor: flavor 'm1.huge' not found in the cloud",
        "resources.server.properties.image: image 'no-such-image' not found in the cloud",
        "resources.server.properties.key_name: key pair 'theirs' not found in the cloud",
        "resources.server.properties.networks[0].network: network 'nowhere' not found in "
        "the cloud",
    ]
    with pytest.raises(NotFound):  # nothing stored
        queries.get_stack(rt, TENANT, "stack")
    assert cloud.count("server") == 0 and cloud.count("network") == 1  # public only

    # What the cloud has (by name or by id) passes, and the stack is made.
    flavor = cloud.sdk.compute.find_flavor("m1.small")
    story.create(server(flavor=flavor.id))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    assert cloud.count("server") == 1


def test_a_parameter_with_a_cloud_constraint_names_the_parameter(
        story: Story, cloud: Cloud) -> None:
    text = """
heat_template_version: 2018-08-31
parameters:
  image:
    type: string
    constraints: [{custom_constraint: glance.image}]
resources:
  vol:
    type: OS::Cinder::Volume
    properties: {size: 1, image: {get_param: image}}
"""
    problems = refusal(story, text, parameters={"image": "fedora-99"})
    assert problems[0].startswith("parameters.image: image 'fedora-99' not found in the "
                                  "cloud"), problems
    assert cloud.count("volume") == 0


def test_common_constraints_need_no_cloud(story: Story, cloud: Cloud) -> None:
    problems = refusal(story, hot("""
net:
  type: OS::Neutron::Net
sub:
  type: OS::Neutron::Subnet
  properties: {network: {get_resource: net}, cidr: 10.0.0.0/33}
port:
  type: OS::Neutron::Port
  properties:
    network: {get_resource: net}
    fixed_ips: [{ip_address: 10.0.0.300}]
    mac_address: not-a-mac
"""))
    assert any(p.startswith("resources.sub.properties.cidr") for p in problems), problems
    assert any(p.startswith("resources.port.properties.fixed_ips[0].ip_address")
               for p in problems), problems
    assert any(p.startswith("resources.port.properties.mac_address") for p in problems)
    assert cloud.count("network") == 1


def test_an_update_is_checked_against_the_cloud_and_changes_nothing(
        story: Story, cloud: Cloud, key: str) -> None:
    story.create(server())
    assert story.finish().stack_status == "CREATE_COMPLETE"
    generation = story.stack().generation
    with pytest.raises(TemplateError) as caught:
        story.update(server(flavor="m1.nope"))
    assert "flavor 'm1.nope' not found" in str(caught.value)
    assert story.stack().generation == generation
    assert story.stack().stack_status == "CREATE_COMPLETE"


def test_template_validate_checks_the_cloud_when_a_runtime_is_at_hand(
        rt: Runtime, cloud: Cloud) -> None:
    text = server(image="nope")
    with pytest.raises(TemplateError) as caught:
        templates.validate_template(text, catalog=rt.registry)
    assert "image 'nope' not found in the cloud" in str(caught.value)
    # Without one (no cloud known), only what needs no cloud is checked.
    assert templates.validate_template(text)["ResourceCount"] == 2


def test_a_cloud_that_cannot_answer_checks_nothing_then_the_resource_says_why(
        story: Story, cloud: Cloud, key: str) -> None:
    # Nova is down while the request is accepted: the flavor is not checked (an outage of
    # one service does not refuse every stack), and the create goes on once Nova is back.
    cloud.control.add_rule("unavailable", service="compute", count=3)
    story.create(server())
    assert story.finish().stack_status == "CREATE_COMPLETE"
