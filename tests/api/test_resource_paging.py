"""Heat's resource list paged in the database (``Tx.resource_page``, read from
the request and answered chunk by chunk by ``convergence.api.resource_list``), on SQLite and on
PostgreSQL; and a listing whose client went away, stopping, through a real server.

A stack is created through the API (resources that require each other), then given records of
its own through the store: several types, statuses and physical ids (none, empty), a resource
being replaced (two versions, the old one still required by another resource), one whose
versions are all replaced, and a replaced version that requires another. Every answer is
compared with Heat's list worked out here the obvious way from the ``resources`` rows (one
version per name, every filter on it, ``required_by`` from every record's ``requires``): the
answers the list gave before it was paged.
"""

from __future__ import annotations

import os
import socket
import struct
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import sqlalchemy as sa
from alembic import command
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.errors import InvalidParameter
from convergence.heat_fields import iso
from convergence.ports.views import RecordChange, RecordView
from convergence.runtime import Runtime, open_runtime
from convergence.services import queries
from convergence.settings import Settings
from convergence.store.db import make_engine
from convergence.store.migrate import upgrade
from convergence.store.transactions import Store
from tests.api.test_stacks_api import BASE, assert_heat_error, drain
from tests.api_process import running_api
from tests.conftest_services import (
    TEST_ENCRYPTION_KEYS,
    drop_postgres_database,
    fresh_database_url,
    postgres_url,
)

Item = dict[str, Any]

TEMPLATE: dict[str, Any] = {
    "heat_template_version": "2018-08-31",
    "resources": {
        "net": {"type": "OS::Heat::TestResource", "properties": {"value": "n"}},
        "subnet": {"type": "OS::Heat::TestResource", "depends_on": ["net"]},
        "port1": {"type": "OS::Heat::TestResource", "depends_on": ["subnet"]},
        "port2": {"type": "OS::Heat::TestResource", "depends_on": ["subnet"]},
        "server": {"type": "OS::Heat::TestResource", "depends_on": ["port1", "port2"]},
        "vol": {"type": "OS::Heat::TestResource"},
    },
}


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    """A PostgreSQL database of this test process's own (two runs at once never share it)."""
    name = f"convergence_test_resource_paging_{os.getpid()}"
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


def _extras() -> list[tuple[str, str, str, str, str | None]]:
    """Records added through the store: (name, type, action, status, physical id)."""
    actions = ("CREATE", "UPDATE", "CHECK")
    statuses = ("COMPLETE", "FAILED", "IN_PROGRESS", "COMPLETE")
    physical: list[str | None] = [None, "", "phys-shared"]
    return [(f"x{i:02d}", "Test::A" if i % 3 else "Test::B", actions[i % 3],
             statuses[i % 4], physical[i % 5] if i % 5 < 3 else f"phys-x{i}")
            for i in range(14)]


@pytest.fixture
def stack(client: TestClient, rt: Runtime) -> str:
    """The stack ``web``'s URL; its records as the module docstring tells."""
    r = client.post(f"{BASE}/stacks", json={"stack_name": "web", "template": TEMPLATE})
    assert r.status_code == 201, r.text
    sid = str(r.json()["stack"]["id"])
    drain(rt, sid)
    with rt.store.begin() as tx:
        heads = {r.name: r for r in tx.records(sid)}
        extras = _extras()
        ids = tx.insert_records(sid, [(name, rtype) for name, rtype, *_ in extras])
        changes = []
        for i, (name, _, action, status, physical) in enumerate(extras):
            requires = [heads["net"].id] if i % 4 == 0 else []
            if i >= 2 and i % 2:
                requires.append(ids[extras[i - 2][0]])
            changes.append(RecordChange(ids[name], 0, {
                "action": action, "status": status, "physical_id": physical,
                "status_reason": f"reason {i}", "requires": requires,
                "attributes": {"output": f"out-{i}", "index": i}}))
        tx.apply_many(changes)
        # port1 is being replaced: the old version stays required by server.
        tx.insert_replacement(heads["port1"], heads["port1"].fencing_token, "Test::New")
        # vol's versions are all replaced: the newest of them is listed.
        second = tx.insert_replacement(heads["vol"], heads["vol"].fencing_token, "Test::New")
        assert second is not None
        newest = tx.records_by_id([second])[second]
        third = tx.insert_replacement(newest, newest.fencing_token, "Test::Gone")
        assert third is not None
        assert tx.apply(RecordChange(third, 0, {}, delete=True))
        # A replaced version's own requires count: x03 (replaced) requires vol's first.
        x03 = tx.records_by_id([ids["x03"]])[ids["x03"]]
        assert tx.apply(RecordChange(x03.id, 0, {"requires": [heads["vol"].id, ids["x01"]]}))
        tx.insert_replacement(tx.records_by_id([x03.id])[x03.id], 0, "Test::B")
    return f"{BASE}/stacks/web/{sid}"


