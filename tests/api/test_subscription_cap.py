"""The cap on a tenant's subscriptions (``max_subscriptions_per_tenant``), on SQLite and on
PostgreSQL: the one over it is refused with Heat's ``RequestLimitExceeded`` naming the limit,
and nothing is stored; two API processes creating at once cannot both take the last place.

"Two processes" are two apps served with uvicorn over two runtimes (each with its own pool of
connections) on one database, as two ``convergence api`` processes would be: one app runs its
requests' transactions one at a time, so the race is between apps. The subscriptions name a
host that is never resolved (no stack is made: nothing is delivered).
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import text

from convergence.runtime import Runtime, open_runtime
from convergence.settings import load_settings
from tests.api.test_stream import serve
from tests.api.test_webhooks import SECRET
from tests.conftest_services import drop_postgres_database, fresh_database_url, postgres_url

CAP = 3
URL = "https://hooks.example.com/notify"  # never delivered to: no stack is made here
APPS = 2
ROUNDS = 8


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    """A PostgreSQL database of this test process's own."""
    name = f"convergence_test_subscription_cap_{os.getpid()}"
    yield postgres_url(name)
    drop_postgres_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return fresh_database_url(request, tmp_path)


@pytest.fixture
def apps(database_url: str) -> Iterator[tuple[list[Runtime], list[httpx.Client]]]:
    """``APPS`` apps served over runtimes of their own on one database, and a client each.

    Their settings are read as a process's are, from its environment: the processes of a
    server database share the keys the secrets it stores are encrypted with."""
    settings = load_settings({"CONVERGENCE_DATABASE_URL": database_url,
                              "CONVERGENCE_MAX_SUBSCRIPTIONS_PER_TENANT": str(CAP),
                              "CONVERGENCE_ENCRYPTION_KEYS": Fernet.generate_key().decode()})
    with ExitStack() as stack:
        runtimes = [open_runtime(settings) for _ in range(APPS)]
        for rt in runtimes:
            stack.callback(rt.store.engine.dispose)
        clients = [stack.enter_context(httpx.Client(base_url=stack.enter_context(serve(rt)),
                                                    timeout=30.0))
                   for rt in runtimes]
        yield runtimes, clients


def subscribe(http: httpx.Client, tenant: str) -> httpx.Response:
    return http.post(f"/v1/{tenant}/subscriptions", json={
        "url": URL, "events": ["orchestration.stack.*"], "secret": SECRET})


def rows(rt: Runtime, tenant: str) -> int:
    with rt.store.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM subscriptions WHERE tenant = :t"),
                                {"t": tenant}).scalar_one())


def test_the_subscription_over_the_cap_is_refused_and_not_stored(
        apps: tuple[list[Runtime], list[httpx.Client]]) -> None:
    (rt, _), (http, _) = apps
    made = [subscribe(http, "tenantA") for _ in range(CAP)]
    assert [r.status_code for r in made] == [201] * CAP
    over = subscribe(http, "tenantA")
    assert over.status_code == 400, over.text
    error = over.json()["error"]
    assert error["type"] == "RequestLimitExceeded"
    assert f"maximum subscriptions per tenant, {CAP}" in error["message"]
    assert rows(rt, "tenantA") == CAP
    listed = http.get("/v1/tenantA/subscriptions").json()["subscriptions"]
    assert sorted(s["id"] for s in listed) == \
        sorted(r.json()["subscription"]["id"] for r in made)

    # The cap is the tenant's: another has its own; a deletion makes room again.
    assert subscribe(http, "tenantB").status_code == 201
    first = made[0].json()["subscription"]["id"]
    assert http.delete(f"/v1/tenantA/subscriptions/{first}").status_code == 204
    assert subscribe(http, "tenantA").status_code == 201
    assert subscribe(http, "tenantA").status_code == 400
    assert (rows(rt, "tenantA"), rows(rt, "tenantB")) == (CAP, 1)


def test_two_apps_creating_at_once_cannot_both_take_the_last_place(
        apps: tuple[list[Runtime], list[httpx.Client]]) -> None:
    """Round after round, a tenant one short of the cap, and one create from each app let go
    at the same moment: one is taken, the other refused, and the tenant holds the cap."""
    runtimes, clients = apps
    for _ in range(ROUNDS):
        tenant = f"t-{uuid.uuid4().hex[:8]}"
        for _ in range(CAP - 1):
            assert subscribe(clients[0], tenant).status_code == 201
        start = threading.Barrier(APPS)
        answers: list[int] = []

        def create(http: httpx.Client, tenant: str = tenant,
                   start: threading.Barrier = start, answers: list[int] = answers) -> None:
            start.wait(10)
            answers.append(subscribe(http, tenant).status_code)

        threads = [threading.Thread(target=create, args=(c,)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(answers) == [201] + [400] * (APPS - 1), answers
        assert rows(runtimes[0], tenant) == CAP
