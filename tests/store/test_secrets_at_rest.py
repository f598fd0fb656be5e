"""Secrets encrypted at rest, on SQLite and PostgreSQL: a stack with a hidden parameter, a key
pair whose private key the cloud generated, a server with an admin password and a random
string; a webhook subscription's secret; the signing key of signed URLs.

Each story reads the database's own rows with plain SQL (and, on SQLite, the file's bytes)
and finds none of the secrets in clear, while the stack converges with them, its owner is
shown the private key through the API and a signed URL still verifies. Keys rotate: what
was written under key A reads with ``B,A``, and with ``B`` alone once ``convergence db
rotate-keys`` sealed it again; a key missing from the list fails with a message that names
the setting (a 500 without its error to an API client). Rows written in clear before the
store encrypted anything still read, and are encrypted by the rotation.
"""

from __future__ import annotations

import os
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.cli import cli
from convergence.errors import ConfigurationError
from convergence.ports.clock import ManualClock
from convergence.runtime import Runtime, open_runtime
from convergence.services import queries, running, signals, stacks, webhooks
from convergence.settings import Settings
from convergence.store.sealing import make_key
from convergence_simcloud.serve import clouds_yaml
from convergence_simcloud.serve import running as serving
from convergence_simcloud.state import Options, SimCloud
from tests.conftest_services import fresh_database_url

TENANT = "tenant-a"
KEY_A, KEY_B, KEY_C = make_key(), make_key(), make_key()


def secret(what: str) -> str:
    return f"{what}-{secrets.token_hex(8)}"


HIDDEN = secret("hidden-parameter")
HIDDEN_DEFAULT = secret("hidden-in-environment")
ADMIN_PASS = secret("admin-password")
WEBHOOK_SECRET = secret("webhook-secret")