# Heat's list, the obvious way --------------------------------------------------------------------

def records(rt: Runtime, url: str) -> list[RecordView]:
    return queries.list_resources(rt, "tenantA", url.rsplit("/", 1)[1])


def current(every: Sequence[RecordView]) -> list[RecordView]:
    """One version per name (unreplaced before replaced, then the newest), by name."""
    best: dict[str, RecordView] = {}
    for r in every:
        held = best.get(r.name)
        if held is None or (r.replaced_by is None, r.id) > (held.replaced_by is None, held.id):
            best[r.name] = r
    return [best[n] for n in sorted(best)]


def matches(r: RecordView, params: Mapping[str, Any]) -> bool:
    def given(key: str) -> set[str]:
        value = params.get(key, [])
        return {value} if isinstance(value, str) else set(value)

    fields = {"type": {r.type}, "status": {r.status, f"{r.action}_{r.status}"},
              "name": {r.name}, "action": {r.action}, "id": {r.name},
              "physical_resource_id": {r.physical_id or ""}}
    return all(not given(k) or fields[k] & given(k) for k in fields)


def expected(rt: Runtime, url: str, params: Mapping[str, Any] | None = None, *,
             detail: bool = False) -> list[Item]:
    """Heat's answer: each listed resource, every field."""
    every = records(rt, url)
    stack_href = f"http://testserver{url}"
    out = []
    for r in current(every):
        if not matches(r, params or {}):
            continue
        item: Item = {
            "resource_name": r.name, "logical_resource_id": r.name,
            "physical_resource_id": r.physical_id or "", "resource_type": r.type,
            "resource_status": f"{r.action}_{r.status}",
            "resource_status_reason": r.status_reason,
            "required_by": sorted({o.name for o in every if r.id in o.requires}),
            "creation_time": iso(r.created_at), "updated_time": iso(r.updated_at),
            "links": [{"href": f"{stack_href}/resources/{quote(r.name, safe='')}",
                       "rel": "self"}, {"href": stack_href, "rel": "stack"}],
            "generation": r.generation}
        if detail:
            item.update(description="", attributes=dict(r.attributes))
        out.append(item)
    return out


def listed(client: TestClient, url: str, **params: Any) -> list[Item]:
    r = client.get(f"{url}/resources", params=params)
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"resources"}
    return list(r.json()["resources"])


def names(items: Sequence[Item]) -> list[str]:
    return [i["resource_name"] for i in items]


def walk(client: TestClient, url: str, **params: Any) -> list[Item]:
    """Every page from the first on, each after the last resource of the one before."""
    seen: list[Item] = []
    while True:
        query = {**params, **({"marker": seen[-1]["resource_name"]} if seen else {})}
        page = listed(client, url, **query)
        assert len(page) <= int(params["limit"])
        if not page:
            return seen
        seen.extend(page)
        assert len(seen) <= 1000, "the walk does not end"


# The whole list ----------------------------------------------------------------------------------

def test_the_stack_has_what_the_tests_need(rt: Runtime, stack: str) -> None:
    every = records(rt, stack)
    shown = current(every)
    assert len(every) > len(shown)  # versions
    by_name = {r.name: r for r in shown}
    assert by_name["port1"].type == "Test::New"  # the new version, not yet converged
    assert by_name["vol"].replaced_by is not None  # every version replaced
    assert by_name["net"].type == "OS::Heat::TestResource"
    assert any(r.replaced_by is not None and r.requires for r in every)


