"""Nova's extras in the simulated cloud as unmodified openstacksdk (and the ``openstack`` CLI)
meet them over real HTTP: key pairs (generated, imported, paginated, per user), server groups,
interface attachments of servers, and the compute quota sets with their usage; project
isolation, admin-only quota updates, and quota refusals (real or injected by fault rules)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from openstack import exceptions

from convergence_simcloud.client import SimControl
from convergence_simcloud.serve import clouds_yaml
from convergence_simcloud.state import SimCloud
from tests.simcloud.conftest import Start, connect
from tests.simcloud.test_images_flavors import OPENSTACK
from tests.simcloud.test_network import TWO_PROJECTS


def _demo(url: str) -> Any:
    return connect(url, username="demo", password="demo", project_name="demo")


def _public_key() -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    return key.public_bytes(serialization.Encoding.OpenSSH,
                            serialization.PublicFormat.OpenSSH).decode() + " me@host"


def _md5(public_key: str) -> str:
    digest = hashlib.md5(base64.b64decode(public_key.split()[1]),
                         usedforsecurity=False).hexdigest()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


# -- key pairs -------------------------------------------------------------------------------

def test_a_generated_key_pair_answers_its_private_key_once(cloud_url: str) -> None:
    conn = connect(cloud_url)
    made = conn.compute.create_keypair(name="deploy")
    assert made.private_key.startswith("-----BEGIN RSA PRIVATE KEY-----")
    assert made.public_key.startswith("ssh-rsa ") and made.public_key.endswith("Generated-by-Nova")
    assert made.fingerprint == _md5(made.public_key) and made.type == "ssh"
    assert made.user_id == conn.current_user_id
    shown = conn.compute.get_keypair("deploy")
    assert shown.private_key is None and shown.public_key == made.public_key
    assert shown.created_at and shown.is_deleted is False and shown.type == "ssh"
    assert conn.compute.find_keypair("deploy", ignore_missing=False).fingerprint == made.fingerprint
    assert conn.compute.find_keypair("nope") is None


def test_an_imported_key_pair_is_listed_shown_and_deleted(cloud_url: str) -> None:
    conn = connect(cloud_url)
    public = _public_key()
    made = conn.compute.create_keypair(name="mine", public_key=public)
    assert made.private_key is None and made.public_key == public
    assert made.fingerprint == _md5(public)
    conn.compute.create_keypair(name="another", public_key=_public_key())
    assert [k.name for k in conn.compute.keypairs()] == ["another", "mine"]
    conn.compute.delete_keypair("mine")
    assert [k.name for k in conn.compute.keypairs()] == ["another"]
    with pytest.raises(exceptions.NotFoundException, match="Keypair mine not found"):
        conn.compute.get_keypair("mine")
    conn.compute.delete_keypair("mine")  # ignore_missing by default
    with pytest.raises(exceptions.NotFoundException):
        conn.compute.delete_keypair("mine", ignore_missing=False)


def test_duplicate_and_invalid_key_pairs_are_refused(cloud_url: str) -> None:
    conn = connect(cloud_url)
    conn.compute.create_keypair(name="dup", public_key=_public_key())
    with pytest.raises(exceptions.ConflictException, match=r"Key pair 'dup' already exists\."):
        conn.compute.create_keypair(name="dup", public_key=_public_key())
    with pytest.raises(exceptions.BadRequestException, match="Keypair data is invalid"):
        conn.compute.create_keypair(name="bad", public_key="ssh-rsa not-a-key")
    with pytest.raises(exceptions.BadRequestException, match="name"):
        conn.compute.create_keypair(name="no/slash", public_key=_public_key())
    assert [k.name for k in conn.compute.keypairs()] == ["dup"]


def test_x509_key_pairs_carry_a_certificate(cloud_url: str) -> None:
    conn = connect(cloud_url)
    made = conn.compute.create_keypair(name="winrm", type="x509")
    assert made.type == "x509" and made.private_key
    assert made.public_key.startswith("-----BEGIN CERTIFICATE-----")
    imported = conn.compute.create_keypair(name="cert", type="x509",
                                           public_key=made.public_key)
    assert imported.fingerprint == made.fingerprint and len(made.fingerprint) == 59
    with pytest.raises(exceptions.BadRequestException, match="X509"):
        conn.compute.create_keypair(name="nocert", type="x509", public_key=_public_key())


def test_key_pair_shapes_follow_the_microversion(cloud_url: str) -> None:
    conn = connect(cloud_url)
    old = conn.compute.post("/os-keypairs", json={"keypair": {"name": "old"}},
                            microversion="2.1")
    assert old.status_code == 200 and "type" not in old.json()["keypair"]
    assert old.headers["OpenStack-API-Version"] == "compute 2.1"
    with_type = conn.compute.post("/os-keypairs", json={"keypair": {"name": "t"}},
                                  microversion="2.2")
    assert with_type.status_code == 201 and with_type.json()["keypair"]["type"] == "ssh"
    refused = conn.compute.post("/os-keypairs", json={"keypair": {"name": "x", "type": "ssh"}},
                                microversion="2.1")
    assert refused.status_code == 400 and "badRequest" in refused.json()
    shown = conn.compute.get("/os-keypairs/old", microversion="2.1").json()["keypair"]
    assert set(shown) == {"name", "public_key", "fingerprint", "user_id", "created_at",
                          "deleted", "deleted_at", "id", "updated_at"}
    assert isinstance(shown["id"], int)
    assert conn.compute.delete("/os-keypairs/old", microversion="2.1").status_code == 202
    assert conn.compute.delete("/os-keypairs/t", microversion="2.2").status_code == 204


def test_key_pairs_paginate_from_2_35(cloud_url: str) -> None:
    conn = connect(cloud_url)
    for name in ("a", "b", "c"):
        conn.compute.create_keypair(name=name, public_key=_public_key())
    page = conn.compute.get("/os-keypairs?limit=2", microversion="2.35").json()
    assert [k["keypair"]["name"] for k in page["keypairs"]] == ["a", "b"]
    [link] = page["keypairs_links"]
    assert link["rel"] == "next" and "marker=b" in link["href"]
    rest = conn.compute.get("/os-keypairs?limit=2&marker=b", microversion="2.35").json()
    assert [k["keypair"]["name"] for k in rest["keypairs"]] == ["c"]
    assert "keypairs_links" not in rest
    unpaged = conn.compute.get("/os-keypairs?limit=2", microversion="2.34").json()
    assert len(unpaged["keypairs"]) == 3
    bad = conn.compute.get("/os-keypairs?marker=zzz", microversion="2.35")
    assert bad.status_code == 400


def test_key_pairs_belong_to_their_user(start_cloud: Start) -> None:
    _, url = start_cloud(TWO_PROJECTS)
    admin, demo = connect(url), _demo(url)
    admin.compute.create_keypair(name="shared-name", public_key=_public_key())
    assert list(demo.compute.keypairs()) == []
    assert demo.compute.find_keypair("shared-name") is None
    demo.compute.create_keypair(name="shared-name", public_key=_public_key())  # no clash
    demo_user = demo.current_user_id
    assert [k.name for k in admin.compute.keypairs(user_id=demo_user)] == ["shared-name"]
    assert admin.compute.get_keypair("shared-name", user_id=demo_user).user_id == demo_user
    made = admin.compute.create_keypair(name="for-demo", public_key=_public_key(),
                                        user_id=demo_user)
    assert made.user_id == demo_user
    assert sorted(k.name for k in demo.compute.keypairs()) == ["for-demo", "shared-name"]
    with pytest.raises(exceptions.ForbiddenException, match="os-keypairs:index"):
        list(demo.compute.keypairs(user_id=admin.current_user_id))
    admin.compute.delete_keypair("for-demo", user_id=demo_user)
    assert [k.name for k in demo.compute.keypairs()] == ["shared-name"]


def test_key_pair_quota_and_injected_quota_faults(start_cloud: Start) -> None:
    _, url = start_cloud(TWO_PROJECTS)
    admin, demo = connect(url), _demo(url)
    demo_project = demo.current_project_id
    admin.compute.update_quota_set(demo_project, key_pairs=1)
    demo.compute.create_keypair(name="one", public_key=_public_key())
    with pytest.raises(exceptions.ForbiddenException,
                       match=r"Quota exceeded, too many key pairs\."):
        demo.compute.create_keypair(name="two", public_key=_public_key())
    admin.compute.create_keypair(name="two", public_key=_public_key())  # admin's own quota
    control = SimControl(url)
    control.add_rule("quota_exceeded", service="compute", kind="keypair", name="ci-*",
                     count=1)
    with pytest.raises(exceptions.ForbiddenException, match="too many key pairs"):
        admin.compute.create_keypair(name="ci-1", public_key=_public_key())
    admin.compute.create_keypair(name="ci-1", public_key=_public_key())  # the rule is spent
    assert sorted(k.name for k in admin.compute.keypairs()) == ["ci-1", "two"]


# -- server groups ---------------------------------------------------------------------------

def test_server_groups_are_created_listed_shown_and_deleted(cloud_url: str) -> None:
    conn = connect(cloud_url)
    group = conn.compute.create_server_group(name="spread", policies=["anti-affinity"])
    assert group.policies == ["anti-affinity"] and group.member_ids == []
    assert group.metadata == {} and group.project_id == conn.current_project_id
    assert group.user_id == conn.current_user_id
    soft = conn.compute.create_server_group(name="soft", policies=["soft-affinity"])
    assert [g.name for g in conn.compute.server_groups()] == ["spread", "soft"]
    assert conn.compute.get_server_group(group.id).policies == ["anti-affinity"]
    assert conn.compute.find_server_group("soft", ignore_missing=False).id == soft.id
    conn.compute.delete_server_group(group)
    assert [g.name for g in conn.compute.server_groups()] == ["soft"]
    with pytest.raises(exceptions.NotFoundException, match="could not be found"):
        conn.compute.get_server_group(group.id)
    raw = conn.compute.get(f"/os-server-groups/{soft.id}", microversion="2.12").json()
    assert set(raw["server_group"]) == {"id", "name", "policies", "members", "metadata"}


def test_server_group_policies_are_checked(cloud_url: str) -> None:
    conn = connect(cloud_url)
    with pytest.raises(exceptions.BadRequestException, match="policies"):
        conn.compute.create_server_group(name="x", policies=["nearby"])
    with pytest.raises(exceptions.BadRequestException, match="policies"):
        conn.compute.create_server_group(name="x", policies=["affinity", "anti-affinity"])
    old = conn.compute.post("/os-server-groups", microversion="2.14",
                            json={"server_group": {"name": "x", "policies": ["soft-affinity"]}})
    assert old.status_code == 400
    assert list(conn.compute.server_groups()) == []


def test_server_groups_are_isolated_per_project(start_cloud: Start) -> None:
    _, url = start_cloud(TWO_PROJECTS)
    admin, demo = connect(url), _demo(url)
    mine = admin.compute.create_server_group(name="admins", policies=["affinity"])
    theirs = demo.compute.create_server_group(name="demos", policies=["affinity"])
    assert [g.name for g in demo.compute.server_groups()] == ["demos"]
    assert [g.name for g in demo.compute.server_groups(all_projects=True)] == ["demos"]
    assert [g.name for g in admin.compute.server_groups()] == ["admins"]
    assert sorted(g.name for g in admin.compute.server_groups(all_projects=True)) == \
        ["admins", "demos"]
    assert admin.compute.get_server_group(theirs.id).name == "demos"
    with pytest.raises(exceptions.ForbiddenException):
        demo.compute.get_server_group(mine.id)
    with pytest.raises(exceptions.ForbiddenException):
        demo.compute.delete_server_group(mine.id)
    assert demo.compute.find_server_group("admins") is None


def test_server_group_quota_and_injected_quota_faults(start_cloud: Start) -> None:
    _, url = start_cloud(TWO_PROJECTS)
    admin, demo = connect(url), _demo(url)
    admin.compute.update_quota_set(demo.current_project_id, server_groups=1)
    demo.compute.create_server_group(name="one", policies=["affinity"])
    with pytest.raises(exceptions.ForbiddenException,
                       match=r"Quota exceeded, too many server groups\."):
        demo.compute.create_server_group(name="two", policies=["affinity"])
    SimControl(url).add_rule("quota_exceeded", service="compute", kind="server_group",
                             message="Quota exceeded, too many server groups.")
    with pytest.raises(exceptions.ForbiddenException, match="too many server groups"):
        admin.compute.create_server_group(name="any", policies=["affinity"])


# -- interface attachments -------------------------------------------------------------------

def _boot(conn: Any, net: Any, name: str = "web", **attrs: Any) -> Any:
    flavor = conn.compute.find_flavor("m1.tiny", ignore_missing=False)
    image = conn.image.find_image("cirros", ignore_missing=False)
    return conn.compute.create_server(name=name, flavor_id=flavor.id, image_id=image.id,
                                      networks=[{"uuid": net.id}], **attrs)


def _active_server(start_cloud: Start) -> tuple[SimCloud, str, Any, Any, Any]:
    """A cloud with two projects and an ACTIVE server of ``demo`` on its own network: the
    cloud, its URL, the demo connection, the server and the network."""
    cloud, url = start_cloud(TWO_PROJECTS)
    demo = _demo(url)
    net = demo.network.create_network(name="app")
    demo.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.1.0.0/24")
    server = _boot(demo, net)
    with pytest.raises(exceptions.ConflictException, match="vm_state building"):
        demo.compute.create_server_interface(server, net_id=net.id)
    cloud.clock.advance(60)  # type: ignore[attr-defined]
    server = demo.compute.get_server(server.id)
    assert server.status == "ACTIVE"
    return cloud, url, demo, server, net


def test_interfaces_attach_by_network_and_by_port_and_detach(start_cloud: Start) -> None:
    _, _, demo, server, net = _active_server(start_cloud)
    [first] = list(demo.compute.server_interfaces(server))
    assert first.net_id == net.id and first.port_state == "ACTIVE"
    made = demo.compute.create_server_interface(server, net_id=net.id,
                                                fixed_ips=[{"ip_address": "10.1.0.77"}])
    assert made.net_id == net.id and made.port_state == "ACTIVE"
    assert made.fixed_ips[0]["ip_address"] == "10.1.0.77" and made.mac_addr
    port = demo.network.get_port(made.port_id)
    assert port.device_id == server.id and port.device_owner == "compute:nova"
    given = demo.network.create_port(network_id=net.id, name="given")
    attached = demo.compute.create_server_interface(server, port_id=given.id)
    assert attached.port_id == given.id
    assert demo.network.get_port(given.id).status == "ACTIVE"
    assert {i.port_id for i in demo.compute.server_interfaces(server)} == \
        {first.port_id, made.port_id, given.id}
    assert demo.compute.get_server_interface(given.id, server).port_id == given.id
    demo.compute.delete_server_interface(made.port_id, server=server)
    with pytest.raises(exceptions.NotFoundException):
        demo.network.get_port(made.port_id)  # Nova made it: deleted
    demo.compute.delete_server_interface(given.id, server=server)
    kept = demo.network.get_port(given.id)  # given: only unbound
    assert kept.device_id == "" and kept.status == "DOWN"
    assert [i.port_id for i in demo.compute.server_interfaces(server)] == [first.port_id]
    with pytest.raises(exceptions.NotFoundException, match="not attached"):
        demo.compute.delete_server_interface(given.id, server=server, ignore_missing=False)


def test_interface_attach_conflicts_and_isolation(start_cloud: Start) -> None:
    _, url, demo, server, net = _active_server(start_cloud)
    [first] = list(demo.compute.server_interfaces(server))
    with pytest.raises(exceptions.ConflictException, match="still in use"):
        demo.compute.create_server_interface(server, port_id=first.port_id)
    with pytest.raises(exceptions.BadRequestException, match="both"):
        demo.compute.create_server_interface(server, port_id=first.port_id, net_id=net.id)
    with pytest.raises(exceptions.ConflictException, match="already in use"):
        demo.compute.create_server_interface(server, net_id=net.id,
                                             fixed_ips=[first.fixed_ips[0]])
    with pytest.raises(exceptions.NotFoundException, match="Network"):
        demo.compute.create_server_interface(server, net_id="no-such-network")
    admin = connect(url)
    mine = admin.network.create_network(name="admin-net")
    stranger = admin.network.create_port(network_id=mine.id).id
    with pytest.raises(exceptions.BadRequestException, match="not usable"):
        admin.compute.create_server_interface(server, port_id=stranger)
    with pytest.raises(exceptions.NotFoundException):
        demo.compute.create_server_interface(server, port_id=stranger)
    assert len(list(demo.compute.server_interfaces(server))) == 1



def test_servers_booted_in_a_group_are_its_members(start_cloud: Start) -> None:
    cloud, _, demo, _, net = _active_server(start_cloud)
    group = demo.compute.create_server_group(name="spread", policies=["anti-affinity"])
    member = _boot(demo, net, "member", scheduler_hints={"group": group.id})
    assert demo.compute.get_server_group(group.id).member_ids == [member.id]
    detail = demo.compute.get_quota_set(demo.current_project_id, usage=True)
    assert detail.usage["instances"] == 2 and detail.usage["cores"] == 2
    assert detail.usage["ram"] == 1024 and detail.usage["server_groups"] == 1
    demo.compute.delete_server(member)
    cloud.clock.advance(60)  # type: ignore[attr-defined]
    assert demo.compute.get_server_group(group.id).member_ids == []


# -- quota sets ------------------------------------------------------------------------------

def test_quota_sets_show_update_and_revert(start_cloud: Start) -> None:
    _, url = start_cloud(TWO_PROJECTS)
    admin, demo = connect(url), _demo(url)
    project = demo.current_project_id
    quota = demo.compute.get_quota_set(project)
    assert (quota.instances, quota.cores, quota.ram, quota.key_pairs) == (10, 20, 51200, 100)
    assert quota.server_groups == 10 and quota.injected_files == 5
    assert quota.floating_ips is None and quota.security_groups is None  # gone at 2.36
    updated = admin.compute.update_quota_set(project, instances=3, cores=6)
    assert (updated.instances, updated.cores, updated.ram) == (3, 6, 51200)
    assert demo.compute.get_quota_set(project).instances == 3
    assert demo.compute.get_limits().absolute.instances == 3  # /limits reads it too
    assert admin.compute.get_quota_set(str(admin.current_project_id)).instances == 10
    assert admin.compute.get_limits().absolute.instances == 10
    defaults = demo.compute.get_quota_set_defaults(project)
    assert defaults.instances == 10 and defaults.cores == 20
    with pytest.raises(exceptions.ForbiddenException, match="os-quota-sets:update"):
        demo.compute.update_quota_set(project, instances=100)
    with pytest.raises(exceptions.ForbiddenException, match="os-quota-sets:show"):
        demo.compute.get_quota_set(str(admin.current_project_id))
    with pytest.raises(exceptions.BadRequestException, match="not a valid project"):
        admin.compute.get_quota_set("no-such-project")
    admin.compute.revert_quota_set(project)
    assert demo.compute.get_quota_set(project).instances == 10


def test_quota_usage_counts_what_the_project_has(start_cloud: Start) -> None:
    _, url = start_cloud(TWO_PROJECTS)
    admin, demo = connect(url), _demo(url)
    demo.compute.create_keypair(name="k", public_key=_public_key())
    demo.compute.create_server_group(name="g", policies=["affinity"])
    project = demo.current_project_id
    detail = demo.compute.get_quota_set(project, usage=True)
    assert detail.usage["key_pairs"] == 1 and detail.usage["server_groups"] == 1
    assert detail.usage["instances"] == 0 and detail.key_pairs == 100
    assert detail.reservation["instances"] == 0
    with pytest.raises(exceptions.BadRequestException, match="already used"):
        admin.compute.update_quota_set(project, server_groups=0)
    assert admin.compute.update_quota_set(project, server_groups=0, force=True).server_groups \
        == 0


def test_quota_shapes_follow_the_microversion(cloud_url: str) -> None:
    conn = connect(cloud_url)
    project = str(conn.current_project_id)
    old = conn.compute.get(f"/os-quota-sets/{project}", microversion="2.1").json()
    assert old["quota_set"]["id"] == project
    assert {"floating_ips", "fixed_ips", "security_groups", "security_group_rules",
            "injected_files", "injected_file_path_bytes"} <= set(old["quota_set"])
    new = conn.compute.get(f"/os-quota-sets/{project}", microversion="2.57").json()
    assert set(new["quota_set"]) == {"id", "cores", "instances", "key_pairs", "metadata_items",
                                     "ram", "server_groups", "server_group_members"}
    refused = conn.compute.put(f"/os-quota-sets/{project}", microversion="2.36",
                               json={"quota_set": {"floating_ips": 5}})
    assert refused.status_code == 400
    updated = conn.compute.put(f"/os-quota-sets/{project}", microversion="2.35",
                               json={"quota_set": {"floating_ips": 5}}).json()["quota_set"]
    assert "id" not in updated and updated["floating_ips"] == 5
    klass = conn.compute.get("/os-quota-class-sets/default", microversion="2.50").json()
    assert klass["quota_class_set"]["id"] == "default"
    assert "server_groups" in klass["quota_class_set"]
    assert "floating_ips" not in klass["quota_class_set"]
    conn.compute.put("/os-quota-class-sets/default", microversion="2.50",
                     json={"quota_class_set": {"instances": 7}})
    assert conn.compute.get_quota_set(project).instances == 7


def test_the_openstack_cli_shows_compute_quotas(cloud_url: str, tmp_path: Path) -> None:
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(clouds_yaml(cloud_url))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env["OS_CLIENT_CONFIG_FILE"] = str(clouds)
    done = subprocess.run([str(OPENSTACK), "--os-cloud", "simcloud", "quota", "show",
                           "--compute", "admin", "-f", "json"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    rows = {r["Resource"]: r["Limit"] for r in found} if isinstance(found, list) else found
    assert rows["instances"] == 10 and rows["key-pairs"] == 100
