"""Neutron's routers, floating IPs, quotas and delete faults in the simulated cloud, as unmodified
openstacksdk (and the ``openstack`` CLI) meets them over real HTTP: gateways on ``public``,
interfaces on subnets, floating IPs reachable through a router, in-use conflicts, project
isolation, fault rules and Neutron's over-quota answer as the SDK's exceptions."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import openstack
import pytest
import yaml
from openstack import exceptions

from convergence_simcloud import faults
from tests.simcloud.conftest import Start, connect
from tests.simcloud.test_network import TWO_PROJECTS

ROOT = Path(__file__).resolve().parents[2]
OPENSTACK = ROOT / ".venv" / "bin" / "openstack"
POOL = (ipaddress.ip_address("172.24.4.10"), ipaddress.ip_address("172.24.4.250"))


def all_ports(conn: openstack.connection.Connection, **query: str) -> list[Any]:
    """The ports of every project matching ``query`` (the SDK's lists drop ``all_projects``)."""
    found = conn.network.get("/ports", params={**query, "all_tenants": "1"}).json()["ports"]
    return [conn.network.get_port(p["id"]) for p in found]


def tenant_net(conn: openstack.connection.Connection, name: str,
               cidr: str = "10.0.0.0/24") -> tuple[Any, Any]:
    net = conn.network.create_network(name=name)
    subnet = conn.network.create_subnet(network_id=net.id, ip_version=4, cidr=cidr,
                                        name=f"{name}-v4")
    return net, subnet


def routed_port(conn: openstack.connection.Connection) -> tuple[Any, Any, Any, Any]:
    """A router from ``public`` to a new subnet, and a port on that subnet."""
    public = conn.network.find_network("public")
    net, subnet = tenant_net(conn, "app")
    router = conn.network.create_router(name="r1",
                                        external_gateway_info={"network_id": public.id})
    conn.network.add_interface_to_router(router, subnet_id=subnet.id)
    port = conn.network.create_port(network_id=net.id, name="web")
    return public, subnet, router, port


def test_a_router_gets_a_gateway_port_and_interfaces(cloud_url: str) -> None:
    conn = connect(cloud_url)
    public = conn.network.find_network("public")
    net, subnet = tenant_net(conn, "app")
    router = conn.network.create_router(name="r1",
                                        external_gateway_info={"network_id": public.id})
    assert router.status == "ACTIVE" and router.is_admin_state_up
    assert not router.is_distributed and not router.is_ha and router.routes == []
    gateway = router.external_gateway_info
    assert gateway["network_id"] == public.id and gateway["enable_snat"] is True
    [ext_ip] = gateway["external_fixed_ips"]
    assert POOL[0] <= ipaddress.ip_address(ext_ip["ip_address"]) <= POOL[1]
    # Like Neutron's, the gateway port belongs to no project: only an admin asking for all
    # projects sees it.
    assert list(conn.network.ports(device_id=router.id)) == []
    [gw_port] = all_ports(conn, device_id=router.id, device_owner="network:router_gateway")
    assert gw_port.network_id == public.id and gw_port.fixed_ips == [ext_ip]

    answer = conn.network.add_interface_to_router(router, subnet_id=subnet.id)
    assert answer["subnet_id"] == subnet.id and answer["network_id"] == net.id
    port = conn.network.get_port(answer["port_id"])
    assert port.device_owner == "network:router_interface" and port.device_id == router.id
    assert port.fixed_ips == [{"subnet_id": subnet.id, "ip_address": "10.0.0.1"}]
    with pytest.raises(exceptions.BadRequestException, match="already has a port"):
        conn.network.add_interface_to_router(router, subnet_id=subnet.id)
    with pytest.raises(exceptions.ConflictException, match="cannot be deleted directly"):
        conn.network.delete_port(port)
    with pytest.raises(exceptions.ConflictException, match="cannot be deleted directly"):
        conn.network.delete_port(gw_port)
    with pytest.raises(exceptions.ConflictException):
        conn.network.delete_subnet(subnet)
    with pytest.raises(exceptions.ConflictException, match="still has ports"):
        conn.network.delete_router(router)
    raw = conn.network.delete(f"/routers/{router.id}", raise_exc=False)
    assert raw.json()["NeutronError"]["type"] == "RouterInUse"

    with pytest.raises(exceptions.BadRequestException, match="nexthop is not connected"):
        conn.network.update_router(router, routes=[{"destination": "192.168.0.0/24",
                                                    "nexthop": "10.5.0.9"}])
    routed = conn.network.update_router(router, routes=[{"destination": "192.168.0.0/24",
                                                         "nexthop": "10.0.0.9"}])
    assert routed.routes == [{"destination": "192.168.0.0/24", "nexthop": "10.0.0.9"}]
    with pytest.raises(exceptions.ConflictException, match="required by one or more routes"):
        conn.network.remove_interface_from_router(router, subnet_id=subnet.id)
    conn.network.update_router(router, routes=[])
    conn.network.remove_interface_from_router(router, subnet_id=subnet.id)
    assert list(conn.network.ports(device_id=router.id,
                                   device_owner="network:router_interface")) == []
    with pytest.raises(exceptions.NotFoundException, match="has no interface on subnet"):
        conn.network.remove_interface_from_router(router, subnet_id=subnet.id)
    # By port: an existing port becomes the interface, and goes when it is removed.
    mine = conn.network.create_port(network_id=net.id, fixed_ips=[{"subnet_id": subnet.id}])
    conn.network.add_interface_to_router(router, port_id=mine.id)
    assert conn.network.get_port(mine.id).device_owner == "network:router_interface"
    conn.network.remove_interface_from_router(router, port_id=mine.id)
    with pytest.raises(exceptions.NotFoundException):
        conn.network.get_port(mine.id)
    with pytest.raises(exceptions.NotFoundException, match="does not have an interface"):
        conn.network.remove_interface_from_router(router, port_id=mine.id)

    cleared = conn.network.update_router(router, external_gateway_info={})
    assert cleared.external_gateway_info is None
    assert all_ports(conn, device_id=router.id) == []
    again = conn.network.update_router(router, external_gateway_info={"network_id": public.id},
                                       name="r2")
    assert again.name == "r2" and again.external_gateway_info["network_id"] == public.id
    conn.network.set_tags(again, ["blue"])
    assert [r.id for r in conn.network.routers(tags="blue")] == [router.id]
    conn.network.delete_router(router)  # the gateway port goes with it
    assert conn.network.find_router("r2") is None
    assert all_ports(conn, device_id=router.id) == []
    conn.network.delete_subnet(subnet)


def test_gateway_and_interface_errors(cloud_url: str) -> None:
    conn = connect(cloud_url)
    net, _ = tenant_net(conn, "private")
    with pytest.raises(exceptions.BadRequestException, match="not a valid external network"):
        conn.network.create_router(name="bad", external_gateway_info={"network_id": net.id})
    router = conn.network.create_router(name="r")
    assert router.external_gateway_info is None
    assert conn.network.find_extension("router").name == "Neutron L3 Router"
    assert conn.network.find_extension("external-gateway-multihoming") is None
    nogw = conn.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.9.0.0/24",
                                      gateway_ip=None)
    with pytest.raises(exceptions.BadRequestException, match="must have a gateway IP"):
        conn.network.add_interface_to_router(router, subnet_id=nogw.id)
    other = conn.network.create_network(name="other")
    taken = conn.network.create_subnet(network_id=other.id, ip_version=4,
                                       cidr="10.8.0.0/24", enable_dhcp=False)
    conn.network.create_port(network_id=other.id, fixed_ips=[{"ip_address": "10.8.0.1"}])
    with pytest.raises(exceptions.ConflictException, match="in use"):
        conn.network.add_interface_to_router(router, subnet_id=taken.id)


