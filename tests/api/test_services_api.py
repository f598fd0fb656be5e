"""The services list (worker heartbeats), the new /metrics series and ``with_attr``.

The services list names hosts and pids: an admin's (Heat's ``service:index``), so it is asked
with the admin's token of ``tests/api/test_auth.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import fakeredis
import pytest
import redis
from click.testing import CliRunner
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.api.ops import queue_depths
from convergence.cli import cli
from convergence.ports.views import WORKER, WorkerInfo
from convergence.runtime import Runtime, open_runtime
from convergence.settings import Settings
from tests.api.test_auth import TOK_A, TOK_ADMIN, TOKENS
from tests.api.test_ops import _sample
from tests.api.test_stacks_api import BASE, create, drain

ADMIN = {"X-Auth-Token": TOK_ADMIN}


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    yield open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'services.db'}",
                                heartbeat_seconds=5.0))


def with_tokens(rt: Runtime, tmp_path: Path) -> Runtime:
    """``rt`` authenticating with the tokens of ``tests/api/test_auth.py``."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS), encoding="utf-8")
    rt.settings = rt.settings.with_(auth="token", tokens_file=str(tokens))
    return rt


def test_the_api_lists_itself_while_it_drives_the_dispatcher(rt: Runtime,
                                                             tmp_path: Path) -> None:
    with TestClient(create_app(with_tokens(rt, tmp_path))) as client:
        r = client.get(f"{BASE}/services", headers=ADMIN)
        assert r.status_code == 200, r.text
        [item] = r.json()["services"]
        assert item["id"] == item["engine_id"] == rt.engine.worker_id
        assert item["binary"] == "convergence-api" and item["kind"] == "api"
        assert item["status"] == "up" and item["report_interval"] == 5.0
        assert item["deleted_at"] is None
        assert {"id", "host", "hostname", "binary", "engine_id", "topic", "report_interval",
                "status", "created_at", "updated_at", "deleted_at"} <= set(item)
    # Shut down gracefully: marked stopped, so down.
    with rt.store.read() as tx:
        [row] = tx.workers()
    assert row.stopped_at is not None


def test_a_stale_worker_shows_down(rt: Runtime, tmp_path: Path) -> None:
    now = rt.clock.now()
    with rt.store.begin() as tx:
        tx.heartbeat(WorkerInfo("stale", "host-b", 7, WORKER, now - 60))
    with rt.store.engine.begin() as conn:  # its last heartbeat, a minute ago
        conn.exec_driver_sql("UPDATE workers SET heartbeat_at = heartbeat_at - 60")
    with TestClient(create_app(with_tokens(rt, tmp_path), drive_dispatcher=False)) as client:
        items = client.get(f"{BASE}/services", headers=ADMIN).json()["services"]
    assert [(i["id"], i["binary"], i["status"]) for i in items] == [
        ("stale", "convergence-worker", "down")]
    assert items[0]["heartbeat_age"] >= 60


def test_services_needs_an_admin(rt: Runtime, tmp_path: Path) -> None:
    with TestClient(create_app(with_tokens(rt, tmp_path), drive_dispatcher=False)) as client:
        assert client.get(f"{BASE}/services").status_code == 401
        # A member of the tenant is not shown the engine's hosts and pids.
        r = client.get(f"{BASE}/services", headers={"X-Auth-Token": TOK_A})
        assert r.status_code == 403
        assert r.json()["error"]["message"] == "You are not authorized to use service:index."
        assert client.get(f"{BASE}/services", headers=ADMIN).json() == {"services": []}


def test_cli_services(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    with rt.store.begin() as tx:
        tx.heartbeat(WorkerInfo("w-cli", "host-c", 9, WORKER, rt.clock.now()))
    env = {"CONVERGENCE_DATABASE_URL": rt.settings.database_url}
    result = CliRunner().invoke(cli, ["services", "-f", "json"], env=env)
    assert result.exit_code == 0, result.output
    assert '"status": "up"' in result.output and '"id": "w-cli"' in result.output
    table = CliRunner().invoke(cli, ["services"], env=env)
    assert table.exit_code == 0, table.output
    assert "w-cli" in table.output and "Heartbeat Age" in table.output


def test_metrics_has_the_engine_and_queue_series(rt: Runtime) -> None:
    with TestClient(create_app(rt, drive_dispatcher=False)) as client:
        sid = create(client)["id"]
        drain(rt, sid)
        text = client.get("/metrics").text
    assert _sample(text, "convergence_engine_nodes_stepped_total") == rt.engine.stats.nodes > 0
    assert _sample(text, "convergence_step_duration_seconds_count") == rt.engine.stats.nodes
    assert _sample(text, "convergence_engine_leases_taken_over_total") == 0
    assert _sample(text, "convergence_orphans") == 0
    assert _sample(text, "convergence_queue_depth", queue="convergence.steps") == 0
    assert _sample(text, "convergence_queue_depth", queue="convergence.plan") == 0


def test_queue_depth_reads_the_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    server = fakeredis.FakeServer()
    fake = fakeredis.FakeRedis(server=server)
    fake.rpush("convergence.steps", "a", "b")
    monkeypatch.setattr(redis.Redis, "from_url",
                        lambda url, **_: fakeredis.FakeRedis(server=server))
    assert queue_depths("redis://broker:6379/0") == {"convergence.plan": 0,
                                                      "convergence.steps": 2}
    assert queue_depths(None) == {"convergence.plan": 0, "convergence.steps": 0}


def test_resource_show_with_attr(rt: Runtime) -> None:
    with TestClient(create_app(rt, drive_dispatcher=False)) as client:
        sid = create(client)["id"]
        drain(rt, sid)
        url = f"{BASE}/stacks/web/{sid}/resources/first"
        plain = client.get(url).json()["resource"]["attributes"]
        r = client.get(url, params=[("with_attr", "output"), ("with_attr", "nope")])
        assert r.status_code == 200, r.text
        attributes = r.json()["resource"]["attributes"]
    assert attributes["output"] == plain["output"] == "one"
    assert "nope" in attributes and attributes["nope"] is None