TEMPLATE = """
heat_template_version: 2018-08-31
parameters:
  db_password: {type: string, hidden: true}
  env_password: {type: string, hidden: true}
  admin_password: {type: string, hidden: true}
  flavor: {type: string, default: m1.tiny}
resources:
  net:
    type: OS::Neutron::Net
    properties: {name: app}
  subnet:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 10.8.0.0/24}
  key:
    type: OS::Nova::KeyPair
    properties: {name: deploy, save_private_key: true}
  server:
    type: OS::Nova::Server
    depends_on: subnet
    properties:
      image: cirros
      flavor: {get_param: flavor}
      networks: [{network: {get_resource: net}}]
      key_name: {get_resource: key}
      admin_pass: {get_param: admin_password}
  echo:
    type: OS::Heat::Value
    properties: {value: {get_param: db_password}}
  env_echo:
    type: OS::Heat::Value
    properties: {value: {get_param: env_password}}
  password:
    type: OS::Heat::RandomString
  uses_password:
    type: OS::Heat::Value
    properties: {value: {get_attr: [password, value]}}
outputs:
  private_key: {value: {get_attr: [key, private_key]}}
  echoed: {value: {get_attr: [echo, value]}}
  network: {value: {get_resource: net}}
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return fresh_database_url(request, tmp_path)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(time.time())  # tokens expire by the wall clock in keystoneauth


@pytest.fixture
def cloud(clock: ManualClock, tmp_path: Path) -> Iterator[dict[str, str]]:
    state = SimCloud(options=Options(build_seconds=20.0), clock=clock)
    with serving(state) as url:
        path = tmp_path / "clouds.yaml"
        path.write_text(clouds_yaml(url))
        yield {"OS_CLOUD": "simcloud", "OS_CLIENT_CONFIG_FILE": str(path)}


class Runtimes:
    """Runtimes on one database, each with the keys it is given, closed at the end."""

    def __init__(self, url: str, clock: ManualClock, cloud: dict[str, str]) -> None:
        self.url, self.clock, self.cloud = url, clock, cloud
        self.opened: list[Runtime] = []

    def open(self, *keys: str) -> Runtime:
        rt = open_runtime(Settings(database_url=self.url, encryption_keys=keys, batch_size=50),
                          clock=self.clock, environ=self.cloud)
        self.opened.append(rt)
        return rt

    def close(self) -> None:
        for rt in self.opened:
            rt.store.engine.dispose()


@pytest.fixture
def runtimes(database: str, clock: ManualClock, cloud: dict[str, str]) -> Iterator[Runtimes]:
    made = Runtimes(database, clock, cloud)
    yield made
    made.close()


def stored(url: str) -> str:
    """Every row of every table, as plain SQL reads it (no code of the store's)."""
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.connect() as conn:
            rows = [repr(tuple(row)) for table in sa.inspect(conn).get_table_names()
                    for row in conn.execute(sa.text(f'SELECT * FROM "{table}"'))]
    finally:
        engine.dispose()
    return "\n".join(rows)


def file_bytes(url: str) -> bytes:
    """A SQLite database's files as they are on disk (the write-ahead log too)."""
    path = Path(sa.make_url(url).database or "")
    return b"".join(p.read_bytes() for p in (path, path.with_name(path.name + "-wal"))
                    if p.exists())


def assert_nowhere(url: str, values: list[str]) -> None:
    rows = stored(url)
    data = file_bytes(url) if url.startswith("sqlite") else b""
    for value in values:
        assert value not in rows
        assert value.encode() not in data


def create(rt: Runtime, name: str = "app") -> str:
    stack = stacks.create_stack(rt, TENANT, name, TEMPLATE,
                                parameters={"db_password": HIDDEN, "admin_password": ADMIN_PASS},
                                environments=[{"parameter_defaults":
                                               {"env_password": HIDDEN_DEFAULT}}])
    done = running.wait_for_stack(rt, TENANT, stack.id)
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason
    return stack.id


def current(rt: Runtime, stack_id: str) -> dict[str, Any]:
    return {r.name: r for r in queries.list_resources(rt, TENANT, stack_id)
            if r.replaced_by is None}


def made_secrets(rt: Runtime, stack_id: str) -> list[str]:
    """What the stack's resources hold that is secret, read through the engine's store."""
    records = current(rt, stack_id)
    private_key = records["key"].attributes["private_key"]
    assert private_key.startswith("-----BEGIN")
    lines = [line for line in private_key.splitlines() if len(line) > 20 and "-----" not in line]
    random = records["password"].attributes["value"]
    assert len(random) == 32 and records["password"].reference_id == random
    return [*lines, random]


def test_the_secrets_are_stored_encrypted_and_used_in_clear(runtimes: Runtimes) -> None:
    rt = runtimes.open(KEY_A)
    stack_id = create(rt)
    sub = webhooks.create_subscription(rt, TENANT, "https://hooks.example.com/in",
                                       ["stack.*"], stack_id, WEBHOOK_SECRET)
    signing = signals.signing_key(rt).decode()
    made = made_secrets(rt, stack_id)
    assert_nowhere(runtimes.url, [HIDDEN, HIDDEN_DEFAULT, ADMIN_PASS, WEBHOOK_SECRET,
                                  signing, *made])
    rows = stored(runtimes.url)
    assert "$sealed" in rows and "$fernet$" in rows  # marked: what the store must open

    # Converged with them: the hidden values reached the resources that take them (as the
    # random string's did), the server was given its key pair and its admin password.
    records = current(rt, stack_id)
    assert records["echo"].attributes["value"] == HIDDEN
    assert records["env_echo"].attributes["value"] == HIDDEN_DEFAULT
    assert records["uses_password"].attributes["value"] == records["password"].reference_id
    assert records["server"].properties["admin_pass"] == ADMIN_PASS
    assert records["server"].properties["key_name"] == "deploy"
    assert records["server"].status == "COMPLETE"
    # An update that changes something else leaves the server alone: what it compares its
    # recorded properties with is what they are, not what is stored.
    server = records["server"].physical_id
    stacks.update_stack(rt, TENANT, "app", TEMPLATE, parameters={"flavor": "m1.tiny"},
                        existing=True)
    assert running.wait_for_stack(rt, TENANT, stack_id).stack_status == "UPDATE_COMPLETE"
    assert current(rt, stack_id)["server"].physical_id == server
    assert [e.action for e in queries.list_events(rt, TENANT, stack_id)
            if e.resource_name == "server"] == ["CREATE", "CREATE"]

    # What the readers are shown: the private key to its owner, hidden parameters masked.
    with TestClient(create_app(rt, drive_dispatcher=False)) as client:
        base = f"/v1/{TENANT}/stacks/app/{stack_id}"
        shown = client.get(f"{base}/resources/key").json()["resource"]["attributes"]
        assert shown["private_key"].startswith("-----BEGIN")
        stack = client.get(base).json()["stack"]
        assert stack["parameters"]["db_password"] == "******"
        outputs = {o["output_key"]: o["output_value"] for o in stack["outputs"]}
        assert outputs["private_key"] == shown["private_key"]
        assert outputs["echoed"] == HIDDEN
        assert outputs["network"] == records["net"].physical_id
        environment = client.get(f"{base}/environment").json()
        assert HIDDEN_DEFAULT not in repr(environment) and HIDDEN not in repr(environment)

    # Another process with the key reads them all, and verifies a URL this one signed.
    other = runtimes.open(KEY_A)
    assert webhooks.get_subscription(other, TENANT, sub.id).secret == WEBHOOK_SECRET
    token = signals.sign(signals.signing_key(rt), signals.claims_for(
        signals.SIGNAL, TENANT, stack_id, "server"))
    assert signals.verify(signals.signing_key(other), token) is not None
    assert made_secrets(other, stack_id) == made


def test_keys_rotate(runtimes: Runtimes, monkeypatch: pytest.MonkeyPatch) -> None:
    first = runtimes.open(KEY_A)
    stack_id = create(first)
    webhooks.create_subscription(first, TENANT, "https://hooks.example.com/in", ["stack.*"],
                                 None, WEBHOOK_SECRET)
    signing = signals.signing_key(first)
    made = made_secrets(first, stack_id)

    # A new key first: what key A sealed still opens; what is written now, B seals.
    both = runtimes.open(KEY_B, KEY_A)
    assert made_secrets(both, stack_id) == made
    assert [s.secret for s in webhooks.list_subscriptions(both, TENANT)] == [WEBHOOK_SECRET]
    stacks.update_stack(both, TENANT, "app", TEMPLATE, parameters={"flavor": "m1.tiny"},
                        existing=True)
    assert running.wait_for_stack(both, TENANT, stack_id).stack_status == "UPDATE_COMPLETE"

    # Key B alone before the rotation: what only A opens fails, and says what to set.
    alone = runtimes.open(KEY_B)
    with pytest.raises(ConfigurationError, match="CONVERGENCE_ENCRYPTION_KEYS") as refused:
        made_secrets(alone, stack_id)
    assert KEY_A not in str(refused.value) and KEY_B not in str(refused.value)
    with TestClient(create_app(alone, drive_dispatcher=False),
                    raise_server_exceptions=False) as client:
        answer = client.get(f"/v1/{TENANT}/stacks/app/{stack_id}/resources/key")
        assert answer.status_code == 500
        error = answer.json()["error"]
        assert error["traceback"] is None and "InvalidToken" not in answer.text
        assert KEY_A not in answer.text and KEY_B not in answer.text

    # The rotation: every secret sealed again with B.
    monkeypatch.setenv("CONVERGENCE_DATABASE_URL", runtimes.url)
    monkeypatch.setenv("CONVERGENCE_ENCRYPTION_KEYS", f"{KEY_B},{KEY_A}")
    result = CliRunner().invoke(cli, ["db", "rotate-keys"])
    assert result.exit_code == 0, result.output
    assert "encrypted again" in result.output and KEY_B not in result.output

    after = runtimes.open(KEY_B)
    assert made_secrets(after, stack_id) == made
    assert [s.secret for s in webhooks.list_subscriptions(after, TENANT)] == [WEBHOOK_SECRET]
    assert signals.signing_key(after) == signing
    with after.store.read() as tx:
        stack = tx.stack(stack_id)
        assert stack is not None and stack.template_id is not None
        assert tx.template(stack.template_id).parameters["db_password"] == HIDDEN
    stacks.delete_stack(after, TENANT, "app")
    assert running.wait_for_stack(after, TENANT, stack_id).stack_status == "DELETE_COMPLETE"


def test_rows_written_in_clear_before_encryption_still_read_and_rotate(
        runtimes: Runtimes, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = runtimes.open(KEY_A)
    stack_id = create(rt)
    sub = webhooks.create_subscription(rt, TENANT, "https://hooks.example.com/in",
                                       ["stack.*"], None, "placeholder")
    signals.signing_key(rt)
    old_private_key = secret("private-key-in-clear")
    old_signing = secret("signing-key-in-clear")
    engine = sa.create_engine(runtimes.url, poolclass=sa.NullPool)
    with engine.begin() as conn:  # what an older version wrote: the values in clear
        conn.execute(sa.text("UPDATE subscriptions SET secret = :s WHERE id = :id"),
                     {"s": WEBHOOK_SECRET, "id": sub.id})
        conn.execute(sa.text("UPDATE service_keys SET value = :v"), {"v": old_signing})
        record = conn.execute(sa.text("SELECT id FROM resources WHERE name = 'key'")).scalar()
        conn.execute(sa.text("UPDATE resources SET attributes = :a WHERE id = :id"), {
            "a": f'{{"public_key": "ssh-rsa AAAA", "private_key": "{old_private_key}"}}',
            "id": record})
    engine.dispose()

    fresh = runtimes.open(KEY_A)
    assert webhooks.get_subscription(fresh, TENANT, sub.id).secret == WEBHOOK_SECRET
    assert current(fresh, stack_id)["key"].attributes["private_key"] == old_private_key
    assert signals.signing_key(fresh).decode() == old_signing  # and sealed as it was read
    assert old_signing not in stored(runtimes.url)
    assert old_private_key in stored(runtimes.url)

    monkeypatch.setenv("CONVERGENCE_DATABASE_URL", runtimes.url)
    monkeypatch.setenv("CONVERGENCE_ENCRYPTION_KEYS", KEY_A)
    result = CliRunner().invoke(cli, ["db", "rotate-keys"])
    assert result.exit_code == 0, result.output
    assert_nowhere(runtimes.url, [WEBHOOK_SECRET, old_private_key, old_signing])
    again = runtimes.open(KEY_A)
    assert current(again, stack_id)["key"].attributes["private_key"] == old_private_key
    assert webhooks.get_subscription(again, TENANT, sub.id).secret == WEBHOOK_SECRET


def test_an_embedded_database_keeps_its_key_beside_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'embedded.db'}"
    rt = open_runtime(Settings(database_url=url))
    sub = webhooks.create_subscription(rt, TENANT, "https://hooks.example.com/in",
                                       ["stack.*"], None, WEBHOOK_SECRET)
    rt.store.engine.dispose()
    key_file = tmp_path / "embedded.db.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_text().strip()
    assert_nowhere(url, [WEBHOOK_SECRET, key])
    again = open_runtime(Settings(database_url=url))  # another process: the same key
    assert webhooks.get_subscription(again, TENANT, sub.id).secret == WEBHOOK_SECRET
    again.store.engine.dispose()
    with_setting = open_runtime(Settings(database_url=url, encryption_keys=(KEY_C, key)))
    assert webhooks.get_subscription(with_setting, TENANT, sub.id).secret == WEBHOOK_SECRET
    with_setting.store.engine.dispose()
    wrong = open_runtime(Settings(database_url=url, encryption_keys=(KEY_C,)))
    with pytest.raises(ConfigurationError, match="CONVERGENCE_ENCRYPTION_KEYS"):
        webhooks.get_subscription(wrong, TENANT, sub.id)
    wrong.store.engine.dispose()


SERVER_DATABASE = "postgresql://convergence@127.0.0.1:1/convergence"  # never reached


@pytest.mark.parametrize("command", [["api"], ["worker"], ["stack", "list"]])
def test_a_server_database_without_keys_is_refused(command: list[str]) -> None:
    env = {"CONVERGENCE_DATABASE_URL": SERVER_DATABASE, "CONVERGENCE_ENCRYPTION_KEYS": "",
           "CONVERGENCE_BROKER_URL": "redis://127.0.0.1:1/0" if command == ["worker"] else "",
           "CONVERGENCE_URL": ""}
    result = CliRunner().invoke(cli, command, env=env)
    assert result.exit_code in (1, 2), result.output
    assert "CONVERGENCE_ENCRYPTION_KEYS is not set" in result.output
    assert "convergence admin make-key" in result.output
    assert "Traceback" not in result.output
    with pytest.raises(ConfigurationError, match="make-key"):
        open_runtime(Settings(database_url=SERVER_DATABASE))


def test_a_malformed_key_is_refused_without_being_shown() -> None:
    bad = "not-a-fernet-key-" + secrets.token_hex(4)
    with pytest.raises(ConfigurationError, match="key 2 of 2 is not a Fernet key") as refused:
        open_runtime(Settings(database_url=SERVER_DATABASE, encryption_keys=(KEY_A, bad)))
    assert bad not in str(refused.value) and KEY_A not in str(refused.value)
    made = CliRunner().invoke(cli, ["admin", "make-key"])
    assert made.exit_code == 0
    key = made.output.strip()
    assert len(key) == 44 and key != KEY_A
    assert os.environ.get("CONVERGENCE_ENCRYPTION_KEYS") != key
