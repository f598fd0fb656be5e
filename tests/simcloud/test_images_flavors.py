"""Glance's images and Nova's flavors, zones and limits of the simulated cloud, as unmodified
openstacksdk and the ``openstack`` CLI meet them over real HTTP: discovery and microversions,
``find_*``, filters, pagination by ``limit``/``marker`` and the services' 404s."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from openstack import exceptions

from convergence_simcloud.seed import Seed, SeedFlavor
from convergence_simcloud.serve import clouds_yaml
from tests.simcloud.conftest import Start, connect

ROOT = Path(__file__).resolve().parents[2]
OPENSTACK = ROOT / ".venv" / "bin" / "openstack"


def test_find_image_by_name_and_by_id(cloud_url: str) -> None:
    conn = connect(cloud_url)
    cirros = conn.image.find_image("cirros", ignore_missing=False)
    assert cirros.name == "cirros" and cirros.status == "active"
    assert cirros.visibility == "public" and cirros.disk_format == "qcow2"
    assert cirros.container_format == "bare" and cirros.size > 0 and cirros.checksum
    assert cirros.min_disk == 1 and cirros.created_at
    assert conn.image.get_image(cirros.id).name == "cirros"
    assert conn.image.find_image("nope") is None


def test_a_missing_image_is_not_found_in_glances_error_shape(cloud_url: str) -> None:
    conn = connect(cloud_url)
    with pytest.raises(exceptions.ResourceNotFound):
        conn.image.get_image("00000000-0000-0000-0000-000000000000")
    raw = conn.image.get("/images/nope", raise_exc=False)
    assert raw.status_code == 404
    assert raw.json()["code"] == "404 Not Found"


def test_images_are_filtered_and_paged(cloud_url: str) -> None:
    conn = connect(cloud_url)
    assert [i.name for i in conn.image.images(name="ubuntu")] == ["ubuntu"]
    assert [i.name for i in conn.image.images(status="queued")] == []
    assert {i.name for i in conn.image.images(visibility="public")} == {"cirros", "ubuntu"}
    assert [i.name for i in conn.image.images(limit=1)] == ["ubuntu", "cirros"]
    page = conn.image.get("/images?limit=1").json()
    assert page["next"].startswith("/v2/images?") and "marker=" in page["next"]


def test_the_compute_version_document_advertises_the_implemented_range(
        cloud_url: str) -> None:
    conn = connect(cloud_url)
    version = conn.compute.get("/").json()["version"]
    assert (version["min_version"], version["version"]) == ("2.1", "2.61")
    answer = conn.compute.get("/flavors/1", microversion="2.61")
    assert answer.headers["OpenStack-API-Version"] == "compute 2.61"
    assert "extra_specs" in answer.json()["flavor"]
    old = conn.compute.get("/flavors/1", microversion="2.1").json()["flavor"]
    assert "description" not in old and "extra_specs" not in old
    too_new = conn.compute.get("/flavors", microversion="2.99", raise_exc=False)
    assert too_new.status_code == 406 and "notAcceptable" in too_new.json()


def test_find_flavor_gives_the_standard_sizes(cloud_url: str) -> None:
    conn = connect(cloud_url)
    small = conn.compute.find_flavor("m1.small", ignore_missing=False)
    assert (small.ram, small.vcpus, small.disk) == (2048, 1, 20)
    assert small.extra_specs == {} and small.is_public
    assert conn.compute.get_flavor("5").name == "m1.xlarge"
    assert conn.compute.find_flavor("m1.huge") is None


def test_flavors_list_with_details_filters_and_pages(cloud_url: str) -> None:
    conn = connect(cloud_url)
    flavors = list(conn.compute.flavors(details=True))
    assert [f.name for f in flavors] == ["m1.tiny", "m1.small", "m1.medium", "m1.large",
                                         "m1.xlarge"]
    assert [(f.ram, f.vcpus, f.disk) for f in flavors][-1] == (16384, 8, 160)
    assert [f.name for f in conn.compute.flavors(details=True, min_ram=8192)] == \
        ["m1.large", "m1.xlarge"]
    assert [f.name for f in conn.compute.flavors(details=True, min_disk=40, limit=1)] == \
        ["m1.medium", "m1.large", "m1.xlarge"]
    assert len(list(conn.compute.flavors(details=False))) == 5


def test_a_missing_flavor_is_not_found(cloud_url: str) -> None:
    conn = connect(cloud_url)
    with pytest.raises(exceptions.ResourceNotFound):
        conn.compute.get_flavor("999")
    raw = conn.compute.get("/flavors/999", raise_exc=False)
    assert raw.json() == {"itemNotFound": {"code": 404,
                                           "message": "Flavor 999 could not be found."}}


def test_extra_specs_zones_and_limits(start_cloud: Start) -> None:
    seed = Seed(flavors=[SeedFlavor("gpu.large", 8192, 4, 80, "g1",
                                    extra_specs={"resources:VGPU": "1"},
                                    description="a GPU")])
    _, url = start_cloud(seed)
    conn = connect(url)
    gpu = conn.compute.find_flavor("gpu.large", ignore_missing=False)
    assert gpu.extra_specs == {"resources:VGPU": "1"} and gpu.description == "a GPU"
    assert conn.compute.fetch_flavor_extra_specs(gpu).extra_specs == {"resources:VGPU": "1"}
    assert sorted(z.name for z in conn.compute.availability_zones()) == ["az2", "nova"]
    limits = conn.compute.get_limits()
    assert limits.absolute.instances == 10 and limits.absolute.total_cores == 20
    assert limits.absolute.instances_used == 0


def test_the_openstack_cli_lists_flavors_and_images(cloud_url: str, tmp_path: Path) -> None:
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(clouds_yaml(cloud_url))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env["OS_CLIENT_CONFIG_FILE"] = str(clouds)

    def cli(*args: str) -> list[dict[str, object]]:
        done = subprocess.run([str(OPENSTACK), "--os-cloud", "simcloud", *args, "-f", "json"],
                              env=env, capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 0, done.stderr
        rows: list[dict[str, object]] = json.loads(done.stdout)
        return rows

    flavors = {row["Name"]: row for row in cli("flavor", "list")}
    assert set(flavors) == {"m1.tiny", "m1.small", "m1.medium", "m1.large", "m1.xlarge"}
    assert flavors["m1.small"]["RAM"] == 2048 and flavors["m1.small"]["VCPUs"] == 1
    images = {row["Name"]: row["Status"] for row in cli("image", "list")}
    assert images == {"cirros": "active", "ubuntu": "active"}


def test_version_discovery_documents_as_glance_and_nova_give_them(cloud_url: str) -> None:
    session = connect(cloud_url).session
    root = session.get(f"{cloud_url}/image/", authenticated=False, raise_exc=False)
    assert root.status_code == 300
    listed = session.get(f"{cloud_url}/image/versions", authenticated=False).json()
    assert listed == root.json()
    current = [v for v in listed["versions"] if v["status"] == "CURRENT"]
    assert [v["links"][0]["href"] for v in current] == [f"{cloud_url}/image/v2/"]
    nova = session.get(f"{cloud_url}/compute/", authenticated=False).json()["versions"]
    assert [(v["id"], v["min_version"], v["version"]) for v in nova] == \
        [("v2.1", "2.1", "2.61")]


def test_limits_change_shape_with_the_microversion(cloud_url: str) -> None:
    conn = connect(cloud_url)
    old = conn.compute.get("/limits", microversion="2.1").json()["limits"]["absolute"]
    assert old["maxTotalFloatingIps"] == 10 and old["maxPersonality"] == 5
    new = conn.compute.get("/limits", microversion="2.57").json()["limits"]["absolute"]
    assert "maxTotalFloatingIps" not in new and "maxPersonality" not in new
    assert new["maxTotalRAMSize"] == 51200
