"""Event list pages through the API: a page of 100 events of a stack of 100,000 events against
one of a stack of 100.

    python benchmarks/event_list.py                          # SQLite, 100 and 100,000 events
    python benchmarks/event_list.py --database postgresql    # a fresh PostgreSQL database
    python benchmarks/event_list.py --sizes 100 1000000 --repeat 500 --explain

A fresh database (a SQLite file in a temporary folder, or a PostgreSQL database created for
the run and dropped after it, on ``CONVERGENCE_BENCH_PG``'s server), migrated; a ``convergence
api`` process on it (embedded: no broker); a stack per size and a neighbour stack, each of one
test resource, created through the API. Then each stack's events are added directly through
the store, in bulk (``Tx.add_events``), the stacks taking turns of 1,000 events so that their
events are interleaved in the table as concurrent stacks' are: 20 resources taking turns, each
through CREATE and UPDATE, one event in 1,000 a failure, and a stack-level event every 1,000. On
PostgreSQL the table is then analysed, as autovacuum would soon do after such a load.

Then each kind of page is asked for ``--repeat`` times of each stack over one keep-alive
connection, the sizes taking turns, and the median latency printed (the whole HTTP request:
the stack's look-up, the page's transaction, the JSON):

- ``first``: ``?limit=100`` (oldest first); ``newest``: ``?limit=100&sort_dir=desc``;
- ``middle``: ``?limit=100&marker=<the event half-way>``, and the same in ``desc`` order;
- ``by name``: ``?limit=100&resource_name=r7&marker=<half-way>``, and the resource-scoped
  ``/resources/r7/events?limit=100`` (one resource's events: ``ix_events_stack_resource``);
- ``by status``: ``?limit=100&resource_status=COMPLETE`` (half the events match) and
  ``resource_status=FAILED`` (one in 1,000: ``ix_events_stack_status``);
- ``by type``: ``?limit=100&sort_keys=resource_type`` (no index serves that order: a sort).

``--explain`` also prints the database's plan of each page's query (``EXPLAIN QUERY PLAN`` on
SQLite, ``EXPLAIN (ANALYZE, BUFFERS)`` on PostgreSQL) on each stack, as the store sends it
(captured from the store's own call in this process). ``--neighbour 1000000`` puts a million
events of another stack after most of the big stack's: the case where PostgreSQL, asked plainly,
walks the primary key past them for the newest page (``store.dialect.led_by``).
"""

from __future__ import annotations

import argparse
import itertools
import pathlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import psycopg2
from sqlalchemy import event, text

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # distributed.py, a sibling script
from distributed import PG_ADMIN, start_api  # noqa: E402

from convergence.ports.pages import EventQuery  # noqa: E402
from convergence.ports.views import NewEvent  # noqa: E402
from convergence.store.db import make_engine  # noqa: E402
from convergence.store.migrate import upgrade  # noqa: E402
from convergence.store.transactions import Store  # noqa: E402

TENANT = "bench"
RESOURCES = 20
TEMPLATE = {"heat_template_version": "2018-08-31",
            "resources": {"r0": {"type": "OS::Heat::TestResource"}}}
PAGE = 100
_STATES = (("CREATE", "IN_PROGRESS"), ("CREATE", "COMPLETE"), ("UPDATE", "IN_PROGRESS"),
           ("UPDATE", "COMPLETE"))


