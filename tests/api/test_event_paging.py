"""Heat's event list paged in the database (``Tx.event_page``, read from the
request by ``convergence.api.event_params``), on SQLite and on PostgreSQL.

A stack is created through the API, then given a ledger of events of its own (several
resources, actions, statuses, types and physical ids) through the store; every answer is
compared with the ``events`` table's rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.ports.views import NewEvent
from convergence.runtime import Runtime, open_runtime
from convergence.settings import Settings
from tests.api.test_stacks_api import BASE, assert_heat_error, create, drain
from tests.conftest_services import (
    TEST_ENCRYPTION_KEYS,
    drop_postgres_database,
    fresh_database_url,
    postgres_url,
)

Row = dict[str, Any]


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    """A PostgreSQL database of this test process's own (two runs at once never share it)."""
    name = f"convergence_test_event_paging_{os.getpid()}"
    url = postgres_url(name)
    yield url
    drop_postgres_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def rt(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    runtime = open_runtime(Settings(database_url=fresh_database_url(request, tmp_path),
                                    encryption_keys=TEST_ENCRYPTION_KEYS))
    yield runtime
    runtime.store.engine.dispose()


@pytest.fixture
def client(rt: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(rt, drive_dispatcher=False)) as c:
        yield c


_ACTIONS = ("CREATE", "UPDATE", "DELETE", "CHECK")
_STATUSES = ("IN_PROGRESS", "COMPLETE", "COMPLETE", "FAILED")


def ledger(n: int) -> list[NewEvent]:
    """``n`` events of five resources (``gone`` has no record: it was removed), in a mix of
    actions, statuses, two types and a physical id per resource and action."""
    names = ("r0", "r1", "r2", "r3", "gone")
    return [NewEvent(names[i % 5], f"phys-{i % 5}-{i % 7 % 3}",
                     "Test::A" if i % 3 else "Test::B", _ACTIONS[i // 5 % 4],
                     _STATUSES[i // 3 % 4], f"event {i}") for i in range(n)]


@pytest.fixture
def stack(client: TestClient, rt: Runtime) -> str:
    """The stack ``web``'s URL: its own events (the create's), then 230 of the ledger's; and
    a neighbour stack's events interleaved with them."""
    sid = str(create(client, "web")["id"])
    other = str(create(client, "other")["id"])
    drain(rt, sid)
    drain(rt, other)
    events = ledger(230)
    for i in range(0, len(events), 40):
        with rt.store.begin() as tx:
            tx.add_events(sid, None, 1, events[i:i + 40])
            tx.add_events(other, None, 1, events[i:i + 7])
    return f"{BASE}/stacks/web/{sid}"


def rows(rt: Runtime, url: str) -> list[Row]:
    """The stack's events as the table holds them, in id order."""
    sid = url.rsplit("/", 1)[1]
    with rt.store.engine.connect() as conn:
        found = conn.execute(sa.text("SELECT * FROM events WHERE stack_id = :s ORDER BY id"),
                             {"s": sid})
        return [dict(r._mapping) for r in found]


def ids(found: list[Row]) -> list[str]:
    return [str(r["id"]) for r in found]


def walk(client: TestClient, url: str, **params: Any) -> list[str]:
    """Every page from the first on, each after the last event of the one before; the ids."""
    seen: list[str] = []
    pages = 0
    while True:
        query = {**params, **({"marker": seen[-1]} if seen else {})}
        r = client.get(url, params=query)
        assert r.status_code == 200, r.text
        page = [e["id"] for e in r.json()["events"]]
        assert len(page) <= int(params["limit"])
        if not page:
            return seen
        seen.extend(page)
        pages += 1
        assert pages <= 1000, "the walk does not end"


# Paging -------------------------------------------------------------------------------------

@pytest.mark.parametrize("limit", [1, 7, 100])
def test_paging_walks_every_event_once_both_ways(client: TestClient, rt: Runtime, stack: str,
                                                 limit: int) -> None:
    every = ids(rows(rt, stack))
    assert len(every) > 230
    assert walk(client, f"{stack}/events", limit=limit) == every
    assert walk(client, f"{stack}/events", limit=limit, sort_dir="desc") == every[::-1]
    assert walk(client, f"{stack}/events", limit=limit, sort_dir="DESC",
                sort_keys="event_time") == every[::-1]


def test_unpaged_list_limit_zero_and_marker_alone(client: TestClient, rt: Runtime,
                                                  stack: str) -> None:
    every = ids(rows(rt, stack))

    def listed(**params: Any) -> list[str]:
        r = client.get(f"{stack}/events", params=params)
        assert r.status_code == 200, r.text
        return [e["id"] for e in r.json()["events"]]

    assert listed() == every
    assert listed(limit=0) == []
    assert listed(limit="1" + "0" * 30) == every  # more than any stack has
    assert listed(marker=every[9]) == every[10:]
    assert listed(marker=every[9], sort_dir="desc") == every[:9][::-1]
    assert listed(limit=1, sort_dir="desc") == [every[-1]]  # openstacksdk's newest event


def test_sorted_by_resource_type_pages_in_that_order(client: TestClient, rt: Runtime,
                                                     stack: str) -> None:
    by_type = sorted(rows(rt, stack), key=lambda r: (r["resource_type"], r["id"]))
    assert walk(client, f"{stack}/events", limit=9, sort_keys="resource_type") == ids(by_type)
    assert walk(client, f"{stack}/events", limit=9, sort_keys=["resource_type", "event_time"],
                sort_dir="desc") == ids(by_type)[::-1]
    # A time key first: the id decides, whatever follows.
    assert walk(client, f"{stack}/events", limit=50,
                sort_keys=["created_at", "resource_type"]) == ids(rows(rt, stack))


# Filters ------------------------------------------------------------------------------------

_FILTERS: list[tuple[dict[str, Any], Callable[[Row], bool]]] = [
    ({"resource_name": "r1"}, lambda r: r["resource_name"] == "r1"),
    ({"resource_name": ["r1", "gone"]}, lambda r: r["resource_name"] in ("r1", "gone")),
    ({"resource_action": "DELETE"}, lambda r: r["action"] == "DELETE"),
    ({"resource_status": "FAILED"}, lambda r: r["status"] == "FAILED"),
    ({"resource_status": "CREATE_COMPLETE"},
     lambda r: (r["action"], r["status"]) == ("CREATE", "COMPLETE")),
    ({"resource_status": ["UPDATE_IN_PROGRESS", "FAILED"]},
     lambda r: r["status"] == "FAILED" or (r["action"], r["status"]) == ("UPDATE",
                                                                          "IN_PROGRESS")),
    ({"resource_type": "Test::B"}, lambda r: r["resource_type"] == "Test::B"),
    ({"physical_resource_id": "phys-2-1"}, lambda r: r["physical_resource_id"] == "phys-2-1"),
    ({"resource_name": "r3", "resource_status": "COMPLETE", "resource_action": "UPDATE"},
     lambda r: (r["resource_name"], r["status"], r["action"]) == ("r3", "COMPLETE", "UPDATE")),
    ({"resource_status": "NOPE"}, lambda r: False),
]


@pytest.mark.parametrize(("params", "matches"), _FILTERS,
                         ids=[str(p) for p, _ in _FILTERS])
def test_filters_answer_exactly_the_matching_events(
        client: TestClient, rt: Runtime, stack: str, params: dict[str, Any],
        matches: Callable[[Row], bool]) -> None:
    wanted = ids([r for r in rows(rt, stack) if matches(r)])
    assert wanted or params == {"resource_status": "NOPE"}  # the ledger has matches
    r = client.get(f"{stack}/events", params=params)
    assert r.status_code == 200, r.text
    assert [e["id"] for e in r.json()["events"]] == wanted
    assert walk(client, f"{stack}/events", limit=4, **params) == wanted
    assert walk(client, f"{stack}/events", limit=4, sort_dir="desc", **params) == wanted[::-1]


def test_stack_level_events_by_type(client: TestClient, rt: Runtime, stack: str) -> None:
    own = [e for e in client.get(f"{stack}/events", params={
        "resource_type": "OS::Heat::Stack"}).json()["events"]]
    assert [e["resource_status"] for e in own] == ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]
    assert {e["resource_name"] for e in own} == {"web"}


# One resource's events ------------------------------------------------------------------------

def test_resource_scoped_listing_pages_and_filters(client: TestClient, rt: Runtime,
                                                   stack: str) -> None:
    mine = [r for r in rows(rt, stack) if r["resource_name"] == "r1"]
    url = f"{stack}/resources/r1/events"
    assert walk(client, url, limit=5) == ids(mine)
    assert walk(client, url, limit=5, sort_dir="desc") == ids(mine)[::-1]
    failed = ids([r for r in mine if r["status"] == "FAILED"])
    assert failed and walk(client, url, limit=2, resource_status="FAILED") == failed
    # The path names the resource: a resource_name in the query does not widen it.
    listed = client.get(url, params={"resource_name": "r2"}).json()["events"]
    assert [e["id"] for e in listed] == ids(mine)
    # A resource the stack no longer has, whose events remain: listed; one it never had: 404.
    gone = ids([r for r in rows(rt, stack) if r["resource_name"] == "gone"])
    assert walk(client, f"{stack}/resources/gone/events", limit=50) == gone
    assert_heat_error(client.get(f"{stack}/resources/nope/events"), 404, "EntityNotFound")
    # A page past the end of a resource's events is empty, not a 404.
    r = client.get(url, params={"marker": ids(mine)[-1]})
    assert r.status_code == 200 and r.json() == {"events": []}


# Bad parameters -----------------------------------------------------------------------------

@pytest.mark.parametrize(("params", "named"), [
    ({"limit": "ten"}, "'limit'"),
    ({"limit": "-1"}, "'limit'"),
    ({"limit": "1.5"}, "'limit'"),
    ({"sort_dir": "up"}, "'sort_dir'"),
    ({"sort_keys": "resource_name"}, "'sort_keys'"),
    ({"marker": "abc"}, "'marker'"),
    ({"marker": "99999999"}, "'marker'"),
    ({"marker": "1" + "0" * 30}, "'marker'"),
])
def test_a_bad_parameter_answers_400_naming_it(client: TestClient, stack: str,
                                               params: dict[str, str], named: str) -> None:
    for url in (f"{stack}/events", f"{stack}/resources/r1/events"):
        body = assert_heat_error(client.get(url, params=params), 400, "HTTPBadRequest")
        assert named in body["error"]["message"], body


def test_a_marker_of_another_stack_answers_400(client: TestClient, rt: Runtime,
                                               stack: str) -> None:
    other = client.get(f"{BASE}/stacks/other", follow_redirects=False).headers["location"]
    theirs = client.get(f"{other}/events").json()["events"][0]["id"]
    body = assert_heat_error(client.get(f"{stack}/events", params={"marker": theirs}), 400,
                             "HTTPBadRequest")
    assert "'marker'" in body["error"]["message"]
    # The long-poll's marker is a position in the log, not necessarily the stack's event.
    r = client.get(f"{stack}/events", params={"marker": "0", "wait": "5", "limit": "3"})
    assert [e["id"] for e in r.json()["events"]] == ids(rows(rt, stack))[:3]
