"""Authentication of the API: noauth, token (a tokens file) and keystone (a fake Keystone v3).

Two tenants each hold a token; neither reaches the other's stacks: 403 through the other's
tenant URL, 404 for the other's stack id under its own tenant. A token with the ``admin`` role
reaches every tenant. The version document and ``/healthz`` need no token.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.api.auth import (
    KeystoneTokens,
    NoAuth,
    StaticTokens,
    Unconfigured,
    build_authenticator,
    load_tokens,
    require_auth,
)
from convergence.runtime import Runtime, open_runtime
from convergence.services import running
from convergence.settings import Settings, load_settings
from tests.api.test_stacks_api import TEMPLATE, assert_heat_error

TOK_A = "secret-token-of-tenant-a"
TOK_B = "secret-token-of-tenant-b"
TOK_ADMIN = "secret-token-of-the-admin"
TOKENS = {
    TOK_A: {"project": "tenantA", "roles": ["member"]},
    TOK_B: {"project": "tenantB", "roles": ["member", "reader"]},
    TOK_ADMIN: {"project": "ops", "roles": ["admin"]},
}


def hdr(token: str) -> dict[str, str]:
    return {"X-Auth-Token": token}


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.yaml"
    path.write_text(json.dumps(TOKENS), encoding="utf-8")  # JSON is YAML
    return path


def _runtime(tmp_path: Path, **settings: Any) -> Runtime:
    return open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'auth.db'}", **settings))


@pytest.fixture
def rt(tmp_path: Path, tokens_file: Path) -> Runtime:
    return _runtime(tmp_path, auth="token", tokens_file=str(tokens_file))


@pytest.fixture
def client(rt: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(rt, drive_dispatcher=False)) as c:
        yield c


def create(client: TestClient, tenant: str, token: str, name: str) -> dict[str, Any]:
    r = client.post(f"/v1/{tenant}/stacks", json={"stack_name": name, "template": TEMPLATE},
                    headers=hdr(token))
    assert r.status_code == 201, r.text
    return dict(r.json()["stack"])


@pytest.fixture
def stacks(client: TestClient, rt: Runtime) -> dict[str, str]:
    """One complete stack per tenant: ``{"A": id, "B": id}``."""
    a = create(client, "tenantA", TOK_A, "web")
    b = create(client, "tenantB", TOK_B, "db")
    running.wait_for_stack(rt, "tenantA", a["id"], timeout=60)
    running.wait_for_stack(rt, "tenantB", b["id"], timeout=60)
    return {"A": a["id"], "B": b["id"]}


# Reads and writes of a stack at ``stacks/{name}/{id}``: (method, sub-path, body).
OPERATIONS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "", None),
    ("GET", "/events", None),
    ("GET", "/resources", None),
    ("GET", "/resources/first", None),
    ("GET", "/outputs", None),
    ("GET", "/outputs/copied", None),
    ("GET", "/template", None),
    ("PUT", "", {"template": TEMPLATE, "parameters": {"value": "two"}}),
    ("PATCH", "", {"parameters": {"value": "three"}}),
    ("DELETE", "", None),
]


def test_every_tenant_route_requires_auth(client: TestClient) -> None:
    """Every route under ``/v1/{tenant_id}/`` (any router) depends on ``require_auth``."""
    from fastapi.dependencies.models import Dependant
    from fastapi.routing import APIRoute

    def calls(dep: Dependant) -> set[Any]:
        return {dep.call}.union(*(calls(d) for d in dep.dependencies))

    def walk(items: list[Any]) -> Iterator[Any]:
        for item in items:
            # Newer FastAPI keeps an included router whole (its routes already prefixed).
            inner = getattr(item, "original_router", None)
            yield from walk(list(inner.routes)) if inner is not None else [item]

    routes = [r for r in walk(list(client.app.routes))  # type: ignore[attr-defined]
              if isinstance(r, APIRoute) and r.path.startswith("/v1/{tenant_id}/")
              and r.path != "/v1/{tenant_id}/"]
    assert len(routes) > 10
    missing = [r.path for r in routes if require_auth not in calls(r.dependant)]
    assert missing == []
    r = client.get("/v1/tenantA/events", headers=hdr(TOK_B))
    assert r.status_code in (403, 404, 405), r.text


def test_unauthenticated_paths_need_no_token(client: TestClient) -> None:
    for path in ("/", "/versions", "/v1", "/v1/tenantA", "/v1/tenantA/"):
        assert client.get(path).status_code == 300, path
    assert client.get("/healthz").json() == {"status": "ok"}


def test_missing_or_unknown_token_is_401(client: TestClient, stacks: dict[str, str]) -> None:
    for headers in ({}, {"X-Auth-Token": ""}, hdr("not-a-token")):
        assert_heat_error(client.get("/v1/tenantA/stacks", headers=headers), 401,
                          "HTTPUnauthorized")
        assert_heat_error(client.get(f"/v1/tenantA/stacks/web/{stacks['A']}", headers=headers),
                          401, "HTTPUnauthorized")
        r = client.post("/v1/tenantA/stacks", headers=headers,
                        json={"stack_name": "x", "template": TEMPLATE})
        body = assert_heat_error(r, 401, "HTTPUnauthorized")
        assert body["title"] == "Unauthorized"
    assert_heat_error(client.post("/v1/tenantA/validate", json={"template": TEMPLATE}), 401,
                      "HTTPUnauthorized")
    # A lookup needs a token too (no redirect that would reveal the stack's id).
    r = client.get("/v1/tenantA/stacks/web", follow_redirects=False)
    assert_heat_error(r, 401, "HTTPUnauthorized")


def test_own_stacks_are_reachable(client: TestClient, stacks: dict[str, str]) -> None:
    r = client.get("/v1/tenantA/stacks", headers=hdr(TOK_A))
    assert [s["id"] for s in r.json()["stacks"]] == [stacks["A"]]
    r = client.get(f"/v1/tenantA/stacks/web/{stacks['A']}", headers=hdr(TOK_A))
    assert r.status_code == 200 and r.json()["stack"]["stack_status"] == "CREATE_COMPLETE"
    r = client.get("/v1/tenantB/stacks/db", headers=hdr(TOK_B), follow_redirects=False)
    assert r.status_code == 302
    assert r.headers["location"].endswith(f"/v1/tenantB/stacks/db/{stacks['B']}")
    r = client.get(f"/v1/tenantB/stacks/db/{stacks['B']}/outputs/copied", headers=hdr(TOK_B))
    assert r.status_code == 200, r.text
    r = client.post("/v1/tenantB/validate", json={"template": TEMPLATE}, headers=hdr(TOK_B))
    assert r.status_code == 200, r.text


def test_other_tenants_url_is_403(client: TestClient, stacks: dict[str, str]) -> None:
    """B through A's tenant URL: refused before anything is looked up."""
    assert_heat_error(client.get("/v1/tenantA/stacks", headers=hdr(TOK_B)), 403, "Forbidden")
    r = client.post("/v1/tenantA/stacks", json={"stack_name": "x", "template": TEMPLATE},
                    headers=hdr(TOK_B))
    assert_heat_error(r, 403, "Forbidden")
    for method, sub, body in OPERATIONS:
        r = client.request(method, f"/v1/tenantA/stacks/web/{stacks['A']}{sub}", json=body,
                           headers=hdr(TOK_B))
        assert_heat_error(r, 403, "Forbidden")
    for path in ("/stacks/web", f"/stacks/{stacks['A']}", "/stacks/web/events"):
        r = client.get(f"/v1/tenantA{path}", headers=hdr(TOK_B), follow_redirects=False)
        assert_heat_error(r, 403, "Forbidden")
    # Nothing changed: A's stack is still there, at its first generation.
    r = client.get(f"/v1/tenantA/stacks/web/{stacks['A']}", headers=hdr(TOK_A))
    assert r.status_code == 200
    assert r.json()["stack"]["stack_status"] == "CREATE_COMPLETE"
    assert r.json()["stack"]["generation"] == 1


