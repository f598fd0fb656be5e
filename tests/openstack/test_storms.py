"""Bursts of 503 and 429 slow a traversal down but do not fail it; a 429's ``Retry-After`` is
honoured (the next call comes when the cloud asked, not a second later)."""

from __future__ import annotations

import itertools

from tests.engine.harness import Story, hot
from tests.openstack.conftest import Cloud

STACK = """
net:
  type: OS::Neutron::Net
subnet:
  type: OS::Neutron::Subnet
  properties: {network: {get_resource: net}, cidr: 10.40.0.0/24}
web:
  type: OS::Nova::Server
  depends_on: [subnet]
  properties:
    flavor: m1.tiny
    image: cirros
    networks: [{network: {get_resource: net}}]
"""


def test_503_and_429_storms_slow_the_stack_but_it_completes(story: Story, cloud: Cloud) -> None:
    mark = cloud.control.last()
    cloud.control.add_rule("unavailable", service="network", count=6)
    cloud.control.add_rule("rate_limited", service="compute", method="POST",
                           path="/compute/v2.1/servers", seconds=30, count=3)
    story.create(hot(STACK))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    assert [s.status for s in cloud.sdk.compute.servers()] == ["ACTIVE"]
    journal = cloud.control.journal(mark)
    assert sum(e.status == 503 for e in journal) == 6
    posts = [e for e in journal if e.method == "POST" and e.path == "/compute/v2.1/servers"]
    assert [e.status for e in posts] == [429, 429, 429, 202]
    # Each try came no sooner than the cloud's Retry-After asked (the cloud's clock).
    assert all(b.at - a.at >= 30 for a, b in itertools.pairwise(posts)), [e.at for e in posts]
    # Refused calls are retried, not failed: no resource ever failed.
    assert not [e for e in story.events() if e.status == "FAILED"]


def test_a_storm_during_delete_still_deletes_everything(story: Story, cloud: Cloud) -> None:
    story.create(hot(STACK))
    story.finish()
    cloud.control.add_rule("unavailable", service="compute", method="DELETE", count=4)
    cloud.control.add_rule("rate_limited", service="network", method="DELETE", seconds=5,
                           count=4)
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert list(cloud.sdk.compute.servers()) == []
    assert cloud.names("network") == ["public"]
