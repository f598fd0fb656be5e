"""A create that fails in the cloud is tried again by replacing it, as Heat's
``action_retry_limit`` allows: a new server, the failed one deleted, every attempt and the
cloud's fault in the events; and a server that never leaves BUILD fails at the stack's
timeout."""

from __future__ import annotations

from tests.engine.harness import Story, hot
from tests.engine.test_ledger import story_of
from tests.openstack.conftest import Cloud

SERVER = """
net:
  type: OS::Neutron::Net
subnet:
  type: OS::Neutron::Subnet
  properties: {network: {get_resource: net}, cidr: 10.20.0.0/24}
web:
  type: OS::Nova::Server
  depends_on: [subnet]
  properties:
    name: web
    flavor: m1.small
    image: cirros
    networks: [{network: {get_resource: net}}]
"""


def test_a_server_that_goes_error_is_replaced_and_the_stack_completes(
        story: Story, cloud: Cloud) -> None:
    cloud.control.add_rule("error_after", kind="server", name="web", seconds=5, count=1,
                           message="No valid host was found.")
    story.create(hot(SERVER))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    servers = list(cloud.sdk.compute.servers())
    assert [(s.name, s.status) for s in servers] == [("web", "ACTIVE")]
    good = story.current()["web"].physical_id
    assert good == servers[0].id
    failed = [e for e in story.events() if e.resource_name == "web" and e.status == "FAILED"]
    assert len(failed) == 1 and "No valid host was found." in failed[0].reason
    assert "attempt 1 of 6" in failed[0].reason
    bad = failed[0].physical_resource_id
    assert bad != good
    assert story_of(story, bad) == ["CREATE_IN_PROGRESS", "CREATE_FAILED",
                                    "DELETE_IN_PROGRESS", "DELETE_COMPLETE"]
    assert cloud.sdk.compute.find_server(bad) is None  # deleted before the stack completed
    assert len(story.records()["web"]) == 1  # the failed version's record is gone too


def test_a_server_that_always_fails_fails_after_the_retry_limit(
        story: Story, cloud: Cloud) -> None:
    cloud.control.add_rule("error_after", kind="server", name="web", seconds=5,
                           message="No valid host was found.")
    story.create(hot(SERVER), disable_rollback=True)
    stack = story.finish()
    assert stack.stack_status == "CREATE_FAILED"
    assert "No valid host was found." in stack.status_reason
    failed = [e for e in story.events() if e.resource_name == "web" and e.status == "FAILED"]
    assert len(failed) == 6  # the first attempt and five more
    # Every failed attempt but the last is deleted; the last is the record's, for the next
    # update (or the delete) to deal with.
    assert [s.status for s in cloud.sdk.compute.servers()] == ["ERROR"]
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert list(cloud.sdk.compute.servers()) == []


def test_a_server_that_never_leaves_build_fails_at_the_stack_timeout(
        story: Story, cloud: Cloud) -> None:
    cloud.control.add_rule("stay_building", kind="server", name="web")
    story.create(hot(SERVER), timeout_mins=2, disable_rollback=True)
    stack = story.finish()
    assert stack.stack_status == "CREATE_FAILED"
    assert "Timed out" in stack.status_reason
    assert [s.status for s in cloud.sdk.compute.servers()] == ["BUILD"]
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert list(cloud.sdk.compute.servers()) == []
