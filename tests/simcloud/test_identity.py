"""Keystone v3 of the simulated cloud, as unmodified openstacksdk meets it over real HTTP:
password, token and application-credential authentication, the catalog, token validation and
expiry, projects, and the failures the SDK reports as a real cloud's."""

from __future__ import annotations

import keystoneauth1.exceptions
import pytest
from openstack import exceptions

from convergence_simcloud.seed import Seed, SeedAppCredential, SeedUser
from convergence_simcloud.state import Options
from tests.simcloud.conftest import Start, connect

TOKEN_AUTH = {"username": None, "password": None, "user_domain_name": None,
              "auth_type": "v3token"}


def test_password_auth_gives_a_token_scoped_to_the_admin_project(cloud_url: str) -> None:
    conn = connect(cloud_url)
    assert conn.authorize()
    projects = conn.identity.get("/auth/projects").json()["projects"]
    assert [p["name"] for p in projects] == ["admin"]
    assert conn.current_project_id == projects[0]["id"]


def test_the_auth_url_may_be_the_root_as_keystone_lists_its_versions_there(
        cloud_url: str) -> None:
    assert connect(cloud_url, auth_url=cloud_url).authorize()


def test_the_catalog_points_every_service_at_this_server(cloud_url: str) -> None:
    conn = connect(cloud_url)
    project_id = conn.current_project_id
    expected = {"compute": "/compute/v2.1", "network": "/network", "image": "/image",
                "identity": "/v3", "block-storage": f"/volume/v3/{project_id}",
                "volumev3": f"/volume/v3/{project_id}"}
    for service_type, path in expected.items():
        for interface in ("public", "internal", "admin"):
            found = conn.session.get_endpoint(service_type=service_type, interface=interface,
                                              region_name="RegionOne")
            assert found == cloud_url + path, (service_type, interface)


def test_a_wrong_password_is_refused_with_401(cloud_url: str) -> None:
    conn = connect(cloud_url, password="wrong")
    # The SDK wraps the failed authentication itself; a call through a proxy surfaces
    # keystoneauth's error, which carries Keystone's body.
    with pytest.raises(exceptions.SDKException, match=r"HTTP 401"):
        conn.authorize()
    with pytest.raises(keystoneauth1.exceptions.Unauthorized) as failed:
        conn.identity.get("/auth/projects")
    assert failed.value.http_status == 401
    assert failed.value.response.json()["error"]["code"] == 401


def test_a_token_is_validated_and_an_unknown_one_is_not_found(cloud_url: str) -> None:
    token = connect(cloud_url).authorize()
    admin = connect(cloud_url)
    shown = admin.identity.get("/auth/tokens", headers={"X-Subject-Token": token})
    assert shown.status_code == 200 and shown.headers["X-Subject-Token"] == token
    body = shown.json()["token"]
    assert body["user"]["name"] == "admin" and body["project"]["name"] == "admin"
    assert {r["name"] for r in body["roles"]} >= {"admin"}
    assert body["expires_at"].endswith("Z") and body["issued_at"].endswith("Z")
    missing = admin.identity.get("/auth/tokens", headers={"X-Subject-Token": "nope"},
                                 raise_exc=False)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == 404


def test_token_auth_rescopes_a_token(cloud_url: str) -> None:
    token = connect(cloud_url).authorize()
    again = connect(cloud_url, token=token, **TOKEN_AUTH)
    assert again.authorize() not in ("", token)
    assert again.identity.get("/auth/projects").json()["projects"][0]["name"] == "admin"


def test_an_expired_token_is_refused(start_cloud: Start) -> None:
    cloud, url = start_cloud(options=Options(token_lifetime=60))
    old = connect(url).authorize()
    cloud.clock.advance(61)  # type: ignore[attr-defined]
    admin = connect(url)
    gone = admin.identity.get("/auth/tokens", headers={"X-Subject-Token": old},
                              raise_exc=False)
    assert gone.status_code == 404
    with pytest.raises(exceptions.SDKException, match=r"HTTP 401"):
        connect(url, token=old, **TOKEN_AUTH).authorize()


def test_a_password_session_reauthenticates_when_its_token_expires(start_cloud: Start) -> None:
    cloud, url = start_cloud(options=Options(token_lifetime=60))
    conn = connect(url)
    first = conn.authorize()
    cloud.clock.advance(61)  # type: ignore[attr-defined]
    assert conn.identity.get("/auth/projects").status_code == 200
    assert conn.authorize() != first


def test_application_credentials_from_the_seed_authenticate(start_cloud: Start) -> None:
    seed = Seed(application_credentials=[SeedAppCredential(
        name="ci", secret="s3cret", user="admin", project="admin", id="appcred-1")])
    _, url = start_cloud(seed)
    by_id = connect(url, auth_type="v3applicationcredential", username=None, password=None,
                    project_name=None, project_domain_name=None, user_domain_name=None,
                    application_credential_id="appcred-1",
                    application_credential_secret="s3cret")
    assert by_id.authorize()
    assert by_id.identity.get("/auth/projects").json()["projects"][0]["name"] == "admin"
    by_name = connect(url, auth_type="v3applicationcredential", password=None,
                      project_name=None, project_domain_name=None,
                      application_credential_name="ci",
                      application_credential_secret="s3cret")
    assert by_name.authorize()
    wrong = connect(url, auth_type="v3applicationcredential", username=None, password=None,
                    project_name=None, project_domain_name=None, user_domain_name=None,
                    application_credential_id="appcred-1",
                    application_credential_secret="wrong")
    with pytest.raises(exceptions.SDKException, match=r"HTTP 401"):
        wrong.authorize()


def test_a_user_of_another_project_sees_only_its_own(start_cloud: Start) -> None:
    seed = Seed(projects=["admin", "demo"], users=[
        SeedUser("admin", "admin", {"admin": ["admin"]}),
        SeedUser("demo", "demo", {"demo": ["member"]})])
    _, url = start_cloud(seed)
    demo = connect(url, username="demo", password="demo", project_name="demo")
    assert [p["name"] for p in demo.identity.get("/auth/projects").json()["projects"]] == \
        ["demo"]
    assert [p.name for p in demo.identity.projects()] == ["demo"]
    assert sorted(p.name for p in connect(url).identity.projects()) == ["admin", "demo"]
    with pytest.raises(exceptions.SDKException, match=r"HTTP 401"):
        connect(url, username="demo", password="demo", project_name="admin").authorize()
