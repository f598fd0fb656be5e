"""Security groups and rules made, updated and deleted by the engine in the simulated cloud:
a group's rules made to match its template's (Neutron's default egress rules kept or dropped
as Heat does), a rule Neutron refuses, and rules added to a group one by one."""

from __future__ import annotations

from typing import Any

from tests.engine.harness import Story, hot
from tests.openstack.conftest import Cloud

GROUP = """
web:
  type: OS::Neutron::SecurityGroup
  properties:
    name: NAME
    description: front end
    rules: RULES
"""
HTTP = "{protocol: tcp, port_range_min: 80, port_range_max: 80, remote_ip_prefix: 0.0.0.0/0}"
PEERS = "{remote_mode: remote_group_id, protocol: tcp, port_range_min: 8000, " \
        "port_range_max: 8100}"
OUT_DNS = "{direction: egress, protocol: udp, port_range_min: 53, port_range_max: 53}"


def group(rules: str, name: str = "web") -> str:
    return hot(GROUP.replace("NAME", name).replace("RULES", rules))


def rules_of(cloud: Cloud, group_id: str) -> set[tuple[Any, ...]]:
    return {(r.direction, r.ether_type, r.protocol, r.port_range_min, r.port_range_max,
             r.remote_ip_prefix, r.remote_group_id)
            for r in cloud.sdk.network.security_group_rules(security_group_id=group_id)}


def test_a_groups_rules_follow_its_template(story: Story, cloud: Cloud) -> None:
    story.create(group(f"[{HTTP}, {PEERS}]"))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    record = story.current()["web"]
    gid = record.physical_id
    found = cloud.sdk.network.get_security_group(gid)
    assert found.name == "web" and any(t.startswith("convergence:") for t in found.tags)
    assert rules_of(cloud, gid) == {
        ("egress", "IPv4", None, None, None, None, None),  # Neutron's, kept
        ("egress", "IPv6", None, None, None, None, None),
        ("ingress", "IPv4", "tcp", 80, 80, "0.0.0.0/0", None),
        ("ingress", "IPv4", "tcp", 8000, 8100, None, gid)}  # the group itself
    assert len(record.attributes["rules"]) == 4

    # An egress rule of its own: Neutron's open egress goes.
    story.update(group(f"[{HTTP}, {OUT_DNS}]", name="www"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert story.current()["web"].physical_id == gid
    assert cloud.sdk.network.get_security_group(gid).name == "www"
    assert rules_of(cloud, gid) == {
        ("egress", "IPv4", "udp", 53, 53, None, None),
        ("ingress", "IPv4", "tcp", 80, 80, "0.0.0.0/0", None)}

    # No egress rule any more: the open egress comes back.
    story.update(group("[]", name="www"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert rules_of(cloud, gid) == {("egress", "IPv4", None, None, None, None, None),
                                    ("egress", "IPv6", None, None, None, None, None)}

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.sdk.network.find_security_group(gid) is None
    assert cloud.names("security_group") == ["default"]


def test_a_rule_with_a_protocol_neutron_does_not_know_fails_with_its_message(
        story: Story, cloud: Cloud) -> None:
    story.create(group(f"[{HTTP}, {{protocol: bogus}}]"), disable_rollback=True)
    assert story.finish().stack_status == "CREATE_FAILED"
    reason = story.current()["web"].status_reason
    assert "Security group rule protocol bogus not supported" in reason, reason


RULES = """
base:
  type: OS::Neutron::SecurityGroup
  properties: {name: base, rules: BASE_RULES}
ssh:
  type: OS::Neutron::SecurityGroupRule
  properties:
    security_group: {get_resource: base}
    port_range_min: PORT
    port_range_max: PORT
    remote_ip_prefix: 10.0.0.0/8
    description: admins
peers:
  type: OS::Neutron::SecurityGroupRule
  properties:
    security_group: {get_attr: [base, show, name]}  # by name, as the cloud has it then
    remote_group: {get_attr: [base, show, name]}
    protocol: icmp
  depends_on: [base]
"""


def rules(port: str, base: str = "[]") -> str:
    return hot(RULES.replace("PORT", port).replace("BASE_RULES", base))


def test_rules_added_one_by_one_are_replaced_when_they_change(
        story: Story, cloud: Cloud) -> None:
    story.create(rules("22"))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    records = story.current()
    gid, ssh = records["base"].physical_id, records["ssh"].physical_id
    rule = cloud.sdk.network.get_security_group_rule(ssh)
    assert (rule.security_group_id, rule.protocol, rule.port_range_min, rule.description) == \
        (gid, "tcp", 22, "admins")
    peers = cloud.sdk.network.get_security_group_rule(records["peers"].physical_id)
    assert (peers.protocol, peers.remote_group_id) == ("icmp", gid)
    assert len(rules_of(cloud, gid)) == 4  # the group's own rules were left alone

    # The rule changes (replaced) and the group's own rules too: the group leaves the rules
    # it did not give alone.
    story.update(rules("2222", base=f"[{HTTP}]"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    current = story.current()
    new = current["ssh"].physical_id
    assert new != ssh and cloud.sdk.network.find_security_group_rule(ssh) is None
    assert current["base"].physical_id == gid
    assert current["peers"].physical_id == records["peers"].physical_id
    assert rules_of(cloud, gid) == {
        ("egress", "IPv4", None, None, None, None, None),
        ("egress", "IPv6", None, None, None, None, None),
        ("ingress", "IPv4", "tcp", 80, 80, "0.0.0.0/0", None),
        ("ingress", "IPv4", "tcp", 2222, 2222, "10.0.0.0/8", None),
        ("ingress", "IPv4", "icmp", None, None, None, gid)}

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.names("security_group") == ["default"]


def test_a_rule_the_group_already_has_is_adopted(story: Story, cloud: Cloud) -> None:
    sdk = cloud.sdk.network
    shared = sdk.create_security_group(name="shared")
    made = sdk.create_security_group_rule(  # as an interrupted attempt did
        security_group_id=shared.id, direction="ingress", ethertype="IPv4", protocol="tcp",
        port_range_min=443, port_range_max=443)
    before = rules_of(cloud, shared.id)

    story.create(hot("""
    https:
      type: OS::Neutron::SecurityGroupRule
      properties: {security_group: shared, port_range_min: 443, port_range_max: 443}
    """))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    assert story.current()["https"].physical_id == made.id
    assert rules_of(cloud, shared.id) == before

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert sdk.find_security_group_rule(made.id) is None
    assert sdk.get_security_group(shared.id).name == "shared"  # not the stack's
