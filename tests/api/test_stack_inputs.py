"""What a stack was made from, as the API shows it (``convergence.services.inputs``): the stack
list's ``description`` (read from the column kept beside each template, or parsed from the text
of a template stored before it), and stack show's ``parameters`` (every parameter's effective
value as Heat gives it, hidden ones masked, the pseudo-parameters added).

The API through FastAPI's TestClient over an embedded runtime, as in ``test_stacks_api``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.runtime import Runtime, open_runtime
from convergence.services import running
from convergence.settings import Settings

BASE = "/v1/tenantA"

TEMPLATE: dict[str, Any] = {
    "heat_template_version": "2018-08-31",
    "description": "every kind of parameter",
    "parameters": {
        "name": {"type": "string", "default": "one"},
        "password": {"type": "string", "hidden": True, "default": "s3cr3t"},
        "given_secret": {"type": "string", "hidden": True},
        "count": {"type": "number", "default": 3},
        "zones": {"type": "comma_delimited_list", "default": "a,b"},
        "tags": {"type": "json", "default": {"k": 1}},
        "debug": {"type": "boolean", "default": False},
        "from_env": {"type": "string", "default": "template's"},
    },
    "resources": {"r": {"type": "OS::Heat::None"}},
}


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    runtime = open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'api.db'}"))
    yield runtime
    runtime.store.engine.dispose()


@pytest.fixture
def client(rt: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(rt, drive_dispatcher=False)) as c:
        yield c


def create(client: TestClient, rt: Runtime, name: str, template: dict[str, Any],
           **extra: Any) -> str:
    r = client.post(f"{BASE}/stacks", json={"stack_name": name, "template": template, **extra})
    assert r.status_code == 201, r.text
    stack_id = str(r.json()["stack"]["id"])
    running.wait_for_stack(rt, "tenantA", stack_id, timeout=60)
    return stack_id


def listed(client: TestClient) -> dict[str, str]:
    r = client.get(f"{BASE}/stacks")
    assert r.status_code == 200, r.text
    return {s["stack_name"]: s["description"] for s in r.json()["stacks"]}


def test_stack_show_gives_every_parameter_its_effective_value(client: TestClient,
                                                              rt: Runtime) -> None:
    stack_id = create(client, rt, "web", TEMPLATE,
                      parameters={"given_secret": "hunter2", "count": "5"},
                      environment={"parameter_defaults": {"from_env": "environment's"}})

    shown = client.get(f"{BASE}/stacks/web/{stack_id}").json()["stack"]

    assert shown["description"] == shown["template_description"] == "every kind of parameter"
    assert shown["parameters"] == {
        "name": "one",  # a default
        "password": "******",  # hidden: masked, default or given
        "given_secret": "******",
        "count": "5",  # given (as a string, converted, shown as Heat's str)
        "zones": "a,b",
        "tags": '{"k": 1}',
        "debug": "False",
        "from_env": "environment's",  # parameter_defaults win over the template's default
        "OS::stack_id": stack_id, "OS::stack_name": "web", "OS::project_id": "tenantA",
    }
    assert "hunter2" not in str(shown) and "s3cr3t" not in str(shown)


def test_preview_masks_hidden_parameters(client: TestClient) -> None:
    r = client.post(f"{BASE}/stacks/preview", json={
        "stack_name": "p", "template": TEMPLATE, "parameters": {"given_secret": "hunter2"}})
    assert r.status_code == 200, r.text
    params = r.json()["stack"]["parameters"]
    assert params["given_secret"] == params["password"] == "******"
    assert params["count"] == "3" and params["OS::stack_name"] == "p"


def test_stack_list_shows_each_template_description(client: TestClient, rt: Runtime) -> None:
    first = create(client, rt, "described", TEMPLATE, parameters={"given_secret": "x"})
    create(client, rt, "plain", {"heat_template_version": "2018-08-31",
                                 "resources": {"r": {"type": "OS::Heat::None"}}})

    assert listed(client) == {"described": "every kind of parameter", "plain": ""}

    # An update to a template of another description: the list follows the stack's template.
    r = client.put(f"{BASE}/stacks/described/{first}", json={
        "template": {**TEMPLATE, "description": "updated"},
        "parameters": {"given_secret": "x"}})
    assert r.status_code == 202, r.text
    running.wait_for_stack(rt, "tenantA", first, timeout=60)
    assert listed(client)["described"] == "updated"


def test_the_list_reads_descriptions_from_their_column(client: TestClient,
                                                       rt: Runtime) -> None:
    create(client, rt, "web", TEMPLATE, parameters={"given_secret": "x"})
    with rt.store.engine.begin() as conn:
        stored = conn.execute(sa.text("SELECT description FROM templates")).scalars().all()
        assert stored == ["every kind of parameter"]
        # The column is what the list shows (the template's text is not read for it) ...
        conn.execute(sa.text("UPDATE templates SET description = 'from the column'"))
    assert listed(client) == {"web": "from the column"}

    # ... and a template stored before the column existed (NULL) is read from its text.
    with rt.store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE templates SET description = NULL"))
    assert listed(client) == {"web": "every kind of parameter"}


def stored_parameters(rt: Runtime) -> list[Any]:
    with rt.store.engine.connect() as conn:
        return [json.loads(v) if v is not None else None for v in conn.execute(sa.text(
            "SELECT shown_parameters FROM templates ORDER BY created_at")).scalars()]


def test_stack_show_reads_the_parameters_kept_with_the_template(
        client: TestClient, rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    stack_id = create(client, rt, "web", TEMPLATE, parameters={"given_secret": "hunter2"})
    path = f"{BASE}/stacks/web/{stack_id}"
    shown = client.get(path).json()["stack"]["parameters"]

    # Kept as the show gives them, hidden ones masked: no secret is written there.
    [kept] = stored_parameters(rt)
    assert kept == {k: v for k, v in shown.items() if not k.startswith("OS::")}
    assert kept["given_secret"] == kept["password"] == "******"

    # A show builds no definition (a process that never saw the template, a big template):
    # what it gives is the column's.
    def no_parse(*_: object, **__: object) -> None:
        raise AssertionError("the show built the template's definition")

    monkeypatch.setattr(rt.engine.definitions, "get", no_parse)
    assert client.get(path).json()["stack"]["parameters"] == shown
    with rt.store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE templates SET shown_parameters = :v"),
                     {"v": json.dumps({"name": "from the column"})})
    assert client.get(path).json()["stack"]["parameters"] == {
        "name": "from the column",
        "OS::stack_id": stack_id, "OS::stack_name": "web", "OS::project_id": "tenantA"}

    # A template stored before they were kept (NULL): its definition gives them, as before.
    monkeypatch.undo()
    with rt.store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE templates SET shown_parameters = NULL"))
    assert client.get(path).json()["stack"]["parameters"] == shown


def test_nested_stacks_templates_keep_their_parameters_too(client: TestClient,
                                                           rt: Runtime) -> None:
    inner = {"heat_template_version": "2018-08-31",
             "parameters": {"v": {"type": "string"}, "key": {"type": "string", "hidden": True,
                                                            "default": "k"}},
             "resources": {"r": {"type": "OS::Heat::None"}}}
    create(client, rt, "outer", {
        "heat_template_version": "2018-08-31",
        "resources": {"s": {"type": "OS::Heat::Stack",
                            "properties": {"template": json.dumps(inner),
                                           "parameters": {"v": "x"}}}}})

    assert stored_parameters(rt) == [{}, {"v": "x", "key": "******"}]
