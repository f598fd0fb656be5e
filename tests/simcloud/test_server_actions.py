"""Nova's server actions, metadata, tags and fault rules in the simulated cloud, as unmodified
openstacksdk meets them over real HTTP: reboot, rebuild, resize with confirm and revert, stop
and start, reset state (admins only), actions refused in the wrong state, and what the SDK sees
when a rule keeps a server building, puts it in ERROR, makes it vanish or spoils its delete."""

from __future__ import annotations

from typing import Any

import pytest
from openstack import exceptions

from convergence_simcloud.client import SimControl
from convergence_simcloud.state import SimCloud
from tests.simcloud.conftest import Start, connect
from tests.simcloud.test_network import TWO_PROJECTS
from tests.simcloud.test_servers import boot, cirros, private_network


def active(start_cloud: Start, name: str = "web-1",
           **kwargs: Any) -> tuple[SimCloud, str, Any, Any]:
    """A cloud, its URL, an admin connection and an ACTIVE server."""
    cloud, url = start_cloud(**kwargs)
    conn = connect(url)
    server = boot(conn, name, private_network(conn))
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    return cloud, url, conn, conn.compute.wait_for_server(server, interval=0.05)


def status(conn: Any, server: Any) -> tuple[str, str, str | None]:
    found = conn.compute.get_server(server.id)
    return found.status, found.vm_state, found.task_state


def test_reboot_soft_and_hard(start_cloud: Start) -> None:
    cloud, _, conn, server = active(start_cloud)
    conn.compute.reboot_server(server, "SOFT")
    assert status(conn, server) == ("REBOOT", "active", "rebooting")
    cloud.clock.advance(1)  # type: ignore[attr-defined]
    assert status(conn, server) == ("ACTIVE", "active", None)
    conn.compute.reboot_server(server, "HARD")
    assert status(conn, server) == ("HARD_REBOOT", "active", "rebooting_hard")
    cloud.clock.advance(1)  # type: ignore[attr-defined]
    rebooted = conn.compute.get_server(server.id)
    assert (rebooted.status, rebooted.task_state, rebooted.power_state) == ("ACTIVE", None, 1)


def test_rebuild_with_a_new_image(start_cloud: Start) -> None:
    cloud, _, conn, server = active(start_cloud)
    ubuntu = conn.image.find_image("ubuntu").id
    with pytest.raises(exceptions.BadRequestException, match="disk is too small"):
        conn.compute.rebuild_server(server, ubuntu)  # m1.tiny has a 1 GiB disk
    rebuilt = conn.compute.rebuild_server(server, cirros(conn), name="web-1b",
                                          metadata={"v": "2"}, admin_password="pw")
    assert rebuilt.status == "REBUILD" and rebuilt.admin_password == "pw"
    assert rebuilt.name == "web-1b" and rebuilt.metadata == {"v": "2"}
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    assert status(conn, server) == ("ACTIVE", "active", None)


def test_resize_then_confirm_or_revert(start_cloud: Start) -> None:
    cloud, _, conn, server = active(start_cloud)
    conn.compute.resize_server(server, "2")
    assert status(conn, server) == ("RESIZE", "active", "resize_prep")
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    resized = conn.compute.wait_for_server(server, status="VERIFY_RESIZE", interval=0.05)
    assert resized.vm_state == "resized" and resized.flavor.original_name == "m1.small"
    conn.compute.confirm_server_resize(server)
    confirmed = conn.compute.get_server(server.id)
    assert (confirmed.status, confirmed.flavor.original_name) == ("ACTIVE", "m1.small")
    conn.compute.resize_server(server, "3")
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    assert status(conn, server)[0] == "VERIFY_RESIZE"
    conn.compute.revert_server_resize(server)
    assert status(conn, server) == ("REVERT_RESIZE", "resized", "resize_reverting")
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    reverted = conn.compute.get_server(server.id)
    assert (reverted.status, reverted.flavor.original_name) == ("ACTIVE", "m1.small")
    with pytest.raises(exceptions.BadRequestException, match="must change flavor"):
        conn.compute.resize_server(server, "2")


