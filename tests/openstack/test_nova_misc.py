"""Nova's key pairs, flavors and server groups made, changed and deleted by the engine in the
simulated cloud; and creates repeated as an interrupted step repeats them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from convergence.plugins.base import PluginContext
from convergence.plugins.openstack.cinder_volume import Volume
from convergence.plugins.openstack.nova_flavor import Flavor, ServerGroup
from convergence.plugins.openstack.nova_keypair import KeyPair
from convergence.plugins.openstack.resource import OpenStackResource
from convergence.ports.clock import ManualClock
from convergence.runtime import Runtime
from convergence.template.properties import with_defaults
from tests.engine.harness import Story, hot
from tests.openstack.conftest import Cloud

SEEDED_FLAVORS = 5  # m1.tiny .. m1.xlarge


def public_key() -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    return key.public_bytes(serialization.Encoding.OpenSSH,
                            serialization.PublicFormat.OpenSSH).decode() + " me@laptop"


def test_key_pairs_generated_and_imported(story: Story, cloud: Cloud) -> None:
    imported = public_key()
    story.create(hot(f"""
made:
  type: OS::Nova::KeyPair
  properties: {{name: made, save_private_key: true}}
unsaved:
  type: OS::Nova::KeyPair
  properties: {{name: unsaved}}
brought:
  type: OS::Nova::KeyPair
  properties: {{name: brought, public_key: "{imported}"}}
"""))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    records = story.current()
    assert records["made"].physical_id == "made"  # the name, as Heat's
    assert records["made"].reference_id == "made"
    made = cloud.sdk.compute.get_keypair("made")
    attributes = records["made"].attributes
    assert attributes["public_key"] == made.public_key
    assert attributes["private_key"].startswith("-----BEGIN")
    assert "private_key" not in attributes["show"]
    assert records["unsaved"].attributes["private_key"] == ""
    assert cloud.sdk.compute.get_keypair("brought").public_key == imported
    assert records["brought"].attributes["private_key"] == ""

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.count("keypair") == 0


def test_a_key_pair_name_taken_fails_with_novas_message(story: Story, cloud: Cloud) -> None:
    theirs = cloud.sdk.compute.create_keypair(name="taken", public_key=public_key())
    story.create(hot(f"""
key:
  type: OS::Nova::KeyPair
  properties: {{name: taken, public_key: "{public_key()}"}}
"""), disable_rollback=True)
    assert story.finish().stack_status == "CREATE_FAILED"
    assert "Key pair 'taken' already exists" in story.current()["key"].status_reason
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.sdk.compute.get_keypair("taken").public_key == theirs.public_key


def test_a_key_pair_holding_the_same_key_is_adopted(story: Story, cloud: Cloud) -> None:
    key = public_key()
    cloud.sdk.compute.create_keypair(name="mine", public_key=key)
    story.create(hot(f"""
key:
  type: OS::Nova::KeyPair
  properties: {{name: mine, public_key: "{key}"}}
"""))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    assert cloud.names("keypair") == ["mine"]


FLAVOR = """
flavor:
  type: OS::Nova::Flavor
  properties:
    ram: {ram}
    vcpus: 2
    disk: 5
    is_public: false
    extra_specs: {specs}
    description: {description}
