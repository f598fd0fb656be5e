"""Cinder volumes made, changed, failed, backed up and deleted by the engine in the simulated
cloud, and volumes attached to servers."""

from __future__ import annotations

from typing import Any

import pytest

from convergence.plugins.base import PluginContext
from convergence.plugins.openstack.cinder_volume import Volume
from convergence.ports.clock import ManualClock
from convergence.runtime import Runtime
from convergence.template.properties import with_defaults
from tests.corpus.corpus import ROOT as CORPUS
from tests.engine.harness import Story, hot
from tests.openstack.conftest import Cloud

VOLUME = """
vol:
  type: OS::Cinder::Volume
  properties: {props}
"""


def volume(props: str, policy: str = "") -> str:
    body = VOLUME.format(props=props)
    return hot(body + (f"  deletion_policy: {policy}\n" if policy else ""))


def test_a_volume_is_made_available_changed_in_place_and_deleted(
        story: Story, cloud: Cloud) -> None:
    story.create(volume("{name: data, size: 1, metadata: {tier: gold}, description: logs}"))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    record = story.current()["vol"]
    made = cloud.sdk.block_storage.get_volume(record.physical_id)
    assert (made.status, made.name, made.size, made.description) == \
        ("available", "data", 1, "logs")
    assert made.metadata["tier"] == "gold" and "convergence_owner" in made.metadata
    attributes = record.attributes
    assert attributes["size"] == "1" and attributes["status"] == "available"
    assert attributes["metadata_values"] == {"tier": "gold"}  # the engine's key is its own
    assert attributes["display_name"] == "data" and attributes["attachments_list"] == []

    story.update(volume("{name: data2, size: 3, metadata: {tier: silver, zone: b}}"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    after = story.current()["vol"]
    assert after.physical_id == made.id  # in place
    changed = cloud.sdk.block_storage.get_volume(made.id)
    assert (changed.name, changed.size, changed.status) == ("data2", 3, "available")
    assert changed.metadata["tier"] == "silver" and changed.metadata["zone"] == "b"
    assert changed.metadata["convergence_owner"] == made.metadata["convergence_owner"]
    assert after.attributes["size"] == "3"

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.sdk.block_storage.find_volume(made.id) is None
    assert cloud.count("volume") == 0


def test_a_smaller_size_fails_the_update_and_replaces_nothing(
        story: Story, cloud: Cloud) -> None:
    story.create(volume("{size: 2}"))
    story.finish()
    made = story.current()["vol"].physical_id
    story.update(volume("{size: 1}"), disable_rollback=True)
    assert story.finish().stack_status == "UPDATE_FAILED"
    record = story.current()["vol"]
    assert "Shrinking volume is not supported" in record.status_reason
    assert record.physical_id == made
    assert cloud.sdk.block_storage.get_volume(made).size == 2
    assert cloud.count("volume") == 1


def test_an_unnamed_volume_is_named_from_the_stack(story: Story, cloud: Cloud) -> None:
    story.create(volume("{size: 1}"))
    story.finish()
    name = cloud.sdk.block_storage.get_volume(story.current()["vol"].physical_id).name
    assert name.startswith("stack-vol-")


def test_a_volume_made_from_an_image_is_bootable(story: Story, cloud: Cloud) -> None:
    story.create(volume("{size: 1, image: cirros}"))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    record = story.current()["vol"]
    made = cloud.sdk.block_storage.get_volume(record.physical_id)
    assert made.is_bootable and made.volume_image_metadata["image_name"] == "cirros"
    assert record.attributes["bootable"] == "true"


def test_a_volume_in_error_fails_with_the_clouds_message(story: Story, cloud: Cloud) -> None:
    cloud.control.add_rule("error_after", kind="volume", name="doomed", seconds=0,
                           message="No valid backend was found.")
    story.create(volume("{name: doomed, size: 1}"), disable_rollback=True)
    assert story.finish().stack_status == "CREATE_FAILED"
    reason = story.current()["vol"].status_reason
    assert "went to error" in reason and "No valid backend was found." in reason
    failed = [e for e in story.events() if e.resource_name == "vol" and e.status == "FAILED"]
    assert failed and "No valid backend was found." in failed[-1].reason
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.count("volume") == 0  # volumes in error are deleted too


def test_the_snapshot_policy_keeps_a_backup(story: Story, cloud: Cloud) -> None:
    story.create(volume("{name: keep, size: 1}", policy="Snapshot"))
    story.finish()
    made = story.current()["vol"].physical_id
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.sdk.block_storage.find_volume(made) is None
    backups = list(cloud.sdk.block_storage.backups())
    assert [(b.volume_id, b.status) for b in backups] == [(made, "available")]


def test_a_delete_cinder_failed_is_asked_again(story: Story, cloud: Cloud) -> None:
    story.create(volume("{name: sticky, size: 1}"))
    story.finish()
    made = story.current()["vol"].physical_id
    cloud.control.add_rule("delete_error", kind="volume", name="sticky", count=1)
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.sdk.block_storage.find_volume(made) is None
    deletes = [e for e in cloud.control.journal(service="volume", method="DELETE")
               if e.path.endswith(f"/volumes/{made}")]
    # Cinder answered 500 and left it error_deleting, which only a force delete asks again.
    assert [(e.status, "force=True" in e.query) for e in deletes] == [(500, False), (202, True)]


def test_a_repeated_snapshot_step_takes_one_backup(
        rt: Runtime, cloud: Cloud, clock: ManualClock) -> None:
    ctx = PluginContext(owner="stack-id/7", stack_id="stack-id", stack_name="crashy",
                        resource_name="vol", now=clock.now, backends=rt.registry.backends)
    plugin = Volume()
    props = with_defaults(plugin.schema.properties, {"size": 1})
    made = plugin.create(ctx, props).physical_id
    clock.advance(5)
    first = plugin.snapshot_delete(ctx, made, props)  # its answer is lost, as in a crash
    second = plugin.snapshot_delete(ctx, made, props)
    assert first.state == second.state and not second.done
    clock.advance(5)
    assert plugin.poll(ctx, "DELETE", made, props, second.state).state["phase"] == "deleting"
    clock.advance(5)
    assert plugin.poll(ctx, "DELETE", made, props, {"phase": "deleting"}).done
    assert [b.volume_id for b in cloud.sdk.block_storage.backups()] == [made]
    assert cloud.count("volume") == 0


def _backup_of_a_volume(cloud: Cloud, clock: ManualClock, size: int) -> Any:
    source = cloud.sdk.block_storage.create_volume(size=size, name="source")
    clock.advance(5)
    backup = cloud.sdk.block_storage.create_backup(volume_id=source.id, name="nightly")
    clock.advance(5)
    assert cloud.sdk.block_storage.get_backup(backup.id).status == "available"
    return backup


def test_a_volume_made_from_a_backup_and_restored_from_another(
        story: Story, cloud: Cloud, clock: ManualClock) -> None:
    first, second = (_backup_of_a_volume(cloud, clock, 1) for _ in range(2))
    story.create(volume(f"{{name: restored, backup_id: {first.id}}}"))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    made = cloud.sdk.block_storage.get_volume(story.current()["vol"].physical_id)
    assert (made.name, made.size, made.status) == ("restored", 1, "available")
    assert "convergence_owner" in made.metadata  # found again by it after an interruption

    story.update(volume(f"{{name: restored, backup_id: {second.id}, read_only: true, "
                        "volume_type: lvmdriver-1}"))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert story.current()["vol"].physical_id == made.id
    changed = cloud.sdk.block_storage.get_volume(made.id)
    assert changed.volume_type == "lvmdriver-1"  # retyped in place
    assert changed.metadata.get("readonly") == "True"
    restores = [e for e in cloud.control.journal(service="volume")
                if e.method == "POST" and e.path.endswith("/restore")]
    assert [r.path.split("/")[-2] for r in restores] == [first.id, second.id]


@pytest.fixture
def server(cloud: Cloud, clock: ManualClock) -> str:
    """A server made outside the stack (the server type is tested on its own)."""
    image = cloud.sdk.image.find_image("cirros")
    flavor = cloud.sdk.compute.find_flavor("m1.tiny")
    made = cloud.sdk.compute.create_server(name="host", image_id=image.id,
                                           flavor_id=flavor.id, networks="none")
    clock.advance(30)
    assert cloud.sdk.compute.get_server(made.id).status == "ACTIVE"
    return str(made.id)


ATTACHED = """
vol:
  type: OS::Cinder::Volume
  properties: {{size: 1, availability_zone: {zone}}}
att:
  type: OS::Cinder::VolumeAttachment
  properties:
    instance_uuid: {server}
    volume_id: {{get_resource: vol}}
    mountpoint: {device}
"""


def test_a_volume_is_attached_moved_and_detached(
        story: Story, cloud: Cloud, server: str) -> None:
    story.create(hot(ATTACHED.format(zone="nova", server=server, device="/dev/vdb")))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    records = story.current()
    volume_id = records["vol"].physical_id
    assert records["att"].physical_id == volume_id  # Nova's attachment id, as Heat's
    attached = cloud.sdk.block_storage.get_volume(volume_id)
    assert attached.status == "in-use"
    assert [(a["server_id"], a["device"]) for a in attached.attachments] == \
        [(server, "/dev/vdb")]

    # Another zone replaces the volume; the attachment moves in place (detached from the old
    # volume, then the new one attached), and the old volume goes once it is free.
    story.update(hot(ATTACHED.format(zone="az2", server=server, device="/dev/vdc")))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    records = story.current()
    moved = records["vol"].physical_id
    assert moved != volume_id and records["att"].physical_id == moved
    assert [a["device"] for a in cloud.sdk.block_storage.get_volume(moved).attachments] == \
        ["/dev/vdc"]
    assert cloud.sdk.block_storage.find_volume(volume_id) is None  # detached, then deleted

    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.count("volume") == 0
    assert list(cloud.sdk.compute.volume_attachments(server)) == []


def test_an_attachment_already_there_is_adopted(
        story: Story, cloud: Cloud, server: str, clock: ManualClock) -> None:
    made = cloud.sdk.block_storage.create_volume(size=1, name="mine")
    clock.advance(5)
    cloud.sdk.compute.create_volume_attachment(server, volume=made.id)
    story.create(hot(f"""
att:
  type: OS::Cinder::VolumeAttachment
  properties: {{instance_uuid: {server}, volume_id: {made.id}}}
"""))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    assert story.current()["att"].physical_id == made.id
    attached = cloud.sdk.block_storage.get_volume(made.id)
    assert attached.status == "in-use" and len(attached.attachments) == 1
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.sdk.block_storage.get_volume(made.id).status == "available"


TEMPLATES = CORPUS / "heat-templates" / "hot"


def test_heat_templates_vm_with_cinder(story: Story, cloud: Cloud) -> None:
    cloud.sdk.compute.create_keypair(name="demo")
    net = cloud.sdk.network.create_network(name="private")
    cloud.sdk.network.create_subnet(network_id=net.id, cidr="10.20.0.0/24", ip_version=4)
    story.create((TEMPLATES / "vm_with_cinder.yaml").read_text(),
                 parameters={"key_name": "demo", "image": "cirros", "vol_size": 2})
    assert story.finish().stack_status == "CREATE_COMPLETE"
    records = story.current()
    server_id, volume_id = records["my_instance"].physical_id, records["my_vol"].physical_id
    attached = cloud.sdk.block_storage.get_volume(volume_id)
    assert (attached.size, attached.status) == (2, "in-use")
    assert [(a["server_id"], a["device"]) for a in attached.attachments] == \
        [(server_id, "/dev/vdb")]
    assert [a.volume_id for a in cloud.sdk.compute.volume_attachments(server_id)] == \
        [volume_id]
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert cloud.count("volume") == 0 and cloud.count("server") == 0