@pytest.mark.parametrize("detail", [False, True])
def test_the_list_is_heats_answer(client: TestClient, rt: Runtime, stack: str,
                                  detail: bool) -> None:
    params = {"with_detail": "true"} if detail else {}
    answer = listed(client, stack, **params)
    assert answer == expected(rt, stack, detail=detail)
    by_name = {i["resource_name"]: i for i in answer}
    assert by_name["net"]["required_by"] == ["subnet", "x00", "x04", "x08", "x12"]
    assert by_name["subnet"]["required_by"] == ["port1", "port2"]
    assert by_name["port1"]["required_by"] == []  # server requires the version replaced
    assert by_name["vol"]["resource_type"] == "Test::New"
    assert by_name["x01"]["required_by"] == ["x03"]  # x03's replaced version


@pytest.mark.parametrize("depth", ["0", "1", "5"])
def test_nested_depth_lists_the_stacks_own_resources(client: TestClient, rt: Runtime,
                                                     stack: str, depth: str) -> None:
    assert listed(client, stack, nested_depth=depth) == expected(rt, stack)


_FILTERS: list[dict[str, Any]] = [
    {"name": "x03"},
    {"name": ["x03", "net", "nope"]},
    {"id": "subnet"},
    {"name": ["x01", "x02"], "id": ["x02", "x05"]},
    {"name": "x01", "id": "x02"},
    {"type": "Test::B"},
    {"type": ["Test::New", "OS::Heat::TestResource"]},
    {"status": "FAILED"},
    {"status": "COMPLETE"},
    {"status": "CREATE_COMPLETE"},
    {"status": ["UPDATE_IN_PROGRESS", "FAILED"]},
    {"status": "INIT_COMPLETE"},
    {"action": "CHECK"},
    {"physical_resource_id": "phys-shared"},
    {"physical_resource_id": ""},
    {"physical_resource_id": ["phys-x3", "phys-x4"]},
    {"name": ""},
    {"type": "Test::A", "status": "COMPLETE", "action": "UPDATE"},
    {"status": "NOPE"},
]


@pytest.mark.parametrize("params", _FILTERS, ids=[str(p) for p in _FILTERS])
def test_filters_answer_heats_answer(client: TestClient, rt: Runtime, stack: str,
                                     params: dict[str, Any]) -> None:
    assert listed(client, stack, **params) == expected(rt, stack, params)


@pytest.mark.parametrize("params", _FILTERS, ids=[str(p) for p in _FILTERS])
def test_filters_hold_on_every_page(client: TestClient, rt: Runtime, stack: str,
                                    params: dict[str, Any]) -> None:
    wanted = expected(rt, stack, params)
    assert walk(client, stack, limit=2, **params) == wanted
    assert walk(client, stack, limit=2, sort_dir="desc", **params) == wanted[::-1]


def test_the_filters_have_matches_to_find(rt: Runtime, stack: str) -> None:
    for params in _FILTERS:
        if params not in ({"status": "NOPE"}, {"name": ""}, {"name": "x01", "id": "x02"}):
            assert expected(rt, stack, params), params


# Paging ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("limit", [1, 3, 100])
def test_paging_walks_every_resource_once_both_ways(client: TestClient, rt: Runtime,
                                                    stack: str, limit: int) -> None:
    every = expected(rt, stack, detail=True)
    assert walk(client, stack, limit=limit, with_detail="yes") == every
    assert walk(client, stack, limit=limit, with_detail="1", sort_dir="DESC") == every[::-1]
    assert walk(client, stack, limit=limit, with_detail="on",
                sort_keys="resource_name") == every


def test_limit_and_marker(client: TestClient, rt: Runtime, stack: str) -> None:
    every = names(expected(rt, stack))
    assert names(listed(client, stack, limit=0)) == []
    assert names(listed(client, stack, limit="1" + "0" * 30)) == every
    assert names(listed(client, stack, marker="x05")) == every[every.index("x05") + 1:]
    assert names(listed(client, stack, marker="x05", sort_dir="desc")) == \
        every[:every.index("x05")][::-1]
    # In name order the marker is a position: a name the stack does not have places the page.
    assert names(listed(client, stack, marker="w", limit=2)) == ["x00", "x01"]
    assert names(listed(client, stack, marker="w", sort_dir="desc", limit=1)) == ["vol"]


