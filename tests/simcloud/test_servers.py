"""Nova's servers in the simulated cloud, as unmodified openstacksdk (and the ``openstack`` CLI)
meet them over real HTTP: boot (BUILD, then ACTIVE on the clock), addresses from the Neutron
ports, the embedded flavor, lists with filters and pages, update and delete, the ways to give
networks, boot from volume, multiple create, Nova's validation errors and quota, project
isolation, older microversions, the ``openstack`` CLI and the SDK's cloud layer."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from openstack import exceptions

from convergence_simcloud.client import SimControl
from convergence_simcloud.serve import clouds_yaml
from convergence_simcloud.state import SimCloud
from tests.simcloud.conftest import Start, connect
from tests.simcloud.test_images_flavors import OPENSTACK
from tests.simcloud.test_network import TWO_PROJECTS


def private_network(conn: Any, name: str = "private", cidr: str = "10.0.0.0/24") -> Any:
    net = conn.network.create_network(name=name)
    conn.network.create_subnet(network_id=net.id, ip_version=4, cidr=cidr)
    return net


def cirros(conn: Any) -> str:
    return str(conn.image.find_image("cirros").id)


def boot(conn: Any, name: str, net: Any, **attrs: Any) -> Any:
    return conn.compute.create_server(name=name, flavor_id="1", image_id=cirros(conn),
                                      networks=[{"uuid": net.id}], **attrs)


def started(start_cloud: Start, **kwargs: Any) -> tuple[SimCloud, str, Any]:
    cloud, url = start_cloud(**kwargs)
    return cloud, url, connect(url)


def test_a_server_builds_then_is_active_with_its_addresses_and_flavor(
        start_cloud: Start) -> None:
    cloud, _, conn = started(start_cloud)
    net = private_network(conn)
    conn.compute.create_keypair(name="deploy")
    made = boot(conn, "web-1", net, key_name="deploy", metadata={"role": "web"},
                availability_zone="az2")
    assert made.admin_password and made.links[0]["rel"] == "self"
    raw = conn.compute.get(f"/servers/{made.id}").json()["server"]
    assert raw["status"] == "BUILD"
    server = conn.compute.get_server(made.id)
    assert (server.status, server.vm_state, server.task_state) == ("BUILD", "building",
                                                                    "spawning")
    assert server.power_state == 0 and server.progress == 0
    with pytest.raises(exceptions.ResourceTimeout):
        conn.compute.wait_for_server(server, wait=0.2, interval=0.05)
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    server = conn.compute.wait_for_server(server, interval=0.05)
    assert (server.status, server.vm_state, server.task_state, server.power_state) == (
        "ACTIVE", "active", None, 1)
    assert server.launched_at and server.key_name == "deploy"
    assert server.metadata == {"role": "web"} and server.availability_zone == "az2"
    assert server.compute_host == "compute-az2" and server.host_id
    assert server.flavor.original_name == "m1.tiny"
    assert (server.flavor.vcpus, server.flavor.ram, server.flavor.disk) == (1, 512, 1)
    assert server.flavor.extra_specs == {} and server.flavor.swap == 0
    assert server.image.id == cirros(conn) and server.is_locked is False
    assert server.security_groups == [{"name": "default"}] and server.tags == []
    [port] = conn.network.ports(device_id=server.id)
    assert (port.device_owner, port.status, port.binding_host_id) == (
        "compute:az2", "ACTIVE", "compute-az2")
    [address] = server.addresses["private"]
    assert address == {"version": 4, "addr": port.fixed_ips[0]["ip_address"],
                       "OS-EXT-IPS:type": "fixed",
                       "OS-EXT-IPS-MAC:mac_addr": port.mac_address}
    ips = conn.compute.get(f"/servers/{server.id}/ips").json()
    assert ips == {"addresses": {"private": [{"version": 4, "addr": address["addr"]}]}}
    assert conn.compute.get(f"/servers/{server.id}/ips/public").status_code == 404
    assert conn.compute.find_server("web-1").id == server.id
    assert conn.compute.find_server("nope") is None


def test_floating_ips_of_a_servers_port_are_shown_as_floating(start_cloud: Start) -> None:
    cloud, _, conn = started(start_cloud)
    net = private_network(conn)
    server = boot(conn, "fip", net)
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    [port] = conn.network.ports(device_id=server.id)
    public = conn.network.find_network("public")
    router = conn.network.create_router(name="r", external_gateway_info={
        "network_id": public.id})
    conn.network.add_interface_to_router(router,
                                         subnet_id=conn.network.get_network(net.id).subnet_ids[0])
    fip = conn.network.create_ip(floating_network_id=public.id, port_id=port.id)
    addresses = conn.compute.get_server(server.id).addresses["private"]
    assert [a["OS-EXT-IPS:type"] for a in addresses] == ["fixed", "floating"]
    assert addresses[1]["addr"] == fip.floating_ip_address
    conn.compute.delete_server(server)
    assert conn.network.get_ip(fip.id).port_id is None  # its port went with the server


def test_lists_filter_by_name_status_and_tags_and_paginate(start_cloud: Start) -> None:
    cloud, _, conn = started(start_cloud)
    net = private_network(conn)
    web = [boot(conn, f"web-{i}", net, tags=["web"]) for i in range(3)]
    db = boot(conn, "db-0", net)
    names = {s.name for s in conn.compute.servers(details=False)}
    assert names == {"web-0", "web-1", "web-2", "db-0"}
    assert {s.name for s in conn.compute.servers(name="^web-")} == {"web-0", "web-1", "web-2"}
    assert [s.name for s in conn.compute.servers(tags="web", name="1")] == ["web-1"]
    assert [s.id for s in conn.compute.servers(status="ACTIVE")] == []
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    assert len(list(conn.compute.servers(status="ACTIVE"))) == 4
    page = conn.compute.get("/servers/detail?limit=2").json()
    assert len(page["servers"]) == 2 and page["servers"][0]["id"] == db.id  # newest first
    assert page["servers_links"][0]["rel"] == "next"
    assert "marker=" in page["servers_links"][0]["href"]
    rest = conn.compute.get(f"/servers?limit=2&marker={page['servers'][1]['id']}").json()
    assert [s["id"] for s in rest["servers"]] == [web[1].id, web[0].id]
    assert {s.id for s in conn.compute.servers(limit=1)} == {*(w.id for w in web), db.id}
    by_name = conn.compute.servers(sort_key="display_name", sort_dir="asc")
    assert [s.name for s in by_name] == ["db-0", "web-0", "web-1", "web-2"]
    bad = conn.compute.get("/servers?marker=nope")
    assert bad.status_code == 400 and "marker [nope] not found" in bad.text


def test_update_and_delete_a_server(start_cloud: Start) -> None:
    cloud, _, conn = started(start_cloud)
    net = private_network(conn)
    server = boot(conn, "old", net)
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    renamed = conn.compute.update_server(server, name="new", description="the new one")
    assert (renamed.name, renamed.description) == ("new", "the new one")
    assert conn.compute.get_server(server.id).name == "new"
    [port] = conn.network.ports(device_id=server.id)
    conn.compute.delete_server(server)
    conn.compute.wait_for_delete(server, interval=0.05, wait=5)
    with pytest.raises(exceptions.NotFoundException):
        conn.compute.get_server(server.id)
    raw = conn.compute.get(f"/servers/{server.id}")
    assert raw.status_code == 404
    assert raw.json() == {"itemNotFound": {
        "code": 404, "message": f"Instance {server.id} could not be found."}}
    assert conn.network.find_port(port.id) is None  # Nova's own port is deleted


def test_a_delete_can_take_time(start_cloud: Start) -> None:
    from convergence_simcloud.state import Options

    cloud, _, conn = started(start_cloud, options=Options(server_delete_seconds=5))
    server = boot(conn, "slow", private_network(conn))
    conn.compute.delete_server(server)
    assert conn.compute.get_server(server.id).task_state == "deleting"
    cloud.clock.advance(5)  # type: ignore[attr-defined]
    assert conn.compute.find_server(server.id) is None


def test_networks_by_port_fixed_ip_auto_and_none(start_cloud: Start) -> None:
    cloud, _, conn = started(start_cloud)
    net = private_network(conn)
    image = cirros(conn)
    given = conn.network.create_port(network_id=net.id, name="given")
    by_port = conn.compute.create_server(name="p", flavor_id="1", image_id=image,
                                         networks=[{"port": given.id}])
    assert conn.network.get_port(given.id).device_id == by_port.id
    with pytest.raises(exceptions.ConflictException, match=f"Port {given.id} is still in use"):
        conn.compute.create_server(name="q", flavor_id="1", image_id=image,
                                   networks=[{"port": given.id}])
    fixed = conn.compute.create_server(name="f", flavor_id="1", image_id=image,
                                       networks=[{"uuid": net.id, "fixed_ip": "10.0.0.77"}])
    with pytest.raises(exceptions.BadRequestException,
                       match=f"10.0.0.77 is already in use on instance {fixed.id}"):
        conn.compute.create_server(name="g", flavor_id="1", image_id=image,
                                   networks=[{"uuid": net.id, "fixed_ip": "10.0.0.77"}])
    auto = conn.compute.create_server(name="a", flavor_id="1", image_id=image,
                                      networks="auto")
    none = conn.compute.create_server(name="n", flavor_id="1", image_id=image,
                                      networks="none")
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    assert conn.network.get_port(given.id).status == "ACTIVE"
    assert conn.compute.get_server(fixed.id).addresses["private"][0]["addr"] == "10.0.0.77"
    assert list(conn.compute.get_server(auto.id).addresses) == ["private"]
    assert conn.compute.get_server(none.id).addresses == {}
    conn.compute.delete_server(by_port)
    kept = conn.network.get_port(given.id)  # a port Nova was given is only unbound
    assert (kept.device_id, kept.device_owner, kept.status) == ("", "", "DOWN")
    private_network(conn, "second", "10.9.0.0/24")
    with pytest.raises(exceptions.ConflictException, match="More than one possible network"):
        conn.compute.create_server(name="x", flavor_id="1", image_id=image, networks="auto")
    with pytest.raises(exceptions.BadRequestException, match="'networks' is a required"):
        conn.compute.create_server(name="x", flavor_id="1", image_id=image)


def test_nova_refuses_bad_requests(start_cloud: Start) -> None:
    _, _, conn = started(start_cloud)
    net = private_network(conn)
    image = cirros(conn)
    ok: dict[str, Any] = {"name": "x", "flavor_id": "1", "image_id": image,
                          "networks": [{"uuid": net.id}]}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"flavor_id": "99"}, "Flavor 99 could not be found."),
        ({"image_id": "nope"}, "Can not find requested image"),
        ({"key_name": "nope"}, "Invalid key_name provided."),
        ({"networks": [{"uuid": "nope"}]}, "network uuid is not in proper format (nope)"),
        ({"networks": [{"uuid": "0" * 32}]}, f"Network {'0' * 32} could not be found."),
        ({"availability_zone": "mars"}, "The requested availability zone is not available"),
        ({"image_id": conn.image.find_image("ubuntu").id},
         "Flavor's disk is too small for requested image."),
    ]
    for change, message in cases:
        with pytest.raises(exceptions.BadRequestException) as caught:
            conn.compute.create_server(**{**ok, **change})
        assert message in str(caught.value)
    raw = conn.compute.post("/servers", json={"server": {"name": "x", "flavorRef": "99",
                                                         "imageRef": image,
                                                         "networks": "none"}})
    assert raw.json() == {"badRequest": {"code": 400,
                                         "message": "Flavor 99 could not be found."}}
    assert list(conn.compute.servers()) == []


def test_the_instance_quota_and_an_injected_quota_fault(start_cloud: Start) -> None:
    _, url, conn = started(start_cloud)
    net = private_network(conn)
    conn.compute.update_quota_set(conn.current_project_id, instances=1)
    boot(conn, "one", net)
    with pytest.raises(exceptions.ForbiddenException) as caught:
        boot(conn, "two", net)
    assert ("Quota exceeded for instances: Requested 1, but already used 1 of 1 instances"
            in str(caught.value))
    raw = conn.compute.post("/servers", microversion="2.61", json={"server": {
        "name": "two", "flavorRef": "1", "imageRef": cirros(conn), "networks": "none"}})
    assert raw.status_code == 403 and raw.json()["forbidden"]["code"] == 403
    conn.compute.update_quota_set(conn.current_project_id, instances=10, cores=1)
    with pytest.raises(exceptions.ForbiddenException, match="Quota exceeded for cores"):
        boot(conn, "two", net)
    conn.compute.update_quota_set(conn.current_project_id, cores=20)
    SimControl(url).add_rule("quota_exceeded", service="compute", kind="server",
                             name="batch-*", count=1)
    with pytest.raises(exceptions.ForbiddenException, match="Quota exceeded for instances"):
        boot(conn, "batch-1", net)
    assert boot(conn, "batch-2", net).id  # the rule was spent


def test_multiple_create_makes_as_many_as_the_quota_allows(start_cloud: Start) -> None:
    _, _, conn = started(start_cloud)
    net = private_network(conn)
    conn.compute.update_quota_set(conn.current_project_id, instances=3)
    boot(conn, "first", net)
    made = boot(conn, "many", net, min_count=1, max_count=5)
    names = {s.name: s for s in conn.compute.servers()}
    assert set(names) == {"first", "many-1", "many-2"} and made.id == names["many-1"].id
    assert names["many-1"].reservation_id == names["many-2"].reservation_id
    with pytest.raises(exceptions.ForbiddenException,
                       match="Requested 2, but already used 3 of 3 instances"):
        boot(conn, "more", net, min_count=2, max_count=2)
    with pytest.raises(exceptions.BadRequestException, match="min_count must be <= max_count"):
        boot(conn, "more", net, min_count=3, max_count=2)


def test_projects_see_only_their_servers_and_admins_all_on_request(
        start_cloud: Start) -> None:
    _, url = start_cloud(TWO_PROJECTS)
    admin = connect(url)
    demo = connect(url, username="demo", password="demo", project_name="demo")
    mine = boot(demo, "demo-web", private_network(demo))
    theirs = boot(admin, "admin-web", private_network(admin))
    assert [s.id for s in demo.compute.servers()] == [mine.id]
    assert [s.id for s in admin.compute.servers()] == [theirs.id]
    assert {s.id for s in admin.compute.servers(all_projects=True)} == {mine.id, theirs.id}
    assert [s.id for s in admin.compute.servers(all_projects=True,
                                                project_id=demo.current_project_id)] == [
        mine.id]
    with pytest.raises(exceptions.NotFoundException):
        demo.compute.get_server(theirs.id)
    with pytest.raises(exceptions.ForbiddenException):
        list(demo.compute.servers(all_projects=True))
    assert demo.compute.find_server("admin-web") is None
    shown = admin.compute.get_server(mine.id)  # an admin may read any server by id
    assert shown.project_id == demo.current_project_id
    assert demo.compute.get_server(mine.id).compute_host is None  # admin-only attributes
    with pytest.raises(exceptions.NotFoundException):
        demo.compute.delete_server(theirs, ignore_missing=False)


def test_older_microversions_show_older_shapes(start_cloud: Start) -> None:
    cloud, _, conn = started(start_cloud)
    server = boot(conn, "v", private_network(conn))
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    old = conn.compute.get(f"/servers/{server.id}", microversion="2.1").json()["server"]
    assert old["flavor"]["id"] == "1" and "links" in old["flavor"]
    assert "locked" not in old and "description" not in old and "tags" not in old
    assert "OS-EXT-SRV-ATTR:hostname" not in old and "host_status" not in old
    new = conn.compute.get(f"/servers/{server.id}", microversion="2.61").json()["server"]
    assert new["flavor"]["original_name"] == "m1.tiny" and new["host_status"] == "UP"
    assert new["OS-EXT-SRV-ATTR:hostname"] == "v" and new["description"] is None
    legacy = conn.compute.post("/servers", microversion="2.36", json={"server": {
        "name": "legacy", "flavorRef": "1", "imageRef": cirros(conn)}})
    assert legacy.status_code == 202, legacy.text  # before 2.37 networks may be left out
    assert legacy.headers["Location"].endswith(f"/servers/{legacy.json()['server']['id']}")


def test_the_openstack_cli_creates_and_lists_servers(start_cloud: Start,
                                                    tmp_path: Path) -> None:
    cloud, url, conn = started(start_cloud)
    net = private_network(conn, "cli-net")
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(clouds_yaml(url))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env["OS_CLIENT_CONFIG_FILE"] = str(clouds)

    def cli(*args: str, output: bool = True) -> Any:
        formats = ["-f", "json"] if output else []
        done = subprocess.run([str(OPENSTACK), "--os-cloud", "simcloud", *args, *formats],
                              env=env, capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if output else done.stdout

    made = cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--network",
               net.name, "cli-vm")
    assert made["name"] == "cli-vm" and made["status"] == "BUILD"
    cloud.clock.advance(2)  # type: ignore[attr-defined]
    [listed] = cli("server", "list")
    assert (listed["Name"], listed["Status"]) == ("cli-vm", "ACTIVE")
    assert listed["Networks"] == {"cli-net": [conn.compute.get_server(made["id"]).addresses[
        "cli-net"][0]["addr"]]}
    shown = cli("server", "show", "cli-vm")
    assert shown["flavor"]["original_name"] == "m1.tiny", shown["flavor"]
    cli("server", "delete", "--wait", "cli-vm", output=False)
    assert cli("server", "list") == []


def test_boot_from_a_volume_and_from_an_image_copied_to_a_volume(start_cloud: Start) -> None:
    cloud, _, conn = started(start_cloud)
    net = private_network(conn)
    root = conn.block_storage.create_volume(size=1, name="root")
    cloud.clock.advance(5)  # type: ignore[attr-defined]
    from_volume = conn.compute.create_server(
        name="bfv", flavor_id="1", networks=[{"uuid": net.id}],
        block_device_mapping=[{"boot_index": 0, "uuid": root.id, "source_type": "volume",
                               "destination_type": "volume"}])
    copied = conn.compute.create_server(
        name="copy", flavor_id="1", networks=[{"uuid": net.id}],
        block_device_mapping=[{"boot_index": 0, "uuid": cirros(conn), "source_type": "image",
                               "destination_type": "volume", "volume_size": 2,
                               "delete_on_termination": True}])
    with pytest.raises(exceptions.BadRequestException, match="status must be 'available'"):
        conn.compute.create_server(
            name="again", flavor_id="1", networks=[{"uuid": net.id}],
            block_device_mapping=[{"boot_index": 0, "uuid": root.id, "source_type": "volume",
                                   "destination_type": "volume"}])
    cloud.clock.advance(5)  # type: ignore[attr-defined]
    shown = conn.compute.wait_for_server(from_volume, interval=0.05)
    raw = conn.compute.get(f"/servers/{shown.id}", microversion="2.61").json()["server"]
    assert raw["image"] == ""  # a volume-backed server shows no image
    assert [v.id for v in shown.attached_volumes] == [root.id]
    assert conn.block_storage.get_volume(root.id).status == "in-use"
    made = conn.compute.get_server(copied.id)
    [copy] = made.attached_volumes
    assert copy.delete_on_termination is True
    volume = conn.block_storage.get_volume(copy.id)
    assert (volume.size, volume.is_bootable, volume.status) == (2, True, "in-use")
    conn.compute.delete_server(from_volume)
    conn.compute.delete_server(copied)
    cloud.clock.advance(5)  # type: ignore[attr-defined]
    assert conn.block_storage.get_volume(root.id).status == "available"
    assert conn.block_storage.find_volume(copy.id) is None  # deleted with its server


def test_the_sdk_cloud_layer_boots_with_a_floating_ip_and_cleans_up(start_cloud: Start) -> None:
    from convergence_simcloud.state import Options

    _, _, conn = started(start_cloud, options=Options(build_seconds=0))
    net = private_network(conn)
    public = conn.network.find_network("public")
    router = conn.network.create_router(name="r", external_gateway_info={
        "network_id": public.id})
    conn.network.add_interface_to_router(router,
                                         subnet_id=conn.network.get_network(net.id).subnet_ids[0])
    conn.create_server("cloud-vm", image="cirros", flavor="m1.tiny", network="private",
                       wait=True, timeout=10)
    server = conn.get_server("cloud-vm")
    assert server.status == "ACTIVE" and server.private_v4.startswith("10.0.0.")
    assert server.public_v4.startswith("172.24.4.") and server.interface_ip == server.public_v4
    assert conn.delete_server("cloud-vm", wait=True, timeout=10, delete_ips=True)
    assert conn.list_servers() == [] and list(conn.network.ips()) == []