def test_floating_ips_associate_through_a_router(cloud_url: str) -> None:
    conn = connect(cloud_url)
    public, subnet, router, port = routed_port(conn)
    fip = conn.network.create_ip(floating_network_id=public.id)
    assert fip.status == "DOWN" and fip.port_id is None and fip.router_id is None
    assert POOL[0] <= ipaddress.ip_address(fip.floating_ip_address) <= POOL[1]
    [held] = all_ports(conn, device_id=fip.id)
    assert held.device_owner == "network:floatingip"
    assert held.fixed_ips[0]["ip_address"] == fip.floating_ip_address
    assert conn.network.find_available_ip().id == fip.id

    bound = conn.network.update_ip(fip, port_id=port.id)
    assert bound.status == "ACTIVE" and bound.router_id == router.id
    assert bound.fixed_ip_address == port.fixed_ips[0]["ip_address"]
    assert conn.network.find_available_ip() is None
    assert [f.id for f in conn.network.ips(port_id=port.id)] == [fip.id]
    with pytest.raises(exceptions.ConflictException, match="required by one or more"):
        conn.network.remove_interface_from_router(router, subnet_id=subnet.id)
    with pytest.raises(exceptions.ConflictException):
        conn.network.update_router(router, external_gateway_info={})
    with pytest.raises(exceptions.ConflictException, match="still in use"):
        conn.network.delete_network(public)

    free = conn.network.update_ip(fip, port_id=None)
    assert free.status == "DOWN" and free.port_id is None and free.fixed_ip_address is None
    second = conn.network.create_ip(floating_network_id=public.id, port_id=port.id)
    assert second.status == "ACTIVE" and second.port_id == port.id
    conn.network.delete_port(port)  # deleting the port disassociates its floating IP
    gone = conn.network.get_ip(second.id)
    assert gone.port_id is None and gone.status == "DOWN" and gone.router_id is None
    conn.network.delete_ip(fip)
    assert all_ports(conn, device_id=fip.id) == []
    assert {f.id for f in conn.network.ips()} == {second.id}