def test_a_page_continues_after_a_resource_deleted_since(client: TestClient, rt: Runtime,
                                                         stack: str) -> None:
    every = names(expected(rt, stack))
    first = names(listed(client, stack, limit=4))
    gone = {r.name: r for r in current(records(rt, stack))}[first[-1]]
    with rt.store.begin() as tx:
        assert tx.apply(RecordChange(gone.id, gone.fencing_token, {}, delete=True))
    assert names(listed(client, stack, limit=100, marker=first[-1])) == every[4:]


_ORDERS: list[tuple[dict[str, Any], Any]] = [
    ({"sort_keys": "resource_type"}, lambda i: (i["resource_type"], i["resource_name"])),
    ({"sort_keys": "type"}, lambda i: (i["resource_type"], i["resource_name"])),
    ({"sort_keys": ["resource_status", "resource_type"]},
     lambda i: (i["resource_status"], i["resource_type"], i["resource_name"])),
    ({"sort_keys": "creation_time"}, lambda i: (i["_created"], i["resource_name"])),
    ({"sort_keys": "updated_at"}, lambda i: (i["_updated"], i["resource_name"])),
    ({"sort_keys": "physical_resource_id"},
     lambda i: (i["physical_resource_id"], i["resource_name"])),
    ({"sort_keys": ["name", "resource_type"]}, lambda i: i["resource_name"]),
]


@pytest.mark.parametrize(("params", "key"), _ORDERS, ids=[str(p) for p, _ in _ORDERS])
def test_sort_keys_order_the_pages(client: TestClient, rt: Runtime, stack: str,
                                   params: dict[str, Any], key: Any) -> None:
    times = {r.name: (r.created_at, r.updated_at) for r in current(records(rt, stack))}
    every = expected(rt, stack)
    for item in every:
        item["_created"], item["_updated"] = times[item["resource_name"]]
    ordered = names(sorted(every, key=key))
    assert names(listed(client, stack, **params)) == ordered
    assert names(walk(client, stack, limit=3, **params)) == ordered
    assert names(walk(client, stack, limit=3, sort_dir="desc", **params)) == ordered[::-1]
    failed = [i["resource_name"] for i in sorted(every, key=key)
              if i["resource_status"].endswith("FAILED")]
    assert names(walk(client, stack, limit=1, status="FAILED", **params)) == failed


def test_outside_name_order_the_marker_must_be_a_resource(client: TestClient,
                                                          stack: str) -> None:
    r = client.get(f"{stack}/resources", params={"sort_keys": "resource_type", "marker": "w"})
    body = assert_heat_error(r, 400, "HTTPBadRequest")
    assert "'marker'" in body["error"]["message"]
    r = client.get(f"{stack}/resources", params={"sort_keys": "resource_type",
                                                 "marker": "x01", "limit": 1})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(("params", "named"), [
    ({"bogus": "1"}, "bogus"),
    ({"limit": "ten"}, "'limit'"),
    ({"limit": "-1"}, "'limit'"),
    ({"limit": "1.5"}, "'limit'"),
    ({"nested_depth": "-1"}, "'nested_depth'"),
    ({"nested_depth": "deep"}, "'nested_depth'"),
    ({"with_detail": "maybe"}, "'with_detail'"),
    ({"sort_dir": "up"}, "'sort_dir'"),
    ({"sort_keys": "resource_status_reason"}, "'sort_keys'"),
])
def test_a_bad_parameter_answers_400_naming_it(client: TestClient, stack: str,
                                               params: dict[str, str], named: str) -> None:
    body = assert_heat_error(client.get(f"{stack}/resources", params=params), 400,
                             "HTTPBadRequest")
    assert named in body["error"]["message"], body


# One resource ------------------------------------------------------------------------------------

def test_show_answers_the_listed_resource_in_detail(client: TestClient, rt: Runtime,
                                                    stack: str) -> None:
    for item in expected(rt, stack, detail=True):
        r = client.get(f"{stack}/resources/{item['resource_name']}")
        assert r.status_code == 200, r.text
        assert r.json() == {"resource": item}
    shown = client.get(f"{stack}/resources/x02", params={"with_attr": ["index", "nope"]})
    assert shown.json()["resource"]["attributes"] == {"output": "out-2", "index": 2,
                                                      "nope": None}
    assert_heat_error(client.get(f"{stack}/resources/nope"), 404, "EntityNotFound")