def ledger(n: int, stack_name: str, stack_id: str) -> Iterator[NewEvent]:
    """``n`` events: resources taking turns; one in 1,000 a failure, one in 1,000 the stack's."""
    for i in range(n):
        if i % 1000 == 999:
            yield NewEvent(stack_name, stack_id, "OS::Heat::Stack", "UPDATE", "COMPLETE",
                           "Stack UPDATE completed successfully")
            continue
        name = f"r{i % RESOURCES}"
        action, status = _STATES[(i // RESOURCES) % len(_STATES)]
        if i % 1000 == 420:
            status = "FAILED"
        yield NewEvent(name, f"phys-{name}-{i // 400}", "OS::Heat::TestResource", action,
                       status, "state changed")


def fill(store: Store, stacks: dict[str, tuple[str, int]]) -> None:
    """Each stack (name -> (id, events wanted)) gets its events, in turns of 1,000 events, so
    that the stacks' events are interleaved in the table as concurrent stacks' are."""
    queues = {name: ledger(n, name, sid) for name, (sid, n) in stacks.items()}
    while queues:
        for name in list(queues):
            turn = list(itertools.islice(queues[name], 1000))
            if not turn:
                del queues[name]
                continue
            with store.begin() as tx:
                tx.add_events(stacks[name][0], None, 1, turn)
    if store.engine.dialect.name == "postgresql":
        with store.engine.begin() as conn:
            conn.execute(text("ANALYZE events"))


def event_ids(store: Store, stack_id: str, **where: str) -> list[int]:
    sql = "SELECT id FROM events WHERE stack_id = :s" + "".join(
        f" AND {k} = :{k}" for k in where) + " ORDER BY id"
    with store.engine.connect() as conn:
        return [r[0] for r in conn.execute(text(sql), {"s": stack_id, **where})]


def pages(store: Store, stack_id: str) -> dict[str, tuple[str, dict[str, Any], EventQuery]]:
    """Each kind of page: its path under the stack, its query string, the store's query."""
    every = event_ids(store, stack_id)
    mid = every[len(every) // 2]
    named = event_ids(store, stack_id, resource_name="r7")
    named_mid = named[len(named) // 2]
    return {
        "first": ("/events", {"limit": PAGE}, EventQuery(limit=PAGE)),
        "newest (desc)": ("/events", {"limit": PAGE, "sort_dir": "desc"},
                          EventQuery(limit=PAGE, descending=True)),
        "middle, by marker": ("/events", {"limit": PAGE, "marker": mid},
                              EventQuery(limit=PAGE, marker=mid)),
        "middle, by marker, desc": ("/events", {"limit": PAGE, "marker": mid,
                                                "sort_dir": "desc"},
                                    EventQuery(limit=PAGE, marker=mid, descending=True)),
        "by name, middle": ("/events", {"limit": PAGE, "resource_name": "r7",
                                        "marker": named_mid},
                            EventQuery(limit=PAGE, marker=named_mid, resource_names=("r7",))),
        "resource-scoped": ("/resources/r7/events", {"limit": PAGE},
                            EventQuery(limit=PAGE, resource_names=("r7",))),
        "by status COMPLETE": ("/events", {"limit": PAGE, "resource_status": "COMPLETE"},
                               EventQuery(limit=PAGE, statuses=("COMPLETE",))),
        "by status FAILED (0.1%)": ("/events", {"limit": PAGE, "resource_status": "FAILED"},
                                  EventQuery(limit=PAGE, statuses=("FAILED",))),
        "sorted by type": ("/events", {"limit": PAGE, "sort_keys": "resource_type"},
                           EventQuery(limit=PAGE, by_type=True)),
    }


Target = tuple[str, str, dict[str, Any]]  # the stack's path, the page's path and query


def medians(client: httpx.Client, targets: dict[tuple[str, int], Target],
            repeat: int) -> dict[tuple[str, int], tuple[float, int]]:
    """Per (kind of page, size): the median latency, and how many events the page has (fewer
    than a page on a small stack). Each round asks for every page once, so that what else the
    machine does meanwhile weighs on every figure alike."""
    counts = {}
    for key, (stack, path, params) in targets.items():
        for _ in range(3):  # warm: the first reads after the load fill the caches
            answer = client.get(stack + path, params=params)
            answer.raise_for_status()
        counts[key] = len(answer.json()["events"])
    times: dict[tuple[str, int], list[float]] = {key: [] for key in targets}
    for _ in range(repeat):
        for key, (stack, path, params) in targets.items():
            start = time.perf_counter()
            client.get(stack + path, params=params).raise_for_status()
            times[key].append(time.perf_counter() - start)
    return {key: (statistics.median(times[key]) * 1000, counts[key]) for key in targets}


@contextmanager
def database(kind: str, folder: str) -> Iterator[str]:
    """A fresh database's URL, migrated; a PostgreSQL one is dropped afterwards."""
    if kind == "sqlite":
        url = f"sqlite:///{folder}/events.db"
        upgrade(url)
        yield url
        return
    name = f"convergence_bench_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(PG_ADMIN)
    admin.autocommit = True
    admin.cursor().execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg2://") + \
        f"/{name}"
    try:
        upgrade(url)
        yield url
    finally:
        admin.cursor().execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def measure(kind: str, sizes: list[int], neighbour: int, repeat: int,
            explain: bool) -> dict[str, dict[int, tuple[float, int]]]:
    """Per kind of page, per size: (median ms, events in the page)."""
    with tempfile.TemporaryDirectory() as folder, database(kind, folder) as url:
        server, base = start_api(folder, url, None)
        engine = make_engine(url)
        try:
            with httpx.Client(base_url=base, timeout=60) as client:
                names = {f"s{n}": n for n in sizes} | {"neighbour": neighbour}
                stacks = {name: (create(client, name), n) for name, n in names.items()}
                started = time.perf_counter()
                store = Store(engine)
                fill(store, stacks)
                print(f"{kind}: stacks of {', '.join(f'{n:,}' for n in names.values())} events "
                      f"added in {time.perf_counter() - started:.1f} s", flush=True)
                kinds = {n: pages(store, stacks[f"s{n}"][0]) for n in sizes}
                targets = {(label, n): (f"/v1/{TENANT}/stacks/s{n}/{stacks[f's{n}'][0]}",
                                        path, params)
                           for n in sizes for label, (path, params, _) in kinds[n].items()}
                found = medians(client, targets, repeat)
                figures = {label: {n: found[label, n] for n in sizes} for label in kinds[sizes[0]]}
                for n in sizes if explain else []:
                    for label, (_, _, query) in kinds[n].items():
                        print(f"\nplan of '{label}' ({kind}, the stack of {n:,} events):")
                        for line in plan(store, stacks[f"s{n}"][0], query):
                            print(f"    {line}")
                return figures
        finally:
            engine.dispose()
            server.terminate()
            server.wait(30)


def create(client: httpx.Client, name: str) -> str:
    """A stack of one test resource, created through the API; its id once complete."""
    created = client.post(f"/v1/{TENANT}/stacks", json={"stack_name": name,
                                                         "template": TEMPLATE})
    created.raise_for_status()
    stack_id = str(created.json()["stack"]["id"])
    path = f"/v1/{TENANT}/stacks/{name}/{stack_id}"
    while client.get(path).json()["stack"]["stack_status"] != "CREATE_COMPLETE":
        time.sleep(0.1)
    return stack_id


def plan(store: Store, stack_id: str, query: EventQuery) -> list[str]:
    """The database's plan of the page's query, as the store sends it."""
    sent: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
                executemany: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "ORDER BY" in statement:
            sent.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        with store.read() as tx:
            tx.event_page(stack_id, query)
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)
    statement, parameters = sent[-1]
    postgres = store.engine.dialect.name == "postgresql"
    prefix = "EXPLAIN (ANALYZE, BUFFERS) " if postgres else "EXPLAIN QUERY PLAN "
    raw = store.engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(prefix + statement, parameters)
        rows = cursor.fetchall()
    finally:
        raw.close()
    return [str(r[0]) for r in rows] if postgres else [str(r[-1]) for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 100_000])
    parser.add_argument("--neighbour", type=int, default=100_000,
                        help="events of another stack, interleaved with theirs")
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    sizes = sorted(set(args.sizes))
    figures = measure(args.database, sizes, args.neighbour, args.repeat, args.explain)
    print(f"\nmedian latency of a page of at most {PAGE} events, ms (events in the page); "
          f"{args.database}, {args.repeat} requests each")
    print(f"  {'page':<26}" + "".join(f"{f'{n:,} events':>20}" for n in sizes))
    for label, by_size in figures.items():
        cells = (f"{by_size[n][0]:.2f} ({by_size[n][1]})" for n in sizes)
        print(f"  {label:<26}" + "".join(f"{c:>20}" for c in cells))


if __name__ == "__main__":
    main()
