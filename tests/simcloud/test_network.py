"""Neutron of the simulated cloud, as unmodified openstacksdk meets it over real HTTP: networks,
subnets, ports with fixed IPs from the pool, security groups, filters and pagination, project
isolation, the seeded ``public`` network and Neutron's errors as the SDK's exceptions."""

from __future__ import annotations

import ipaddress

import pytest
from openstack import exceptions

from convergence_simcloud.seed import Seed, SeedUser
from tests.simcloud.conftest import Start, connect

TWO_PROJECTS = Seed(projects=["admin", "demo"], users=[
    SeedUser("admin", "admin", {"admin": ["admin", "member"]}),
    SeedUser("demo", "demo", {"demo": ["member"]})])


def test_a_network_subnet_and_port_get_an_address_from_the_pool(cloud_url: str) -> None:
    conn = connect(cloud_url)
    net = conn.network.create_network(name="app")
    assert net.status == "ACTIVE" and net.is_admin_state_up and not net.is_shared
    subnet = conn.network.create_subnet(network_id=net.id, name="app-v4", ip_version=4,
                                        cidr="10.0.0.0/24")
    assert subnet.gateway_ip == "10.0.0.1" and subnet.is_dhcp_enabled
    assert subnet.allocation_pools == [{"start": "10.0.0.2", "end": "10.0.0.254"}]
    assert conn.network.get_network(net.id).subnet_ids == [subnet.id]
    port = conn.network.create_port(network_id=net.id, name="web")
    assert port.status == "DOWN" and port.is_admin_state_up
    assert port.mac_address.startswith("fa:16:3e:")
    [fixed] = port.fixed_ips
    assert fixed["subnet_id"] == subnet.id
    assert ipaddress.ip_address(fixed["ip_address"]) in ipaddress.ip_network("10.0.0.0/24")
    dhcp = list(conn.network.ports(network_id=net.id, device_owner="network:dhcp"))
    assert len(dhcp) == 1 and dhcp[0].fixed_ips[0]["ip_address"] != fixed["ip_address"]
    chosen = conn.network.create_port(network_id=net.id,
                                      fixed_ips=[{"ip_address": "10.0.0.50"}])
    assert chosen.fixed_ips == [{"subnet_id": subnet.id, "ip_address": "10.0.0.50"}]
    with pytest.raises(exceptions.ConflictException, match="already allocated"):
        conn.network.create_port(network_id=net.id, fixed_ips=[{"ip_address": "10.0.0.50"}])
    updated = conn.network.update_port(port, device_id="server-1",
                                       device_owner="compute:nova")
    assert (updated.device_id, updated.device_owner) == ("server-1", "compute:nova")
    assert [p.id for p in conn.network.ports(device_id="server-1")] == [port.id]


def test_find_filter_and_paginate_networks(cloud_url: str) -> None:
    conn = connect(cloud_url)
    made = {conn.network.create_network(name=f"net-{i}").id for i in range(5)}
    found = conn.network.find_network("net-3")
    assert found is not None and found.name == "net-3"
    assert conn.network.find_network(found.id).id == found.id
    assert conn.network.find_network("nope") is None
    assert [n.name for n in conn.network.networks(name="net-2")] == ["net-2"]
    assert {n.id for n in conn.network.networks(limit=2)} == made | {
        conn.network.find_network("public").id}
    page = conn.network.get("/networks?limit=2").json()
    assert len(page["networks"]) == 2
    assert [link["rel"] for link in page["networks_links"]] == ["next"]
    named = conn.network.get("/networks?name=net-1&fields=id&fields=name").json()["networks"]
    assert [set(n) for n in named] == [{"id", "name"}]


def test_deleting_a_network_with_a_port_is_a_conflict(cloud_url: str) -> None:
    conn = connect(cloud_url)
    net = conn.network.create_network(name="busy")
    conn.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.1.0.0/24")
    port = conn.network.create_port(network_id=net.id)
    with pytest.raises(exceptions.ConflictException, match="still in use"):
        conn.network.delete_network(net)
    raw = conn.network.delete(f"/networks/{net.id}", raise_exc=False)
    assert raw.status_code == 409
    assert raw.json()["NeutronError"]["type"] == "NetworkInUse"
    conn.network.delete_port(port)
    conn.network.delete_network(net)  # the DHCP port goes with it
    assert conn.network.find_network("busy") is None
    assert list(conn.network.ports(network_id=net.id)) == []


def test_a_missing_object_is_not_found(cloud_url: str) -> None:
    conn = connect(cloud_url)
    with pytest.raises(exceptions.ResourceNotFound):
        conn.network.get_network("0" * 32)
    with pytest.raises(exceptions.ResourceNotFound):
        conn.network.get_port("0" * 32)
    with pytest.raises(exceptions.ResourceNotFound):
        conn.network.delete_subnet("0" * 32, ignore_missing=False)
    raw = conn.network.get(f"/ports/{'0' * 32}", raise_exc=False)
    assert raw.status_code == 404 and raw.json()["NeutronError"]["type"] == "PortNotFound"


def test_an_exhausted_pool_is_the_sdks_conflict(cloud_url: str) -> None:
    conn = connect(cloud_url)
    net = conn.network.create_network(name="tiny")
    subnet = conn.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.2.0.0/30",
                                        is_dhcp_enabled=False)
    assert subnet.allocation_pools == [{"start": "10.2.0.2", "end": "10.2.0.2"}]
    assert conn.network.create_port(network_id=net.id).fixed_ips[0]["ip_address"] == \
        "10.2.0.2"
    with pytest.raises(exceptions.ConflictException, match="No more IP addresses"):
        conn.network.create_port(network_id=net.id)