def test_an_unreachable_port_and_a_non_external_network_are_refused(cloud_url: str) -> None:
    conn = connect(cloud_url)
    public = conn.network.find_network("public")
    net, _ = tenant_net(conn, "lonely")
    port = conn.network.create_port(network_id=net.id)
    with pytest.raises(exceptions.NotFoundException, match="is not reachable from subnet"):
        conn.network.create_ip(floating_network_id=public.id, port_id=port.id)
    with pytest.raises(exceptions.BadRequestException, match="not a valid external network"):
        conn.network.create_ip(floating_network_id=net.id)
    fip = conn.network.create_ip(floating_network_id=public.id,
                                 floating_ip_address="172.24.4.100")
    assert fip.floating_ip_address == "172.24.4.100"
    with pytest.raises(exceptions.ConflictException, match="already allocated"):
        conn.network.create_ip(floating_network_id=public.id,
                               floating_ip_address="172.24.4.100")
    with pytest.raises(exceptions.NotFoundException, match="is not reachable"):
        conn.network.update_ip(fip, port_id=port.id)
    with pytest.raises(exceptions.BadRequestException, match="does not have fixed ip"):
        conn.network.update_ip(fip, port_id=port.id, fixed_ip_address="10.0.0.99")


def test_floating_ips_run_out(start_cloud: Start) -> None:
    from convergence_simcloud.seed import Seed, SeedNetwork
    seed = Seed(networks=[SeedNetwork(pool_start="172.24.4.10", pool_end="172.24.4.11")])
    _, url = start_cloud(seed)
    conn = connect(url)
    public = conn.network.find_network("public")
    conn.network.create_ip(floating_network_id=public.id)
    conn.network.create_ip(floating_network_id=public.id)
    with pytest.raises(exceptions.ConflictException, match="No more IP addresses"):
        conn.network.create_ip(floating_network_id=public.id)
    raw = conn.network.post("/floatingips", json={"floatingip": {
        "floating_network_id": public.id}}, raise_exc=False)
    assert raw.json()["NeutronError"]["type"] == "IpAddressGenerationFailure"


def test_a_project_sees_only_its_routers_and_floating_ips(start_cloud: Start) -> None:
    _, url = start_cloud(TWO_PROJECTS)
    admin = connect(url)
    demo = connect(url, username="demo", password="demo", project_name="demo")
    public = demo.network.find_network("public")
    _, _, router, port = routed_port(demo)
    fip = demo.network.create_ip(floating_network_id=public.id, port_id=port.id)
    assert fip.router_id == router.id
    mine = admin.network.create_router(name="admin-router")
    admin_fip = admin.network.create_ip(floating_network_id=public.id)
    assert [r.id for r in demo.network.routers()] == [router.id]
    assert [f.id for f in demo.network.ips()] == [fip.id]
    with pytest.raises(exceptions.NotFoundException):
        demo.network.get_router(mine.id)
    with pytest.raises(exceptions.NotFoundException):
        demo.network.get_ip(admin_fip.id)
    assert [r.id for r in admin.network.routers()] == [mine.id]
    everyone = admin.network.get("/routers?all_tenants=1").json()["routers"]
    assert {r["id"] for r in everyone} == {router.id, mine.id}
    assert admin.network.get_router(router.id).id == router.id