def test_other_tenants_stack_under_own_url_is_404(client: TestClient,
                                                  stacks: dict[str, str]) -> None:
    """B asking for A's stack id under B's own tenant: it does not exist there."""
    r = client.get("/v1/tenantB/stacks", headers=hdr(TOK_B))
    assert [s["id"] for s in r.json()["stacks"]] == [stacks["B"]]
    r = client.get(f"/v1/tenantB/stacks?id={stacks['A']}", headers=hdr(TOK_B))
    assert r.json()["stacks"] == []
    for method, sub, body in OPERATIONS:
        r = client.request(method, f"/v1/tenantB/stacks/web/{stacks['A']}{sub}", json=body,
                           headers=hdr(TOK_B), follow_redirects=False)
        assert_heat_error(r, 404, "EntityNotFound")
    for path in ("/stacks/web", f"/stacks/{stacks['A']}", f"/stacks/{stacks['A']}/events"):
        r = client.get(f"/v1/tenantB{path}", headers=hdr(TOK_B), follow_redirects=False)
        assert_heat_error(r, 404, "EntityNotFound")
    r = client.get(f"/v1/tenantA/stacks/web/{stacks['A']}", headers=hdr(TOK_A))
    assert r.status_code == 200
    assert r.json()["stack"]["generation"] == 1