# Chunks ------------------------------------------------------------------------------------------
# (The listing's own modules are imported by the tests that use them, so that the tests above
# also run, and pass, against the list as it was before it was paged.)

@pytest.mark.parametrize("params", [{}, {"with_detail": "true"}, {"limit": 7},
                                    {"limit": 9, "marker": "port2"}, {"sort_dir": "desc"},
                                    {"status": "COMPLETE"}, {"sort_keys": "resource_type"}])
def test_a_list_longer_than_a_chunk_is_answered_whole(
        client: TestClient, rt: Runtime, stack: str, monkeypatch: pytest.MonkeyPatch,
        params: dict[str, Any]) -> None:
    from convergence.api import resource_list

    whole = listed(client, stack, **params)
    assert len(whole) > 3
    monkeypatch.setattr(resource_list, "CHUNK", 3)
    r = client.get(f"{stack}/resources", params=params)
    assert r.status_code == 200 and "content-length" not in r.headers  # streamed
    assert r.json() == {"resources": whole}


def test_chunks_list_every_resource_once_with_its_required_by(rt: Runtime, stack: str) -> None:
    from convergence.ports.pages import ResourceQuery

    sid = stack.rsplit("/", 1)[1]
    pages = list(queries.resource_chunks(rt, "tenantA", sid, ResourceQuery(), chunk=4))
    assert [len(p.records) for p in pages][:-1] == [4] * (len(pages) - 1)
    listed = [(r.name, p.users(r)) for p in pages for r in p.records]
    assert listed == [(i["resource_name"], i["required_by"]) for i in expected(rt, stack)]
    limited = queries.resource_chunks(rt, "tenantA", sid, ResourceQuery(limit=9), chunk=4)
    assert [len(p.records) for p in limited] == [4, 4, 1]


def test_chunks_continue_after_a_resource_deleted_between_them(rt: Runtime,
                                                               stack: str) -> None:
    from convergence.ports.pages import ResourceQuery

    sid = stack.rsplit("/", 1)[1]
    for order in ((), ("type",)):
        query = ResourceQuery(sort_keys=order)
        pages = queries.resource_chunks(rt, "tenantA", sid, query, chunk=3)
        first = next(pages)
        gone = first.records[-1]
        wanted = [r.name for p in queries.resource_chunks(rt, "tenantA", sid, query)
                  for r in p.records]
        with rt.store.begin() as tx:
            assert tx.apply(RecordChange(gone.id, gone.fencing_token, {}, delete=True))
        rest = [r.name for p in pages for r in p.records]
        assert [r.name for r in first.records] + rest == wanted


def test_a_marker_outside_name_order_that_is_no_resource_is_refused(rt: Runtime,
                                                                   stack: str) -> None:
    from convergence.ports.pages import ResourceQuery

    sid = stack.rsplit("/", 1)[1]
    with pytest.raises(InvalidParameter):
        queries.resource_page(rt, "tenantA", sid,
                               ResourceQuery(sort_keys=("type",), marker="nope"))
    with pytest.raises(InvalidParameter):
        next(queries.resource_chunks(rt, "tenantA", sid,
                                      ResourceQuery(sort_keys=("type",), marker="nope")))


# Where required_by comes from --------------------------------------------------------------------

def requirement_rows(rt: Runtime) -> set[tuple[int, int]]:
    with rt.store.engine.connect() as conn:
        found = conn.execute(sa.text("SELECT record_id, required_id FROM resource_requirements"))
        return {(r.record_id, r.required_id) for r in found}


def requires_as_rows(rt: Runtime) -> set[tuple[int, int]]:
    with rt.store.read() as tx:
        every = [r for s in tx.stacks("tenantA", include_deleted=True) for r in tx.records(s.id)]
    return {(r.id, rid) for r in every for rid in r.requires}