def test_delete_faults_on_neutron_objects(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    router = conn.network.create_router(name="stuck")
    net = conn.network.create_network(name="net")
    with cloud.locked():
        faults.add_rule(cloud, faults.Rule(effect=faults.DELETE_CONFLICT, kind="router",
                                           count=1))
        faults.add_rule(cloud, faults.Rule(effect=faults.DELETE_ERROR, kind="network",
                                           count=1))
    with pytest.raises(exceptions.ConflictException):
        conn.network.delete_router(router)
    raw = conn.network.delete(f"/networks/{net.id}", raise_exc=False)
    assert raw.status_code == 500
    with cloud.locked():
        faults.add_rule(cloud, faults.Rule(effect=faults.DELETE_HANGS, kind="router",
                                           name="stuck"))
    conn.network.delete_router(router)  # accepted, but the router stays
    assert conn.network.get_router(router.id).status == "ACTIVE"
    conn.network.delete_network(net)  # the error rule was spent
    assert conn.network.find_network("net") is None


def test_neutron_quotas(start_cloud: Start) -> None:
    cloud, url = start_cloud(TWO_PROJECTS)
    admin = connect(url)
    demo = connect(url, username="demo", password="demo", project_name="demo")
    project = demo.current_project_id
    quota = demo.network.get_quota(project)
    assert (quota.networks, quota.ports, quota.routers, quota.floating_ips) == (100, 500, 10, 50)
    assert admin.network.get_quota_default(project).security_groups == 10
    with pytest.raises(exceptions.ForbiddenException):
        demo.network.update_quota(project, routers=1)
    changed = admin.network.update_quota(project, routers=1, ports=1)
    assert changed.routers == 1 and changed.ports == 1
    demo.network.create_router(name="one")
    with pytest.raises(exceptions.ConflictException, match=r"Quota exceeded for resources: "
                                                           r"\['router'\]"):
        demo.network.create_router(name="two")
    net = demo.network.create_network(name="n")
    demo.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.0.0.0/24",
                               enable_dhcp=False)
    demo.network.create_port(network_id=net.id)
    raw = demo.network.post("/ports", json={"port": {"network_id": net.id}}, raise_exc=False)
    assert raw.status_code == 409 and raw.json()["NeutronError"] == {
        "type": "OverQuota", "message": "Quota exceeded for resources: ['port'].",
        "detail": ""}
    details = demo.network.get_quota(project, details=True)
    assert details.routers == {"limit": 1, "used": 1, "reserved": 0}
    assert [q.project_id for q in admin.network.quotas()] == [project]
    admin.network.delete_quota(project)
    assert demo.network.get_quota(project).routers == 10
    with cloud.locked():
        for kind in ("network", "subnet", "port", "router", "floatingip", "security_group"):
            faults.add_rule(cloud, faults.Rule(effect=faults.QUOTA_EXCEEDED, kind=kind,
                                               service="network"))
    public = demo.network.find_network("public")
    for make in (lambda: demo.network.create_network(name="x"),
                 lambda: demo.network.create_subnet(network_id=net.id, ip_version=4,
                                                    cidr="10.1.0.0/24"),
                 lambda: demo.network.create_port(network_id=net.id),
                 lambda: demo.network.create_router(name="x"),
                 lambda: demo.network.create_ip(floating_network_id=public.id),
                 lambda: demo.network.create_security_group(name="x")):
        with pytest.raises(exceptions.ConflictException, match="Quota exceeded"):
            make()


def test_the_openstack_cli_makes_a_router_and_a_floating_ip(cloud_url: str,
                                                            tmp_path: Path) -> None:
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(yaml.safe_dump({"clouds": {"sim": {
        "auth": {"auth_url": f"{cloud_url}/v3", "username": "admin", "password": "admin",
                 "project_name": "admin", "user_domain_name": "Default",
                 "project_domain_name": "Default"},
        "region_name": "RegionOne", "identity_api_version": 3}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env["OS_CLIENT_CONFIG_FILE"] = str(clouds)

    def cli(*args: str, show: bool = True) -> Any:
        done = subprocess.run([str(OPENSTACK), "--os-cloud", "sim", *args,
                               *(["-f", "json"] if show else [])],
                              env=env, capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if show else None

    router = cli("router", "create", "edge")
    assert router["name"] == "edge" and router["status"] == "ACTIVE"
    fip = cli("floating", "ip", "create", "public")
    assert POOL[0] <= ipaddress.ip_address(fip["floating_ip_address"]) <= POOL[1]
    listed = cli("floating", "ip", "list")
    assert [f["ID"] for f in listed] == [fip["id"]]
    cli("network", "create", "app")
    cli("subnet", "create", "app-v4", "--network", "app", "--subnet-range", "10.0.0.0/24")
    cli("router", "set", "edge", "--external-gateway", "public", show=False)
    cli("router", "add", "subnet", "edge", "app-v4", show=False)
    port = cli("port", "create", "web", "--network", "app")
    cli("floating", "ip", "set", fip["id"], "--port", port["id"], show=False)
    shown = cli("floating", "ip", "show", fip["id"])
    assert shown["port_id"] == port["id"] and shown["status"] == "ACTIVE"
    assert shown["router_id"] == router["id"]