def test_bad_input_is_a_bad_request(cloud_url: str) -> None:
    conn = connect(cloud_url)
    net = conn.network.create_network(name="bad")
    with pytest.raises(exceptions.BadRequestException):
        conn.network.create_subnet(network_id=net.id, ip_version=4, cidr="not-a-cidr")
    with pytest.raises(exceptions.BadRequestException):
        conn.network.create_subnet(network_id=net.id, ip_version=6, cidr="10.3.0.0/24")


def test_projects_are_isolated_but_public_is_shared(start_cloud: Start) -> None:
    _, url = start_cloud(TWO_PROJECTS)
    admin = connect(url)
    secret = admin.network.create_network(name="admin-only")
    demo = connect(url, username="demo", password="demo", project_name="demo")
    assert [n.name for n in demo.network.networks()] == ["public"]
    public = demo.network.find_network("public")
    assert public is not None and public.is_router_external and public.is_shared
    [subnet] = list(demo.network.subnets(network_id=public.id))
    assert subnet.cidr == "172.24.4.0/24" and not subnet.is_dhcp_enabled
    assert subnet.allocation_pools == [{"start": "172.24.4.10", "end": "172.24.4.250"}]
    with pytest.raises(exceptions.ResourceNotFound):
        demo.network.get_network(secret.id)
    mine = demo.network.create_network(name="demo-net")
    assert "demo-net" not in {n.name for n in admin.network.networks()}
    # The SDK's network lists drop ``all_projects``; an admin names the project instead.
    assert [n.name for n in admin.network.networks(project_id=mine.project_id)] == \
        ["demo-net"]
    everyone = admin.network.get("/networks?all_tenants=1").json()["networks"]
    assert {"demo-net", "admin-only", "public"} <= {n["name"] for n in everyone}
    assert admin.network.get_network(mine.id).name == "demo-net"


def test_the_default_security_group_and_rules(start_cloud: Start) -> None:
    _, url = start_cloud(TWO_PROJECTS)
    demo = connect(url, username="demo", password="demo", project_name="demo")
    [default] = list(demo.network.security_groups())
    assert default.name == "default"
    rules = {(r["direction"], r["ethertype"], r["remote_group_id"])
             for r in default.security_group_rules}
    assert rules == {("egress", "IPv4", None), ("egress", "IPv6", None),
                     ("ingress", "IPv4", default.id), ("ingress", "IPv6", default.id)}
    web = demo.network.create_security_group(name="web")
    rule = demo.network.create_security_group_rule(
        security_group_id=web.id, direction="ingress", ethertype="IPv4", protocol="tcp",
        port_range_min=80, port_range_max=80, remote_ip_prefix="0.0.0.0/0")
    assert rule.port_range_min == 80
    with pytest.raises(exceptions.ConflictException):
        demo.network.create_security_group_rule(
            security_group_id=web.id, direction="ingress", ethertype="IPv4",
            protocol="tcp", port_range_min=80, port_range_max=80,
            remote_ip_prefix="0.0.0.0/0")
    assert len(list(demo.network.security_group_rules(security_group_id=web.id))) == 3
    net = demo.network.create_network(name="n")
    demo.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.4.0.0/24")
    port = demo.network.create_port(network_id=net.id)
    assert port.security_group_ids == [default.id]
    on_web = demo.network.create_port(network_id=net.id, security_group_ids=[web.id])
    with pytest.raises(exceptions.ConflictException):
        demo.network.delete_security_group(web)
    demo.network.delete_port(on_web)
    demo.network.delete_security_group(web)
    assert [g.name for g in demo.network.security_groups()] == ["default"]
    admin = connect(url)
    assert default.id not in {g.id for g in admin.network.security_groups()}


def test_the_network_endpoint_lists_its_version(cloud_url: str) -> None:
    conn = connect(cloud_url)
    endpoint = conn.session.get_endpoint(service_type="network", interface="public")
    versions = conn.session.get(endpoint + "/").json()["versions"]
    assert [v["id"] for v in versions] == ["v2.0"]


def test_tags_are_set_checked_and_filtered(cloud_url: str) -> None:
    conn = connect(cloud_url)
    blue = conn.network.create_network(name="blue")
    red = conn.network.create_network(name="red")
    conn.network.set_tags(blue, ["env:prod", "team:a"])
    blue.add_tag(conn.network, "color:blue")
    assert sorted(conn.network.get_network(blue.id).tags) == ["color:blue", "env:prod",
                                                               "team:a"]
    assert blue.check_tag(conn.network, "team:a") is not None
    with pytest.raises(exceptions.ResourceNotFound):
        blue.check_tag(conn.network, "absent")
    red.add_tag(conn.network, "env:prod")
    assert {n.name for n in conn.network.networks(tags="env:prod")} == {"blue", "red"}
    assert [n.name for n in conn.network.networks(tags="env:prod,team:a")] == ["blue"]
    assert {n.name for n in conn.network.networks(not_tags="team:a")} == {"red", "public"}
    blue.remove_tag(conn.network, "team:a")
    assert "team:a" not in conn.network.get_network(blue.id).tags