"""


def test_a_flavor_is_made_private_changed_in_place_replaced_and_deleted(
        story: Story, cloud: Cloud) -> None:
    story.create(hot(FLAVOR.format(ram=1024, specs="{'hw:cpu_policy': dedicated, "
                                                    "'quota:disk_read_iops_sec': 100}",
                                   description="small")))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    record = story.current()["flavor"]
    flavor = cloud.sdk.compute.get_flavor(record.physical_id)
    assert flavor.name.startswith("stack-flavor-")  # derived: found again after a crash
    assert (flavor.ram, flavor.vcpus, flavor.disk, flavor.is_public) == (1024, 2, 5, False)
    assert flavor.extra_specs == {"hw:cpu_policy": "dedicated",
                                  "quota:disk_read_iops_sec": "100"}
    # A private flavor without tenants is the stack's project's, as in Heat.
    assert [a["tenant_id"] for a in cloud.sdk.compute.get_flavor_access(flavor.id)] == \
        [cloud.sdk.current_project_id]
    assert record.attributes["is_public"] is False and record.attributes["name"] == flavor.name

    story.update(hot(FLAVOR.format(ram=1024, specs="{'hw:cpu_policy': shared}",
                                   description="smaller")))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    after = story.current()["flavor"]
    assert after.physical_id == flavor.id  # in place
    changed = cloud.sdk.compute.get_flavor(flavor.id)
    assert changed.extra_specs == {"hw:cpu_policy": "shared"}
    assert changed.description == "smaller"
    assert after.attributes["extra_specs"] == {"hw:cpu_policy": "shared"}

    story.update(hot(FLAVOR.format(ram=2048, specs="{'hw:cpu_policy': shared}",
                                   description="smaller")))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    replaced = story.current()["flavor"].physical_id
    assert replaced != flavor.id
    assert cloud.sdk.compute.find_flavor(flavor.id) is None
    assert cloud.sdk.compute.get_flavor(replaced).ram == 2048

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.count("flavor") == SEEDED_FLAVORS


def test_a_flavor_shared_with_named_projects(story: Story, cloud: Cloud) -> None:
    projects = [p.id for p in cloud.sdk.identity.projects()]
    story.create(hot(f"""
flavor:
  type: OS::Nova::Flavor
  properties: {{name: gold, ram: 512, vcpus: 1, is_public: false, tenants: {projects[:1]}}}
"""))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    flavor = cloud.sdk.compute.find_flavor("gold")
    assert [a["tenant_id"] for a in cloud.sdk.compute.get_flavor_access(flavor.id)] == \
        projects[:1]


GROUPS = """
apart:
  type: OS::Nova::ServerGroup
  properties: {name: web}
together:
  type: OS::Nova::ServerGroup
  properties: {policy: affinity}
"""


def test_server_groups_are_made_and_deleted(story: Story, cloud: Cloud) -> None:
    story.create(hot(GROUPS))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    records = story.current()
    apart = cloud.sdk.compute.get_server_group(records["apart"].physical_id)
    together = cloud.sdk.compute.get_server_group(records["together"].physical_id)
    assert (apart.name, apart.policies) == ("web", ["anti-affinity"])  # Heat's default
    assert together.name.startswith("stack-together-") and together.policies == ["affinity"]
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.count("server_group") == 0


def test_rules_a_cloud_cannot_take_fail_the_group(story: Story, cloud: Cloud) -> None:
    story.create(hot("""
group:
  type: OS::Nova::ServerGroup
  properties: {policy: anti-affinity, rules: {max_server_per_host: 2}}
"""), disable_rollback=True)
    assert story.finish().stack_status == "CREATE_FAILED"
    assert "2.64" in story.current()["group"].status_reason
    assert cloud.count("server_group") == 0


def _twice(rt: Runtime, clock: ManualClock, plugin: OpenStackResource,
           props: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """Create as a step does, then again as the same record's step repeats it after an
    interruption (the first result never recorded)."""
    ctx = PluginContext(owner="stack-id/41", stack_id="stack-id", stack_name="crashy",
                        resource_name="thing", now=clock.now, backends=rt.registry.backends)
    full = with_defaults(plugin.schema.properties, dict(props))
    first = plugin.create(ctx, full).physical_id
    clock.advance(10)
    second = plugin.create(ctx, full).physical_id
    return first, second


def test_a_repeated_create_adopts_what_the_first_made(
        rt: Runtime, cloud: Cloud, clock: ManualClock) -> None:
    flavor = _twice(rt, clock, Flavor(), {"ram": 512, "vcpus": 1, "extra_specs": {"a": "1"}})
    assert flavor[0] == flavor[1] and cloud.count("flavor") == SEEDED_FLAVORS + 1
    group = _twice(rt, clock, ServerGroup(), {})
    assert group[0] == group[1] and cloud.count("server_group") == 1
    volume = _twice(rt, clock, Volume(), {"size": 1})
    assert volume[0] == volume[1] and cloud.count("volume") == 1
    key = public_key()
    pair = _twice(rt, clock, KeyPair(), {"name": "again", "public_key": key})
    assert pair == ("again", "again") and cloud.count("keypair") == 1
