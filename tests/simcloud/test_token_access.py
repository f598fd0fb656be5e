"""Who may validate, check and revoke a token through the simulated Keystone, as Keystone's
policy says: a caller with the ``admin`` or ``service`` role any token, anyone else only a token
of its own user (403 otherwise, an unknown token included). The engine's own Keystone
authenticator (``convergence.api.auth.KeystoneTokens``) validates its callers' tokens with a
service user's token, and is refused with a member's."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from convergence.api.auth import KeystoneTokens
from convergence_simcloud.seed import Seed, SeedUser
from tests.simcloud.conftest import Start, connect

SEED = Seed(projects=["admin", "service", "demo"], users=[
    SeedUser("admin", "admin", {"admin": ["admin", "member", "reader"]}),
    SeedUser("engine", "engine-pw", {"service": ["service"]}),
    SeedUser("alice", "alice-pw", {"demo": ["member", "reader"]}),
    SeedUser("bob", "bob-pw", {"demo": ["member"]})])
PROJECTS = {"admin": "admin", "engine": "service", "alice": "demo", "bob": "demo"}


def token_of(url: str, user: str) -> str:
    password = "admin" if user == "admin" else f"{user}-pw"
    return str(connect(url, username=user, password=password,
                       project_name=PROJECTS[user]).authorize())


def ask(url: str, method: str, caller: str, subject: str) -> httpx.Response:
    return httpx.request(method, f"{url}/v3/auth/tokens",
                         headers={"X-Auth-Token": caller, "X-Subject-Token": subject})


@pytest.fixture
def url(start_cloud: Start) -> str:
    return start_cloud(SEED)[1]


def test_a_member_sees_only_its_own_users_tokens_and_an_admin_any(url: str) -> None:
    alice, bob = token_of(url, "alice"), token_of(url, "bob")
    for method in ("GET", "HEAD", "DELETE"):
        answer = ask(url, method, alice, bob)
        assert answer.status_code == 403, method
        if method != "HEAD":
            assert answer.json()["error"]["code"] == 403
            assert "bob" not in answer.text and "X-Subject-Token" not in answer.headers
        # an unknown token is as forbidden: no one learns which tokens exist
        assert ask(url, method, alice, "no-such-token").status_code == 403, method
    assert ask(url, "GET", bob, bob).status_code == 200  # bob's token was not revoked

    other = token_of(url, "alice")  # alice's own: hers to validate, check and revoke
    shown = ask(url, "GET", alice, other)
    assert shown.status_code == 200 and shown.json()["token"]["user"]["name"] == "alice"
    assert ask(url, "HEAD", alice, other).status_code == 200
    assert ask(url, "DELETE", alice, other).status_code == 204
    assert ask(url, "GET", other, other).status_code == 401  # revoked: it authenticates no more

    admin = token_of(url, "admin")
    assert ask(url, "GET", admin, bob).json()["token"]["user"]["name"] == "bob"
    assert ask(url, "GET", admin, "no-such-token").status_code == 404
    assert ask(url, "DELETE", admin, bob).status_code == 204


def test_a_service_user_may_validate_check_and_revoke_any_token(url: str) -> None:
    engine, bob = token_of(url, "engine"), token_of(url, "bob")
    shown = ask(url, "GET", engine, bob)
    assert shown.status_code == 200 and shown.headers["X-Subject-Token"] == bob
    assert shown.json()["token"]["user"]["name"] == "bob"
    assert ask(url, "HEAD", engine, bob).status_code == 200
    assert ask(url, "GET", engine, "no-such-token").status_code == 404
    assert ask(url, "DELETE", engine, bob).status_code == 204
    assert ask(url, "HEAD", engine, bob).status_code == 404


def test_the_engine_authenticator_needs_a_service_users_token(url: str) -> None:
    alice = token_of(url, "alice")
    engine = KeystoneTokens(f"{url}/v3", token_of(url, "engine"), cache_seconds=0)
    identity: Any = engine.identify(alice, "demo")
    assert identity.user is not None and {"member", "reader"} <= set(identity.roles)
    member = KeystoneTokens(f"{url}/v3", token_of(url, "bob"), cache_seconds=0)
    with pytest.raises(Exception) as refused:
        member.identify(alice, "demo")
    assert getattr(refused.value, "code", None) == 500
    assert "refused this service's credentials" in str(refused.value)