def test_admin_reaches_every_tenant(client: TestClient, rt: Runtime,
                                    stacks: dict[str, str]) -> None:
    for tenant, key in (("tenantA", "A"), ("tenantB", "B")):
        r = client.get(f"/v1/{tenant}/stacks", headers=hdr(TOK_ADMIN))
        assert [s["id"] for s in r.json()["stacks"]] == [stacks[key]]
    base = f"/v1/tenantA/stacks/web/{stacks['A']}"
    for sub in [sub for method, sub, _ in OPERATIONS if method == "GET"]:
        r = client.get(base + sub, headers=hdr(TOK_ADMIN))
        assert r.status_code == 200, (sub, r.text)
    r = client.patch(base, json={"parameters": {"value": "four"}}, headers=hdr(TOK_ADMIN))
    assert r.status_code == 202, r.text
    running.wait_for_stack(rt, "tenantA", stacks["A"], timeout=60)
    r = client.get(base, headers=hdr(TOK_A))
    assert r.json()["stack"]["parameters"]["value"] == "four"
    r = client.delete(f"/v1/tenantB/stacks/db/{stacks['B']}", headers=hdr(TOK_ADMIN))
    assert r.status_code == 204, r.text
    # The admin creates in another tenant's name: the stack is that tenant's.
    made = create(client, "tenantB", TOK_ADMIN, "made-by-admin")
    r = client.get(f"/v1/tenantB/stacks/made-by-admin/{made['id']}", headers=hdr(TOK_B))
    assert r.status_code == 200


def test_noauth_ignores_tokens(tmp_path: Path) -> None:
    rt = _runtime(tmp_path)
    assert rt.settings.auth == "noauth"
    with TestClient(create_app(rt, drive_dispatcher=False)) as c:
        assert c.get("/v1/anyone/stacks").json() == {"stacks": []}
        assert c.get("/v1/anyone/stacks", headers=hdr("whatever")).status_code == 200
        r = c.post("/v1/anyone/stacks", json={"stack_name": "s", "template": TEMPLATE})
        assert r.status_code == 201


def test_settings_and_factory(tmp_path: Path, tokens_file: Path) -> None:
    base = {"CONVERGENCE_DATABASE_URL": "sqlite://"}
    assert load_settings(base).auth == "noauth"
    s = load_settings({**base, "CONVERGENCE_AUTH": "Token",
                       "CONVERGENCE_TOKENS_FILE": str(tokens_file)})
    assert (s.auth, s.tokens_file) == ("token", str(tokens_file))
    assert isinstance(build_authenticator(s), StaticTokens)
    assert isinstance(build_authenticator(load_settings(base)), NoAuth)
    with pytest.raises(ValueError, match="noauth, token or keystone"):
        load_settings({**base, "CONVERGENCE_AUTH": "ldap"})
    with pytest.raises(ValueError, match="CONVERGENCE_TOKENS_FILE"):
        build_authenticator(load_settings({**base, "CONVERGENCE_AUTH": "token"}))
    s = load_settings({**base, "CONVERGENCE_AUTH": "keystone",
                       "CONVERGENCE_KEYSTONE_URL": "http://127.0.0.1:1/v3",
                       "CONVERGENCE_KEYSTONE_SERVICE_TOKEN": "service-secret"})
    assert "service-secret" not in repr(s)
    assert isinstance(build_authenticator(s), KeystoneTokens)


def test_bad_tokens_files_do_not_leak_tokens(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    for text in ("leaky-secret: {roles: [admin]}\n", "leaky-secret: [\n", "- leaky-secret\n",
                 "leaky-secret: {project: p, roles: 3}\n"):
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError) as info:
            load_tokens(path)
        assert "leaky-secret" not in str(info.value)
    path.write_text("tok: {project: p, roles: Admin}\n", encoding="utf-8")
    assert load_tokens(path)["tok"].is_admin
    with pytest.raises(ValueError, match="cannot read"):
        load_tokens(tmp_path / "missing.yaml")


# Keystone ------------------------------------------------------------------------------------

SERVICE_TOKEN = "service-token-secret"


