"""Cinder v3 of the simulated cloud, driven by unmodified openstacksdk over real HTTP: volumes
and their states, snapshots, types, quotas, faults, project isolation, and Nova's volume
attachments."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from openstack import exceptions
from openstack.connection import Connection

from convergence_simcloud import faults
from convergence_simcloud.serve import clouds_yaml
from convergence_simcloud.state import SimCloud
from tests.simcloud.conftest import Start, connect
from tests.simcloud.test_network import TWO_PROJECTS

OPENSTACK = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "openstack"


def _wait_available(cloud: SimCloud, conn: Connection, volume: Any, seconds: float = 1.0,
                    ) -> Any:
    cloud.clock.advance(seconds)
    return conn.block_storage.wait_for_status(volume, "available", wait=5, interval=0.01)


def test_a_volume_is_created_listed_updated_and_deleted(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    volume = conn.block_storage.create_volume(size=1, name="data", description="d",
                                              metadata={"role": "db"})
    assert volume.status == "creating" and volume.size == 1
    assert volume.volume_type == "__DEFAULT__" and volume.is_bootable is False
    volume = _wait_available(cloud, conn, volume)
    assert volume.status == "available" and volume.attachments == []
    assert volume.project_id == conn.current_project_id
    found = list(conn.block_storage.volumes(details=True, name="data"))
    assert [v.id for v in found] == [volume.id] and found[0].metadata == {"role": "db"}
    assert [v.id for v in conn.block_storage.volumes(details=False)] == [volume.id]
    assert conn.block_storage.find_volume("data").id == volume.id
    assert list(conn.block_storage.volumes(name="other")) == []
    conn.block_storage.update_volume(volume, name="data2", description="new")
    assert conn.block_storage.get_volume(volume.id).name == "data2"
    conn.block_storage.set_volume_metadata(volume, owner="me")
    assert conn.block_storage.get_volume(volume.id).metadata == {"role": "db", "owner": "me"}
    conn.block_storage.delete_volume_metadata(volume.id, keys=["role"])
    assert conn.block_storage.get_volume(volume.id).metadata == {"owner": "me"}
    conn.block_storage.delete_volume(volume)
    assert conn.block_storage.get_volume(volume.id).status == "deleting"
    cloud.clock.advance(1)
    conn.block_storage.wait_for_delete(volume, interval=0.01, wait=5)
    with pytest.raises(exceptions.NotFoundException):
        conn.block_storage.get_volume(volume.id)


def test_volume_list_pages_with_limit_and_marker(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    made = []
    for n in range(5):
        made.append(conn.block_storage.create_volume(size=1, name=f"v{n}"))
        cloud.clock.advance(0.01)
    names = [v.name for v in conn.block_storage.volumes(limit=2)]
    assert sorted(names) == [f"v{n}" for n in range(5)]
    assert names == [f"v{n}" for n in reversed(range(5))]  # newest first, as Cinder
    after = conn.block_storage.get_volume(made[2].id).created_at
    newer = [v.name for v in conn.block_storage.volumes(created_at=f"gt:{after}")]
    assert newer == ["v4", "v3"]
    by_name = conn.block_storage.get("/volumes?sort=name:asc&limit=2").json()
    assert [v["name"] for v in by_name["volumes"]] == ["v0", "v1"]
    assert by_name["volumes_links"][0]["rel"] == "next"


def test_extend_types_and_a_volume_from_an_image(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    names = {t.name for t in conn.block_storage.types()}
    assert {"__DEFAULT__", "lvmdriver-1"} <= names
    made = conn.block_storage.create_type(name="fast", extra_specs={"tier": "ssd"})
    assert conn.block_storage.get_type(made.id).extra_specs == {"tier": "ssd"}
    image = conn.image.find_image("cirros", ignore_missing=False)
    ubuntu = conn.image.find_image("ubuntu", ignore_missing=False)
    with pytest.raises(exceptions.BadRequestException, match="minDisk"):
        conn.block_storage.create_volume(size=1, image_id=ubuntu.id)
    volume = conn.block_storage.create_volume(size=2, name="boot", image_id=image.id,
                                              volume_type="lvmdriver-1")
    volume = _wait_available(cloud, conn, volume)
    assert volume.is_bootable is True and volume.volume_type == "lvmdriver-1"
    assert volume.volume_image_metadata["image_id"] == image.id
    conn.block_storage.extend_volume(volume, 3)
    volume = conn.block_storage.get_volume(volume.id)
    assert volume.status == "extending"
    volume = _wait_available(cloud, conn, volume)
    assert volume.size == 3
    with pytest.raises(exceptions.BadRequestException, match="greater than current size"):
        conn.block_storage.extend_volume(volume, 2)
    conn.block_storage.delete_type(made)
    assert "fast" not in {t.name for t in conn.block_storage.types()}


def test_snapshots_and_the_volume_delete_rules(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    volume = _wait_available(cloud, conn, conn.block_storage.create_volume(size=1, name="v"))
    snapshot = conn.block_storage.create_snapshot(volume_id=volume.id, name="snap")
    assert snapshot.status == "creating"
    cloud.clock.advance(1)
    snapshot = conn.block_storage.wait_for_status(snapshot, "available", wait=5,
                                                  interval=0.01)
    assert snapshot.size == 1 and snapshot.volume_id == volume.id
    assert [s.name for s in conn.block_storage.snapshots(details=True)] == ["snap"]
    with pytest.raises(exceptions.BadRequestException, match="have snapshots"):
        conn.block_storage.delete_volume(volume)
    conn.block_storage.revert_volume_to_snapshot(volume, snapshot)
    assert conn.block_storage.get_volume(volume.id).status == "reverting"
    volume = _wait_available(cloud, conn, volume)
    clone = conn.block_storage.create_volume(snapshot_id=snapshot.id, name="from-snap")
    assert clone.size == 1 and clone.snapshot_id == snapshot.id
    conn.block_storage.delete_snapshot(snapshot)
    cloud.clock.advance(1)
    conn.block_storage.wait_for_delete(snapshot, interval=0.01, wait=5)
    conn.block_storage.delete_volume(volume)
    cloud.clock.advance(1)
    conn.block_storage.wait_for_delete(volume, interval=0.01, wait=5)


def test_quotas_limits_and_the_over_quota_answer(start_cloud: Start) -> None:
    _, url = start_cloud()
    conn = connect(url)
    project = conn.current_project_id
    quota = conn.block_storage.get_quota_set(project)
    assert quota.volumes == 10 and quota.gigabytes == 1000
    conn.block_storage.update_quota_set(project, volumes=1)
    conn.block_storage.create_volume(size=1, name="one")
    with pytest.raises(exceptions.HttpException,
                       match=r"Maximum number of volumes allowed \(1\) exceeded") as raised:
        conn.block_storage.create_volume(size=1, name="two")
    assert raised.value.status_code == 413
    used = conn.block_storage.get_quota_set(project, usage=True)
    assert used.usage["volumes"] == 1 and used.volumes == 1
    limits = conn.block_storage.get_limits()
    assert limits.absolute.max_total_volumes == 1 and limits.absolute.total_volumes_used == 1
    conn.block_storage.update_quota_set(project, volumes=10, gigabytes=5)
    with pytest.raises(exceptions.HttpException, match="exceeds allowed gigabytes quota"):
        conn.block_storage.create_volume(size=5, name="big")


def test_faults_on_volumes(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    with cloud.locked():
        faults.add_rule(cloud, faults.Rule(effect=faults.STAY_BUILDING, service="volume",
                                           name="stuck"))
        faults.add_rule(cloud, faults.Rule(effect=faults.ERROR_AFTER, service="volume",
                                           name="broken", seconds=0.5))
        faults.add_rule(cloud, faults.Rule(effect=faults.DELETE_HANGS, service="volume",
                                           name="sticky"))
        faults.add_rule(cloud, faults.Rule(effect=faults.QUOTA_EXCEEDED, service="volume",
                                           name="greedy"))
        faults.add_rule(cloud, faults.Rule(effect=faults.DELETE_ERROR, service="volume",
                                           name="bad-delete"))
        faults.add_rule(cloud, faults.Rule(effect=faults.DELETE_CONFLICT, service="volume",
                                           name="busy"))
        faults.add_rule(cloud, faults.Rule(effect=faults.VANISH_AFTER, service="volume",
                                           name="ghost", seconds=2))
    stuck = conn.block_storage.create_volume(size=1, name="stuck")
    broken = conn.block_storage.create_volume(size=1, name="broken")
    sticky = conn.block_storage.create_volume(size=1, name="sticky")
    bad = conn.block_storage.create_volume(size=1, name="bad-delete")
    busy = conn.block_storage.create_volume(size=1, name="busy")
    ghost = conn.block_storage.create_volume(size=1, name="ghost")
    cloud.clock.advance(5)
    with pytest.raises(exceptions.NotFoundException):
        conn.block_storage.get_volume(ghost.id)
    with pytest.raises(exceptions.ConflictException):
        conn.block_storage.delete_volume(busy)
    assert conn.block_storage.get_volume(stuck.id).status == "creating"
    with pytest.raises(exceptions.ResourceFailure):
        conn.block_storage.wait_for_status(broken, "available", wait=5, interval=0.01)
    with pytest.raises(exceptions.HttpException, match="VolumeLimitExceeded") as raised:
        conn.block_storage.create_volume(size=1, name="greedy")
    assert raised.value.status_code == 413
    conn.block_storage.delete_volume(sticky)
    cloud.clock.advance(60)
    assert conn.block_storage.get_volume(sticky.id).status == "deleting"
    with pytest.raises(exceptions.HttpException) as failed:
        conn.block_storage.delete_volume(bad)
    assert failed.value.status_code == 500
    assert conn.block_storage.get_volume(bad.id).status == "error_deleting"


def test_a_project_sees_none_of_anothers_volumes(start_cloud: Start) -> None:
    _, url = start_cloud(TWO_PROJECTS)
    admin = connect(url)
    secret = admin.block_storage.create_volume(size=1, name="admin-only")
    demo = connect(url, username="demo", password="demo", project_name="demo")
    mine = demo.block_storage.create_volume(size=1, name="mine")
    assert [v.name for v in demo.block_storage.volumes()] == ["mine"]
    with pytest.raises(exceptions.NotFoundException):
        demo.block_storage.get_volume(secret.id)
    assert [v.name for v in admin.block_storage.volumes()] == ["admin-only"]
    everyone = {v.name for v in admin.block_storage.volumes(all_projects=True)}
    assert everyone == {"admin-only", "mine"}
    assert admin.block_storage.get_volume(mine.id).name == "mine"
    stranger = demo.session.get(f"{url}/volume/v3/{admin.current_project_id}/volumes",
                                raise_exc=False)
    assert stranger.status_code == 400
    assert stranger.json() == {"badRequest": {"code": 400, "message": "Malformed request url"}}
    with pytest.raises(exceptions.ForbiddenException):
        demo.block_storage.reset_volume_status(mine, status="error")
    admin.block_storage.reset_volume_status(mine, status="error")
    assert demo.block_storage.get_volume(mine.id).status == "error"


def _server(cloud: SimCloud, conn: Connection, name: str = "vm") -> Any:
    image = conn.image.find_image("cirros", ignore_missing=False)
    flavor = conn.compute.find_flavor("m1.small", ignore_missing=False)
    server = conn.compute.create_server(name=name, image_id=image.id, flavor_id=flavor.id,
                                        networks="none")
    cloud.clock.advance(60)
    return conn.compute.wait_for_server(server, wait=5, interval=0.01)


def test_a_volume_is_attached_and_detached_through_nova(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    server = _server(cloud, conn)
    first = _wait_available(cloud, conn, conn.block_storage.create_volume(size=1, name="a"))
    second = _wait_available(cloud, conn, conn.block_storage.create_volume(size=1, name="b"))
    made = conn.compute.create_volume_attachment(server, volume_id=first.id)
    assert made.device == "/dev/vdb" and made.volume_id == first.id
    assert conn.block_storage.get_volume(first.id).status == "attaching"
    cloud.clock.advance(1)
    first = conn.block_storage.wait_for_status(first, "in-use", wait=5, interval=0.01)
    [attachment] = first.attachments
    assert attachment["server_id"] == server.id and attachment["device"] == "/dev/vdb"
    assert conn.compute.create_volume_attachment(server, volume_id=second.id).device \
        == "/dev/vdc"
    with pytest.raises(exceptions.BadRequestException, match="Invalid volume"):
        conn.compute.create_volume_attachment(server, volume_id=first.id)
    listed = sorted(a.volume_id for a in conn.compute.volume_attachments(server))
    assert listed == sorted([first.id, second.id])
    shown = conn.compute.get_server(server.id).attached_volumes
    assert sorted(v["id"] for v in shown) == sorted([first.id, second.id])
    with pytest.raises(exceptions.BadRequestException, match="must not be migrating, attached"):
        conn.block_storage.delete_volume(first)
    conn.compute.delete_volume_attachment(first, server)
    assert conn.block_storage.get_volume(first.id).status == "detaching"
    cloud.clock.advance(1)
    conn.block_storage.wait_for_status(first, "available", wait=5, interval=0.01)
    assert [a.volume_id for a in conn.compute.volume_attachments(server)] == [second.id]
    conn.compute.delete_server(server)
    cloud.clock.advance(60)
    conn.compute.wait_for_delete(server, wait=5, interval=0.01)
    second = conn.block_storage.get_volume(second.id)
    assert second.status == "available" and second.attachments == []


def test_cinder_attachments_reserve_complete_and_delete(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    volume = _wait_available(cloud, conn, conn.block_storage.create_volume(size=1, name="a"))
    instance = "0b5d3c9e-5b0f-4a52-9a5e-3a5f3e1f0c11"
    made = conn.block_storage.create_attachment(volume, instance=instance)
    assert made.status == "reserved" and made.volume_id == volume.id
    assert made.instance == instance
    assert conn.block_storage.get_volume(volume.id).status == "reserved"
    updated = conn.block_storage.update_attachment(made, connector={"host": "compute-1",
                                                                    "mountpoint": "/dev/vdb"})
    assert updated.connection_info["driver_volume_type"] == "iscsi"
    conn.block_storage.complete_attachment(made)
    volume = conn.block_storage.get_volume(volume.id)
    assert volume.status == "in-use"
    assert [a["attachment_id"] for a in volume.attachments] == [made.id]
    assert [a.id for a in conn.block_storage.attachments()] == [made.id]
    assert conn.block_storage.get_attachment(made.id).status == "attached"
    conn.block_storage.delete_attachment(made)
    volume = conn.block_storage.get_volume(volume.id)
    assert volume.status == "available" and volume.attachments == []
    assert list(conn.block_storage.attachments()) == []


def test_the_openstack_cli_creates_and_lists_volumes(start_cloud: Start,
                                                    tmp_path: Path) -> None:
    cloud, url = start_cloud()
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(clouds_yaml(url))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env["OS_CLIENT_CONFIG_FILE"] = str(clouds)

    def cli(*args: str) -> object:
        done = subprocess.run([str(OPENSTACK), "--os-cloud", "simcloud", *args, "-f", "json"],
                              env=env, capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    made = cli("volume", "create", "--size", "1", "v")
    assert isinstance(made, dict) and made["name"] == "v" and made["size"] == 1
    cloud.clock.advance(5)
    rows = cli("volume", "list")
    assert isinstance(rows, list)
    assert [(r["Name"], r["Status"], r["Size"]) for r in rows] == [("v", "available", 1)]
    shown = cli("volume", "show", "v")
    assert isinstance(shown, dict) and shown["status"] == "available"
    assert shown["type"] == "__DEFAULT__"
    types = cli("volume", "type", "list")
    assert isinstance(types, list) and {"__DEFAULT__", "lvmdriver-1"} <= {t["Name"] for t in types}
    snap = cli("volume", "snapshot", "create", "--volume", "v", "s")
    assert isinstance(snap, dict) and snap["status"] == "creating"
    cloud.clock.advance(5)
    snaps = cli("volume", "snapshot", "list")
    assert isinstance(snaps, list) and [(r["Name"], r["Status"]) for r in snaps] == [
        ("s", "available")]


def test_volume_actions_force_delete_retype_and_the_legacy_attach(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    volume = _wait_available(cloud, conn, conn.block_storage.create_volume(size=2, name="a",
                                                                           metadata={"k": "v"}))
    conn.block_storage.retype_volume(volume, "lvmdriver-1")
    assert conn.block_storage.get_volume(volume.id).volume_type == "lvmdriver-1"
    conn.block_storage.set_volume_bootable_status(volume, True)
    assert conn.block_storage.get_volume(volume.id).is_bootable is True
    instance = "0b5d3c9e-5b0f-4a52-9a5e-3a5f3e1f0c11"
    conn.block_storage.attach_volume(volume, "/dev/vdb", instance=instance)
    volume = conn.block_storage.get_volume(volume.id)
    assert volume.status == "in-use" and volume.attachments[0]["server_id"] == instance
    summary = conn.block_storage.summary(False)
    assert summary.total_count == 1 and summary.total_size == 2
    assert summary.metadata == {"k": ["v"]}
    conn.block_storage.detach_volume(volume, volume.attachments[0]["attachment_id"])
    assert conn.block_storage.get_volume(volume.id).status == "available"
    conn.block_storage.reset_volume_status(volume, status="error_deleting")
    with pytest.raises(exceptions.BadRequestException, match="status must be available"):
        conn.block_storage.delete_volume(volume)
    conn.block_storage.delete_volume(volume, force=True)
    cloud.clock.advance(1)
    conn.block_storage.wait_for_delete(volume, interval=0.01, wait=5)


def test_nova_refuses_a_building_server_and_snapshots_of_in_use_need_force(
        start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    volume = _wait_available(cloud, conn, conn.block_storage.create_volume(size=1, name="a"))
    image = conn.image.find_image("cirros", ignore_missing=False)
    flavor = conn.compute.find_flavor("m1.small", ignore_missing=False)
    building = conn.compute.create_server(name="b", image_id=image.id, flavor_id=flavor.id,
                                          networks="none")
    with pytest.raises(exceptions.ConflictException, match="vm_state building"):
        conn.compute.create_volume_attachment(building, volume_id=volume.id)
    with pytest.raises(exceptions.NotFoundException):
        conn.compute.create_volume_attachment(building, volume_id="no-such-volume")
    server = _server(cloud, conn, "ready")
    conn.compute.create_volume_attachment(server, volume_id=volume.id)
    cloud.clock.advance(1)
    conn.block_storage.wait_for_status(volume, "in-use", wait=5, interval=0.01)
    with pytest.raises(exceptions.BadRequestException, match="current status is: in-use"):
        conn.block_storage.create_snapshot(volume_id=volume.id, name="s")
    snapshot = conn.block_storage.create_snapshot(volume_id=volume.id, name="s", force=True)
    assert snapshot.status == "creating"


def test_a_backup_is_made_restored_and_deleted(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    volume = _wait_available(cloud, conn, conn.block_storage.create_volume(size=1, name="v"))
    backup = conn.block_storage.create_backup(volume_id=volume.id, name="b")
    assert conn.block_storage.get_volume(volume.id).status == "backing-up"
    cloud.clock.advance(1)
    backup = conn.block_storage.wait_for_status(backup, "available", wait=5, interval=0.01)
    assert backup.size == 1 and backup.volume_id == volume.id and backup.name == "b"
    assert conn.block_storage.get_volume(volume.id).status == "available"
    assert [b.name for b in conn.block_storage.backups(details=True)] == ["b"]
    assert conn.block_storage.get_limits().absolute.total_backups_used == 1
    restored = conn.block_storage.restore_backup(backup, name="copy")
    copy = conn.block_storage.get_volume(restored.volume_id)
    assert copy.name == "copy" and copy.status == "restoring-backup"
    cloud.clock.advance(1)
    conn.block_storage.wait_for_status(copy, "available", wait=5, interval=0.01)
    conn.block_storage.delete_backup(backup)
    cloud.clock.advance(1)
    conn.block_storage.wait_for_delete(backup, interval=0.01, wait=5)
