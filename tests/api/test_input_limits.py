"""What the API refuses before it stores anything: bodies nested too deep, stack names Heat
would refuse, and templates, files and environments over the size limits.

Each refusal is checked against the store's rows: nothing was written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from convergence.api.app import create_app
from convergence.runtime import Runtime, open_runtime
from convergence.settings import Settings
from convergence.template import DEFAULT_LIMITS
from tests.api.test_stacks_api import BASE, TEMPLATE, assert_heat_error, create

DEEP = b"[" * 100_000
TABLES = ("templates", "stacks", "traversals", "events", "subscriptions")

HEAT_NAME_MESSAGE = ('Invalid stack name {} must contain only alphanumeric or "_-." '
                     "characters, must start with alpha and must be 255 characters or less.")


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    yield open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'limits.db'}",
                                max_request_bytes=256 * 1024, max_template_bytes=64 * 1024))


@pytest.fixture
def client(rt: Runtime) -> Iterator[TestClient]:
    # Errors are answered, not raised: a RecursionError must show as what the client sees.
    with TestClient(create_app(rt, drive_dispatcher=False), raise_server_exceptions=False) as c:
        yield c


def rows(rt: Runtime) -> dict[str, int]:
    with rt.store.engine.connect() as conn:
        return {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one())
                for t in TABLES}


def post_raw(client: TestClient, method: str, path: str, body: bytes) -> Any:
    return client.request(method, path, content=body,
                          headers={"Content-Type": "application/json"})


# JSON nesting ------------------------------------------------------------------------------

@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/stacks"),
    ("POST", "/validate"),
    ("POST", "/stacks/preview"),
    ("POST", "/subscriptions"),
])
def test_deep_bodies_are_refused_before_parsing(client: TestClient, rt: Runtime, method: str,
                                                path: str) -> None:
    before = rows(rt)
    r = post_raw(client, method, f"{BASE}{path}", DEEP)
    body = assert_heat_error(r, 400, "MalformedRequestBody")
    assert "nesting is deeper than" in body["error"]["message"]
    assert rows(rt) == before


@pytest.mark.parametrize(("method", "suffix"), [
    ("PATCH", ""),
    ("PUT", ""),
    ("PUT", "/preview"),
    ("PATCH", "/preview"),
    ("POST", "/actions"),
    ("PATCH", "/resources/first"),
])
def test_deep_bodies_on_a_stack_change_nothing(client: TestClient, rt: Runtime, method: str,
                                               suffix: str) -> None:
    sid = create(client)["id"]
    before, generation = rows(rt), client.get(f"{BASE}/stacks/web/{sid}").json()["stack"]
    r = post_raw(client, method, f"{BASE}/stacks/web/{sid}{suffix}", DEEP)
    body = assert_heat_error(r, 400, "MalformedRequestBody")
    assert "nesting is deeper than" in body["error"]["message"]
    assert rows(rt) == before
    after = client.get(f"{BASE}/stacks/web/{sid}").json()["stack"]
    assert after["generation"] == generation["generation"]


def test_a_deep_value_inside_a_body_is_refused_as_well(client: TestClient, rt: Runtime) -> None:
    deep = b'{"stack_name": "s", "template": {"resources": ' + DEEP + b"}}"
    r = post_raw(client, "POST", f"{BASE}/stacks", deep)
    assert_heat_error(r, 400, "MalformedRequestBody")
    assert rows(rt)["stacks"] == 0


def deep_template(levels: int) -> dict[str, Any]:
    """A valid template nested ``levels`` deep: its root, resources, the resource and its
    metadata, then lists."""
    value: Any = []
    for _ in range(levels - 5):
        value = [value]
    return {"heat_template_version": "2018-08-31",
            "resources": {"a": {"type": "OS::Heat::None", "metadata": {"m": value}}}}


def test_a_template_as_deep_as_templates_may_be_is_not_refused_by_the_body_check(
        client: TestClient) -> None:
    limit = DEFAULT_LIMITS.max_depth
    r = client.post(f"{BASE}/stacks", json={"stack_name": "deep",
                                            "template": deep_template(limit)})
    assert r.status_code == 201, r.text
    # One level more is refused, in the words of the template's limit.
    r = client.post(f"{BASE}/stacks", json={"stack_name": "deeper",
                                            "template": deep_template(limit + 1)})
    assert r.status_code == 400, r.text
    assert f"nesting is deeper than {limit} levels" in r.json()["error"]["message"]


def test_a_json_parameter_nested_too_deep_is_refused(client: TestClient, rt: Runtime) -> None:
    template = {"heat_template_version": "2018-08-31", "parameters": {"p": {"type": "json"}},
                "resources": {"a": {"type": "OS::Heat::None"}}}
    deep = "[" * 100_000  # a string in the body: only the parameter's parser sees its depth
    for path, extra in (("/stacks", {"stack_name": "s"}), ("/validate", {})):
        r = client.post(f"{BASE}{path}", json={**extra, "template": template,
                                               "parameters": {"p": deep}})
        body = assert_heat_error(r, 400, "StackValidationFailed")
        assert "parameters.p" in body["error"]["message"]
        assert "nests too deep" in body["error"]["message"]
    assert rows(rt)["stacks"] == 0


# Stack names -------------------------------------------------------------------------------

BAD_NAMES = ["my stack", "a/b", "../x", "1abc", "a" * 256, "x" * 300, "stäck", "名前", "-a",
             "_a", ".a", "a\n", "a b"]
GOOD_NAMES = ["a", "A", "a" * 255, "web.tier-1_b", "Z9"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_names_heat_refuses_are_refused(client: TestClient, rt: Runtime, name: str) -> None:
    r = client.post(f"{BASE}/stacks", json={"stack_name": name, "template": TEMPLATE})
    body = assert_heat_error(r, 400, "StackValidationFailed")
    assert body["error"]["message"] == HEAT_NAME_MESSAGE.format(name)
    assert rows(rt)["stacks"] == 0
    assert rows(rt)["templates"] == 0
    r = client.post(f"{BASE}/stacks/preview", json={"stack_name": name, "template": TEMPLATE})
    assert_heat_error(r, 400, "StackValidationFailed")


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_names_heat_accepts_are_accepted_and_reachable(client: TestClient, name: str) -> None:
    sid = create(client, name)["id"]
    r = client.get(f"{BASE}/stacks/{name}", follow_redirects=False)
    assert r.status_code == 302
    assert r.headers["location"].endswith(f"/stacks/{name}/{sid}")


def test_a_name_that_is_not_a_string_is_refused(client: TestClient, rt: Runtime) -> None:
    r = client.post(f"{BASE}/stacks", json={"stack_name": 12, "template": TEMPLATE})
    assert r.status_code == 400
    assert rows(rt)["stacks"] == 0


# Sizes -------------------------------------------------------------------------------------

def padded(size: int) -> dict[str, Any]:
    return {**TEMPLATE, "description": "d" * size}


def test_a_file_over_the_template_limit_is_refused(client: TestClient, rt: Runtime) -> None:
    files = {"big.yaml": "x" * (65 * 1024)}
    r = client.post(f"{BASE}/stacks", json={"stack_name": "s", "template": TEMPLATE,
                                            "files": files})
    body = assert_heat_error(r, 413, "RequestLimitExceeded")
    assert "files.big.yaml" in body["error"]["message"]
    assert "over the limit of 65536 bytes" in body["error"]["message"]
    r = client.post(f"{BASE}/validate", json={"template": TEMPLATE, "files": files})
    assert_heat_error(r, 413, "RequestLimitExceeded")
    r = client.post(f"{BASE}/stacks/preview", json={"stack_name": "s", "template": TEMPLATE,
                                                    "files": files})
    assert_heat_error(r, 413, "RequestLimitExceeded")
    assert rows(rt)["stacks"] == rows(rt)["templates"] == 0


def test_an_environment_over_the_template_limit_is_refused(client: TestClient,
                                                           rt: Runtime) -> None:
    env = {"parameter_defaults": {"value": "v" * (65 * 1024)}}
    r = client.post(f"{BASE}/stacks", json={"stack_name": "s", "template": TEMPLATE,
                                            "environment": env})
    body = assert_heat_error(r, 413, "RequestLimitExceeded")
    assert "environment[0]" in body["error"]["message"]
    assert rows(rt)["stacks"] == 0


def test_a_patch_that_grows_a_stack_over_the_limit_changes_nothing(client: TestClient,
                                                                   rt: Runtime) -> None:
    files = {f"f{i}.txt": "x" * (60 * 1024) for i in range(3)}
    sid = create(client, files=files)["id"]
    before = rows(rt)
    more = {f"g{i}.txt": "y" * (60 * 1024) for i in range(2)}  # the body is under the limit
    r = client.patch(f"{BASE}/stacks/web/{sid}", json={"files": more})
    body = assert_heat_error(r, 413, "RequestLimitExceeded")
    assert "(5 files, 307200 bytes)" in body["error"]["message"]
    assert "together, over the limit of 262144 bytes" in body["error"]["message"]
    assert rows(rt) == before
    r = client.patch(f"{BASE}/stacks/web/{sid}/preview", json={"files": more})
    assert_heat_error(r, 413, "RequestLimitExceeded")