def test_stop_and_start(start_cloud: Start) -> None:
    cloud, _, conn, server = active(start_cloud)
    conn.compute.stop_server(server)
    assert status(conn, server) == ("ACTIVE", "active", "powering-off")
    cloud.clock.advance(1)  # type: ignore[attr-defined]
    stopped = conn.compute.wait_for_server(server, status="SHUTOFF", interval=0.05)
    assert (stopped.vm_state, stopped.power_state) == ("stopped", 4)
    conn.compute.start_server(server)
    cloud.clock.advance(1)  # type: ignore[attr-defined]
    started = conn.compute.get_server(server.id)
    assert (started.status, started.task_state, started.power_state) == ("ACTIVE", None, 1)


def test_actions_in_the_wrong_state_are_conflicts(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    building = boot(conn, "slow", private_network(conn))
    with pytest.raises(exceptions.ConflictException,
                       match=f"Cannot 'reboot' instance {building.id} while it is in "
                             "vm_state building"):
        conn.compute.reboot_server(building, "HARD")
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    with pytest.raises(exceptions.ConflictException, match=r"Cannot 'start' instance .* "
                                                           r"vm_state active"):
        conn.compute.start_server(building)
    with pytest.raises(exceptions.ConflictException, match="Cannot 'confirmResize'"):
        conn.compute.confirm_server_resize(building)
    conn.compute.stop_server(building)
    with pytest.raises(exceptions.ConflictException, match="task_state powering-off"):
        conn.compute.resize_server(building, "2")
    cloud.clock.advance(1)  # type: ignore[attr-defined]
    with pytest.raises(exceptions.ConflictException, match="vm_state stopped"):
        conn.compute.reboot_server(building, "SOFT")
    raw = conn.compute.post(f"/servers/{building.id}/action", json={"os-stop": None})
    assert raw.json() == {"conflictingRequest": {"code": 409, "message": (
        f"Cannot 'stop' instance {building.id} while it is in vm_state stopped")}}
    bad = conn.compute.post(f"/servers/{building.id}/action", json={"fly": None})
    assert bad.status_code == 400 and "There is no such action: fly" in bad.text


def test_reset_state_is_for_admins(start_cloud: Start) -> None:
    _, url = start_cloud(TWO_PROJECTS)
    demo = connect(url, username="demo", password="demo", project_name="demo")
    server = boot(demo, "demo-1", private_network(demo))
    with pytest.raises(exceptions.ForbiddenException, match="reset_state"):
        demo.compute.reset_server_state(server, "error")
    admin = connect(url)
    admin.compute.reset_server_state(server, "error")
    assert status(demo, server) == ("ERROR", "error", None)
    admin.compute.reset_server_state(server, "active")
    assert status(demo, server) == ("ACTIVE", "active", None)
    admin.compute.lock_server(server)
    assert demo.compute.get_server(server.id).is_locked
    with pytest.raises(exceptions.ConflictException, match="is locked"):
        demo.compute.stop_server(server)
    with pytest.raises(exceptions.ForbiddenException):
        demo.compute.unlock_server(server)  # locked by an admin
    admin.compute.unlock_server(server)
    demo.compute.stop_server(server)


def test_metadata_and_tags(start_cloud: Start) -> None:
    _, _, conn, server = active(start_cloud)
    conn.compute.set_server_metadata(server, role="web", tier="front")
    assert conn.compute.get_server_metadata(server).metadata == {"role": "web",
                                                                  "tier": "front"}
    conn.compute.delete_server_metadata(server, ["tier"])
    assert conn.compute.get_server(server.id).metadata == {"role": "web"}
    item = conn.compute.get(f"/servers/{server.id}/metadata/role").json()
    assert item == {"meta": {"role": "web"}}
    missing = conn.compute.get(f"/servers/{server.id}/metadata/nope")
    assert missing.status_code == 404 and "Metadata item was not found" in missing.text
    with pytest.raises(exceptions.NotFoundException):
        conn.compute.delete_server_metadata(server, ["nope"])
    replaced = conn.compute.put(f"/servers/{server.id}/metadata",
                                json={"metadata": {"only": "this"}}).json()
    assert replaced == {"metadata": {"only": "this"}}
    found = conn.compute.get_server(server.id)
    found.add_tag(conn.compute, "blue")
    found.add_tag(conn.compute, "green")
    assert conn.compute.get_server(server.id).tags == ["blue", "green"]
    found.remove_tag(conn.compute, "blue")
    found.set_tags(conn.compute, ["a", "b"])
    assert conn.compute.get_server(server.id).tags == ["a", "b"]
    assert [s.name for s in conn.compute.servers(tags="a")] == ["web-1"]
    assert list(conn.compute.servers(tags="blue")) == []
    old = conn.compute.get(f"/servers/{server.id}/tags", microversion="2.25")
    assert old.status_code == 404


# -- fault rules -----------------------------------------------------------------------------

def test_a_server_that_stays_building_times_out(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    SimControl(url).add_rule("stay_building", service="compute", kind="server", name="web-*")
    server = boot(conn, "web-1", private_network(conn))
    cloud.clock.advance(100)  # type: ignore[attr-defined]
    with pytest.raises(exceptions.ResourceTimeout):
        conn.compute.wait_for_server(server, wait=0.2, interval=0.05)
    assert status(conn, server) == ("BUILD", "building", "spawning")


def test_a_server_that_goes_error_shows_its_fault(start_cloud: Start) -> None:
    cloud, url = start_cloud(TWO_PROJECTS)
    conn = connect(url)
    SimControl(url).add_rule("error_after", service="compute", kind="server", name="web-*",
                             seconds=0.5, message="No valid host was found.")
    server = boot(conn, "web-1", private_network(conn))
    cloud.clock.advance(1)  # type: ignore[attr-defined]
    with pytest.raises(exceptions.ResourceFailure):
        conn.compute.wait_for_server(server, interval=0.05)
    failed = conn.compute.get_server(server.id)
    assert (failed.status, failed.vm_state) == ("ERROR", "error")
    assert failed.fault["code"] == 500 and failed.fault["message"] == "No valid host was found."
    assert failed.fault["created"] and "details" in failed.fault  # an admin sees the details
    assert failed.addresses == {}  # a failed build gives its ports back
    assert list(conn.network.ports(device_id=server.id)) == []
    demo = connect(url, username="demo", password="demo", project_name="demo")
    SimControl(url).add_rule("error_after", service="compute", kind="server", name="demo-*")
    theirs = boot(demo, "demo-1", private_network(demo))
    assert "details" not in demo.compute.get_server(theirs.id).fault
    conn.compute.delete_server(server)  # an ERROR server can be deleted
    assert conn.compute.find_server(server.id) is None


def test_a_server_can_be_active_then_error(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    SimControl(url).add_rule("error_after", service="compute", kind="server", seconds=5)
    server = boot(conn, "web-1", private_network(conn))
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    assert conn.compute.wait_for_server(server, interval=0.05).status == "ACTIVE"
    cloud.clock.advance(10)  # type: ignore[attr-defined]
    failed = conn.compute.get_server(server.id)
    assert (failed.status, failed.power_state) == ("ERROR", 1)
    assert failed.launched_at and failed.fault["message"].startswith("Simulated failure")


def test_a_server_that_vanishes_is_gone_with_its_ports(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    SimControl(url).add_rule("vanish_after", service="compute", kind="server", name="web-*",
                             seconds=10)
    net = private_network(conn)
    given = conn.network.create_port(network_id=net.id)
    server = conn.compute.create_server(name="web-1", flavor_id="1", image_id=cirros(conn),
                                        networks=[{"uuid": net.id}, {"port": given.id}])
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    assert conn.compute.wait_for_server(server, interval=0.05).status == "ACTIVE"
    cloud.clock.advance(10)  # type: ignore[attr-defined]
    with pytest.raises(exceptions.NotFoundException):
        conn.compute.get_server(server.id)
    assert list(conn.compute.servers()) == []
    assert [p.id for p in conn.network.ports(network_id=net.id,
                                              device_owner="compute:nova")] == []
    assert conn.network.get_port(given.id).device_id == ""


def test_deletes_that_hang_conflict_or_fail(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    control = SimControl(url)
    net = private_network(conn)
    hangs = boot(conn, "hang-1", net)
    control.add_rule("delete_conflict", service="compute", kind="server", name="web-*",
                     count=1)
    control.add_rule("delete_error", service="compute", kind="server", name="bad-*", count=1)
    control.add_rule("delete_hangs", service="compute", kind="server", name="hang-*")
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    conn.compute.delete_server(hangs)  # 204
    assert status(conn, hangs) == ("ACTIVE", "active", "deleting")
    cloud.clock.advance(600)  # type: ignore[attr-defined]
    with pytest.raises(exceptions.ResourceTimeout):
        conn.compute.wait_for_delete(hangs, interval=0.05, wait=0.2)
    web = boot(conn, "web-1", net)
    with pytest.raises(exceptions.ConflictException):
        conn.compute.delete_server(web)
    conn.compute.delete_server(web)  # the rule was spent
    assert conn.compute.find_server(web.id) is None
    bad = boot(conn, "bad-1", net)
    with pytest.raises(exceptions.HttpException) as caught:
        conn.compute.delete_server(bad)
    assert caught.value.status_code == 500
    raw = conn.compute.get(f"/servers/{bad.id}")
    assert raw.status_code == 200


def test_pause_suspend_shelve_console_snapshot_and_security_groups(start_cloud: Start,
                                                                   ) -> None:
    cloud, _, conn, server = active(start_cloud)
    conn.compute.pause_server(server)
    assert status(conn, server) == ("PAUSED", "paused", None)
    with pytest.raises(exceptions.ConflictException, match="vm_state paused"):
        conn.compute.suspend_server(server)
    conn.compute.unpause_server(server)
    conn.compute.suspend_server(server)
    assert status(conn, server) == ("SUSPENDED", "suspended", None)
    conn.compute.resume_server(server)
    assert status(conn, server) == ("ACTIVE", "active", None)
    conn.compute.shelve_server(server)
    cloud.clock.advance(1)  # type: ignore[attr-defined]
    shelved = conn.compute.get_server(server.id)
    assert (shelved.status, shelved.power_state, shelved.compute_host) == (
        "SHELVED_OFFLOADED", 4, None)
    [port] = conn.network.ports(device_id=server.id)
    assert (port.status, port.binding_host_id) == ("DOWN", "")
    conn.compute.unshelve_server(server)
    assert status(conn, server) == ("SHELVED_OFFLOADED", "shelved_offloaded", "unshelving")
    cloud.clock.advance(1)  # type: ignore[attr-defined]
    assert conn.network.get_port(port.id).status == "ACTIVE"  # Neutron's reads see it too
    unshelved = conn.compute.get_server(server.id)
    assert (unshelved.status, unshelved.compute_host) == ("ACTIVE", "compute-nova")
    output = conn.compute.get_server_console_output(server)["output"]
    assert server.id in output
    image_id = conn.compute.create_server_image(server, "web-snap", metadata={"k": "v"})
    snap = conn.image.get_image(image_id)
    assert (snap.name, snap.status, snap.visibility) == ("web-snap", "active", "private")
    group = conn.network.create_security_group(name="web")
    conn.compute.add_security_group_to_server(server, group)
    groups = {g["name"] for g in conn.compute.get_server(server.id).security_groups}
    assert groups == {"default", "web"}
    conn.compute.remove_security_group_from_server(server, group)
    assert conn.compute.get_server(server.id).security_groups == [{"name": "default"}]
    with pytest.raises(exceptions.NotFoundException, match="Security group nope not found"):
        conn.compute.add_security_group_to_server(server, {"name": "nope"})