def test_sqlite_keeps_every_records_requires_as_rows(rt: Runtime, stack: str) -> None:
    """On SQLite, ``resource_requirements`` follows the records through every write the
    engine and the store made (inserts, results, replacements, deletions); on PostgreSQL it
    stays empty (its GIN index serves instead)."""
    if rt.store.engine.dialect.name != "sqlite":
        assert requirement_rows(rt) == set()
        return
    assert requirement_rows(rt) == requires_as_rows(rt)
    assert requires_as_rows(rt)
    every = current(records(rt, stack))
    with rt.store.begin() as tx:  # a list rewritten, the same list written again, a deletion
        tx.apply(RecordChange(every[0].id, every[0].fencing_token,
                              {"requires": [every[1].id, every[2].id]}))
        tx.apply(RecordChange(every[3].id, every[3].fencing_token,
                              {"requires": list(every[3].requires)}))
        tx.apply(RecordChange(every[4].id, every[4].fencing_token, {}, delete=True))
    assert requirement_rows(rt) == requires_as_rows(rt)


def test_an_upgrade_makes_the_rows_of_the_records_there_are(tmp_path: Path) -> None:
    from convergence.store.migrate import alembic_config, migration_connection

    url = f"sqlite:///{tmp_path / 'old.db'}"
    rt = open_runtime(Settings(database_url=url))
    try:
        with rt.store.begin() as tx:
            tx.insert_stack("s1", "tenantA", "old", timeout_mins=None, disable_rollback=True)
            ids = tx.insert_records("s1", [("a", "T"), ("b", "T"), ("c", "T")])
            tx.apply_many([RecordChange(ids["b"], 0, {"requires": [ids["a"]]}),
                           RecordChange(ids["c"], 0, {"requires": [ids["a"], ids["b"]]})])
        config = alembic_config()
        with migration_connection(rt.store.engine) as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0010")  # as a database made before the table was
        upgrade(rt.store.engine)
        assert requirement_rows(rt) == requires_as_rows(rt) == {
            (ids["b"], ids["a"]), (ids["c"], ids["a"]), (ids["c"], ids["b"])}
    finally:
        rt.store.engine.dispose()


# A client that goes away -------------------------------------------------------------------------

BIG = 20_000


def _big_stack(url: str) -> str:
    """A stack of BIG resources, each requiring the one before, written through the store."""
    upgrade(url)
    engine = make_engine(url)
    try:
        store = Store(engine)
        sid = str(uuid.uuid4())
        with store.begin() as tx:
            tx.insert_stack(sid, "tenantA", "big", timeout_mins=None, disable_rollback=True)
            names = [f"r{i:05d}" for i in range(BIG)]
            ids = tx.insert_records(sid, [(name, "Test::A") for name in names])
            tx.apply_many([RecordChange(ids[name], 0, {
                "action": "CREATE", "status": "COMPLETE", "physical_id": f"phys-{name}",
                "requires": [ids[names[i - 1]]] if i else []})
                for i, name in enumerate(names)])
        return sid
    finally:
        engine.dispose()


def _metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_a_list_whose_client_went_away_stops_reading(tmp_path: Path) -> None:
    """A client asks a real server for the whole list of a big stack, reads the start of the
    answer and goes away (its connection reset). The server counts the listing abandoned, and
    it had read a small part of the stack's records by then: it read no more."""
    sid = _big_stack(f"sqlite:///{tmp_path / 'api.db'}")
    with running_api(tmp_path) as base:
        address = httpx.URL(base)
        path = f"{BASE}/stacks/big/{sid}/resources"
        with socket.create_connection((address.host, address.port), timeout=120) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {address.host}\r\n\r\n".encode())
            start = b""
            while b'{"resources":[' not in start:
                got = s.recv(65536)
                assert got, start
                start += got
            assert start.startswith(b"HTTP/1.1 200 ")
            # Close with a reset, as a client that was killed does.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        deadline = time.monotonic() + 120
        while True:
            metrics = httpx.get(f"{base}/metrics").text
            abandoned = _metric(metrics, "convergence_resource_list_abandoned_total")
            assert abandoned is not None, "the server does not count abandoned lists"
            if abandoned >= 1:
                break
            assert time.monotonic() < deadline, "the list was never abandoned"
            time.sleep(0.1)
        read = _metric(metrics, "convergence_resource_list_records_total")
        assert read is not None and read < BIG / 4, read
        # The server answers the next request as usual.
        page = httpx.get(f"{base}{path}", params={"limit": 3, "marker": "r00100"}).json()
        assert [i["resource_name"] for i in page["resources"]] == ["r00101", "r00102",
                                                                   "r00103"]
        assert page["resources"][0]["required_by"] == ["r00102"]