class FakeKeystone:
    """A Keystone v3 answering ``GET /v3/auth/tokens`` from a table of tokens."""

    def __init__(self, tokens: dict[str, dict[str, Any]]) -> None:
        self.tokens = tokens
        self.calls = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.calls += 1
                if self.path.split("?")[0] != "/v3/auth/tokens":
                    return self._answer(404, {"error": {"code": 404}})
                if self.headers.get("X-Auth-Token") != SERVICE_TOKEN:
                    return self._answer(401, {"error": {"code": 401}})
                entry = fake.tokens.get(self.headers.get("X-Subject-Token") or "")
                if entry is None:
                    return self._answer(404, {"error": {"code": 404, "title": "Not Found"}})
                token: dict[str, Any] = {
                    "user": {"id": "u-" + entry["project"], "name": "someone"},
                    "roles": [{"id": "r" + r, "name": r} for r in entry["roles"]],
                    "expires_at": "2999-01-01T00:00:00.000000Z"}
                if entry["project"]:
                    token["project"] = {"id": entry["project"], "name": entry["project"]}
                # Keystone echoes the validated token in X-Subject-Token.
                self._answer(200, {"token": token},
                             {"X-Subject-Token": self.headers["X-Subject-Token"]})

            def _answer(self, code: int, body: dict[str, Any],
                        headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def keystone() -> Iterator[FakeKeystone]:
    fake = FakeKeystone({**TOKENS, "domain-scoped": {"project": "", "roles": ["member"]}})
    yield fake
    fake.close()


def test_keystone_mode(tmp_path: Path, keystone: FakeKeystone,
                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    rt = _runtime(tmp_path, auth="keystone", keystone_url=keystone.url + "/v3",
                  keystone_service_token=SERVICE_TOKEN)
    with TestClient(create_app(rt, drive_dispatcher=False)) as c:
        r = c.get("/v1/tenantA/stacks")
        assert_heat_error(r, 401, "HTTPUnauthorized")
        assert r.headers["www-authenticate"] == f'Keystone uri="{keystone.url}"'
        assert_heat_error(c.get("/v1/tenantA/stacks", headers=hdr("forged")), 401,
                          "HTTPUnauthorized")
        a = create(c, "tenantA", TOK_A, "web")
        running.wait_for_stack(rt, "tenantA", a["id"], timeout=60)
        assert c.get(f"/v1/tenantA/stacks/web/{a['id']}", headers=hdr(TOK_A)).status_code == 200
        for method, sub, body in OPERATIONS:
            r = c.request(method, f"/v1/tenantA/stacks/web/{a['id']}{sub}", json=body,
                          headers=hdr(TOK_B))
            assert_heat_error(r, 403, "Forbidden")
            r = c.request(method, f"/v1/tenantB/stacks/web/{a['id']}{sub}", json=body,
                          headers=hdr(TOK_B), follow_redirects=False)
            assert_heat_error(r, 404, "EntityNotFound")
        assert c.get("/v1/tenantB/stacks", headers=hdr(TOK_B)).json() == {"stacks": []}
        assert_heat_error(c.get("/v1/tenantA/stacks", headers=hdr("domain-scoped")), 403,
                          "Forbidden")
        r = c.get(f"/v1/tenantA/stacks/web/{a['id']}/outputs", headers=hdr(TOK_ADMIN))
        assert r.status_code == 200, r.text
        # Validations are cached: repeating a token's request does not ask Keystone again.
        calls = keystone.calls
        for _ in range(3):
            assert c.get("/v1/tenantA/stacks", headers=hdr(TOK_A)).status_code == 200
        assert keystone.calls == calls
    for secret in (TOK_A, TOK_B, TOK_ADMIN, SERVICE_TOKEN, "forged"):
        assert secret not in caplog.text


def test_keystone_refusing_the_service_token_is_500(keystone: FakeKeystone) -> None:
    auth = KeystoneTokens(keystone.url, "wrong-service-token")
    with pytest.raises(Exception) as info:
        auth.identify(TOK_A, "tenantA")
    assert getattr(info.value, "code", None) == 500
    assert "wrong-service-token" not in str(info.value)


def test_keystone_unreachable_or_unconfigured_is_500(tmp_path: Path) -> None:
    closed = FakeKeystone({})
    url = closed.url
    closed.close()
    rt = _runtime(tmp_path, auth="keystone", keystone_url=url,
                  keystone_service_token=SERVICE_TOKEN)
    with TestClient(create_app(rt, drive_dispatcher=False)) as c:
        r = c.get("/v1/tenantA/stacks", headers=hdr(TOK_A))
        assert_heat_error(r, 500, "HTTPInternalServerError")
        assert "could not be reached" in r.json()["error"]["message"]
    rt = _runtime(tmp_path, auth="keystone")
    app = create_app(rt, drive_dispatcher=False)
    assert isinstance(app.state.authenticator, Unconfigured)
    with TestClient(app) as c:
        r = c.get("/v1/tenantA/stacks", headers=hdr(TOK_A))
        body = assert_heat_error(r, 500, "HTTPInternalServerError")
        assert body["error"]["message"] == "keystone auth is not configured"
        assert c.get("/healthz").status_code == 200
