"""A whole application on the simulated cloud, as a user builds it with unmodified openstacksdk
over real HTTP: network, subnet, router with an interface and a gateway, security group, port,
a server on the port with a key pair and a volume attached, a floating IP; waited for with the
SDK's own ``wait_for_*``; then torn down in order, the cloud refusing what is still in use.
Faults set through the control plane (``/_sim/``) are seen by the same SDK calls."""

from __future__ import annotations

import time

import pytest
from openstack import exceptions

from convergence.ports.clock import SystemClock
from convergence_simcloud.client import SimControl
from convergence_simcloud.state import Options, SimCloud
from tests.simcloud.conftest import Start, connect


def test_an_application_is_built_used_and_torn_down(start_cloud: Start) -> None:
    cloud, url = start_cloud()
    conn = connect(url)
    public = conn.network.find_network("public", ignore_missing=False)
    net = conn.network.create_network(name="app")
    subnet = conn.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.1.0.0/24",
                                        name="app-v4")
    router = conn.network.create_router(name="edge",
                                        external_gateway_info={"network_id": public.id})
    conn.network.add_interface_to_router(router, subnet_id=subnet.id)
    group = conn.network.create_security_group(name="web")
    conn.network.create_security_group_rule(security_group_id=group.id, direction="ingress",
                                            protocol="tcp", port_range_min=22,
                                            port_range_max=22)
    port = conn.network.create_port(network_id=net.id, name="app-port",
                                    security_groups=[group.id])
    key = conn.compute.create_keypair(name="ops")
    assert key.private_key
    flavor = conn.compute.find_flavor("m1.small", ignore_missing=False)
    image = conn.image.find_image("cirros", ignore_missing=False)
    server = conn.compute.create_server(name="app-1", flavor_id=flavor.id, image_id=image.id,
                                        networks=[{"port": port.id}], key_name="ops",
                                        metadata={"role": "web"})
    volume = conn.block_storage.create_volume(size=2, name="data")
    cloud.clock.advance(5)  # type: ignore[attr-defined]
    server = conn.compute.wait_for_server(server, wait=5)
    volume = conn.block_storage.wait_for_status(volume, "available", wait=5)
    assert (server.status, server.key_name, server.metadata) == ("ACTIVE", "ops",
                                                                 {"role": "web"})
    assert server.flavor.original_name == "m1.small"
    conn.compute.create_volume_attachment(server, volume_id=volume.id)
    cloud.clock.advance(5)  # type: ignore[attr-defined]
    volume = conn.block_storage.wait_for_status(volume, "in-use", wait=5)
    assert [a["server_id"] for a in volume.attachments] == [server.id]
    fip = conn.network.create_ip(floating_network_id=public.id, port_id=port.id)
    assert fip.fixed_ip_address == port.fixed_ips[0]["ip_address"]
    assert conn.network.get_port(port.id).status == "ACTIVE"

    server = conn.compute.get_server(server.id)
    kinds = {a["OS-EXT-IPS:type"]: a["addr"] for a in server.addresses["app"]}
    assert kinds == {"fixed": port.fixed_ips[0]["ip_address"],
                     "floating": fip.floating_ip_address}
    assert [s.name for s in conn.compute.servers(name="app-1")] == ["app-1"]

    with pytest.raises(exceptions.ConflictException):
        conn.network.delete_network(net)  # the port, the router's interface
    with pytest.raises(exceptions.ConflictException):
        conn.network.delete_router(router)  # it still has an interface
    conn.compute.delete_server(server)
    cloud.clock.advance(5)  # type: ignore[attr-defined]
    conn.compute.wait_for_delete(server, wait=5)
    assert conn.block_storage.get_volume(volume.id).status in ("available", "detaching")
    cloud.clock.advance(5)  # type: ignore[attr-defined]
    assert conn.block_storage.get_volume(volume.id).status == "available"
    unbound = conn.network.get_port(port.id)  # pre-created: kept, unbound
    assert (unbound.device_id, unbound.status) == ("", "DOWN")
    conn.network.delete_ip(fip)
    conn.network.delete_port(port)
    conn.network.remove_interface_from_router(router, subnet_id=subnet.id)
    conn.network.delete_router(router)
    conn.network.delete_network(net)
    conn.block_storage.delete_volume(volume)
    conn.compute.delete_keypair(key)
    cloud.clock.advance(5)  # type: ignore[attr-defined]
    conn.block_storage.wait_for_delete(volume, wait=5)
    assert conn.network.find_network("app") is None
    assert [s for s in conn.compute.servers()] == []


def test_faults_set_through_the_control_plane_reach_the_sdk() -> None:
    """On the wall clock: a server that never leaves BUILD times ``wait_for_server`` out; one
    that goes ERROR fails it with the fault's message; a vanished one is not found."""
    from convergence_simcloud.serve import running
    cloud = SimCloud(options=Options(build_seconds=0.05), clock=SystemClock())
    with running(cloud) as url:
        control, conn = SimControl(url), connect(url)
        net = conn.network.create_network(name="n")
        conn.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.2.0.0/24")
        control.add_rule("stay_building", kind="server", name="stuck-*")
        control.add_rule("error_after", kind="server", metadata={"doomed": "yes"},
                         seconds=0.0, message="No valid host was found.")
        control.add_rule("vanish_after", kind="server", tag="ephemeral", seconds=0.2)

        def boot(name: str, **extra: object) -> object:
            return conn.compute.create_server(name=name, flavor_id="1",
                                              image_id=conn.image.find_image("cirros").id,
                                              networks=[{"uuid": net.id}], **extra)

        stuck = boot("stuck-1")
        with pytest.raises(exceptions.ResourceTimeout):
            conn.compute.wait_for_server(stuck, interval=0.1, wait=0.5)
        assert conn.compute.get_server(stuck.id).status == "BUILD"
        doomed = boot("doomed-1", metadata={"doomed": "yes"})
        with pytest.raises(exceptions.ResourceFailure, match="ERROR"):
            conn.compute.wait_for_server(doomed, interval=0.1, wait=2)
        assert conn.compute.get_server(doomed.id).fault["message"] == \
            "No valid host was found."
        brief = boot("brief-1", tags=["ephemeral"])
        conn.compute.wait_for_server(brief, interval=0.05, wait=2)
        time.sleep(0.3)
        with pytest.raises(exceptions.NotFoundException):
            conn.compute.get_server(brief.id)
