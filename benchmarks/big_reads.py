"""Reads of one stack of up to 1,000,000 resources through the API: each answer's latency.

    python benchmarks/big_reads.py                        # 10K, 100K and 1M; SQLite, PostgreSQL
    python benchmarks/big_reads.py --sizes 10000 --databases sqlite
    python benchmarks/big_reads.py --sizes 1000000 --explain        # and each read's plans
    python benchmarks/big_reads.py --verify               # seeded rows are the engine's rows

For each database and size: a fresh database (a SQLite file in a temporary folder, or a
PostgreSQL database made for the run on ``CONVERGENCE_BENCH_PG``'s server and dropped after
it), migrated; ten stacks of five resources created through the use cases, then the big stack
``big``, then ten more small ones (so that the big stack's rows have neighbours on both sides,
and the stack list has 21 stacks). The big stack is ``OS::Heat::Value`` resources ``r0`` ...
and three outputs (one resource's attribute, another's id, a literal).

- Up to ``--real-up-to`` resources (100,000) the big stack is created the real way: the use
  case, then the embedded engine runs the traversal (``services.stacks.create_stack`` and
  ``services.running.wait_for_stack``, as ``benchmarks/engine_scale.py`` does).
- Above, the engine would take many minutes on a small machine, so the rows it would write are
  seeded in bulk through the store (``Tx`` for the stack, template, traversal and the stack's
  events; ``store.dialect.bulk_insert``, COPY on PostgreSQL, for the records, the plan's nodes
  and two events per resource): the records COMPLETE with their properties, attributes and
  physical ids, CREATE_IN_PROGRESS and CREATE_COMPLETE events per resource, every node DONE,
  the traversal COMPLETE, the stack CREATE_COMPLETE with its outputs. ``--verify`` creates a
  small stack both ways and compares every row (ids, times and uuids aside).

On PostgreSQL the database is then vacuumed and analysed, as autovacuum does after such a
load. Then a ``convergence api`` process is started on the database (embedded: it sweeps too)
and each read is asked for once (its first answer, the process cold: ``first``), then
``--repeat`` times (20), the reads taking turns, over one keep-alive connection with httpx;
the median and the slowest are printed per read, size and database, in milliseconds.

``--explain`` prints the plan of every SELECT each read sends (the same use cases called in
this process, their statements captured): ``EXPLAIN QUERY PLAN`` on SQLite, ``EXPLAIN
(ANALYZE, BUFFERS)`` on PostgreSQL. ``--py-spy DIR`` records the API process with py-spy
while the reads run (a speedscope profile per database and size).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import psycopg2

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # distributed.py, a sibling script
from distributed import PG_ADMIN, encryption_keys, start_api  # noqa: E402

TENANT = "bench"
BIG = "big"
PAGE = 100
NEIGHBOURS = 10  # small stacks before the big one, and as many after it
CHUNK = 20_000  # seeded records per transaction


def template(n: int) -> dict[str, Any]:
    resources = {f"r{i}": {"type": "OS::Heat::Value", "properties": {"value": f"v{i}"}}
                 for i in range(n)}
    return {"heat_template_version": "2018-08-31", "description": f"{n} values",
            "resources": resources,
            "outputs": {"first_value": {"description": "the first resource's value",
                                        "value": {"get_attr": ["r0", "value"]}},
                        "last_id": {"description": "the last resource's id",
                                    "value": {"get_resource": f"r{n - 1}"}},
                        "size": {"value": n}}}


# Making the rows --------------------------------------------------------------------------------

def populate(url: str, n: int, how: str) -> dict[str, Any]:
    """The neighbours and the big stack, in this process; the big stack's id and how long it
    took to make."""
    from convergence.runtime import open_runtime
    from convergence.services import running, stacks
    from convergence.settings import Settings

    settings = Settings(database_url=url, max_template_bytes=1 << 30,
                        max_request_bytes=1 << 30, encryption_keys=encryption_keys())
    rt = open_runtime(settings, migrate=False)

    def small(name: str) -> None:
        made = stacks.create_stack(rt, TENANT, name, json.dumps(template(5)))
        running.wait_for_stack(rt, TENANT, made.id)

    try:
        for i in range(NEIGHBOURS):
            small(f"n{i}")
        started = time.perf_counter()
        if how == "real":
            made = stacks.create_stack(rt, TENANT, BIG, json.dumps(template(n)))
            stack_id = running.wait_for_stack(rt, TENANT, made.id).id
        else:
            stack_id = seed(rt.store, n)
        seconds = time.perf_counter() - started
        for i in range(NEIGHBOURS, 2 * NEIGHBOURS):
            small(f"n{i}")
    finally:
        rt.store.engine.dispose()
    return {"stack_id": stack_id, "seconds": seconds}


def seed(store: Any, n: int) -> str:
    """The rows the engine writes for a created stack of ``template(n)``, written in bulk."""
    from sqlalchemy import text, update

    from convergence.plugins.heat.none import owner_uuid
    from convergence.ports.views import NewEvent, TemplateContent
    from convergence.store import dialect
    from convergence.store.rows import T_EVENT, T_NODE, T_RES, T_TRAV

    body = template(n)
    content = TemplateContent(json.dumps(body), {}, (), {})
    stack_id = str(uuid.uuid4())
    with store.begin() as tx:
        # As the use case stores it (``services.templates.store_template``): the template
        # has no parameters, so a show has none to give.
        tid = tx.put_template(content, description=body["description"], shown_parameters={})
        tx.insert_stack(stack_id, TENANT, BIG, timeout_mins=None, disable_rollback=False)
        trav = tx.insert_traversal(stack_id, 1, "CREATE", tid, None)
        tx.update_stack(stack_id, generation=1, traversal_id=trav, template_id=tid,
                        action="CREATE", status="IN_PROGRESS", status_reason="Stack CREATE started")
        tx.add_events(stack_id, trav, 1, [NewEvent(BIG, stack_id, "OS::Heat::Stack", "CREATE",
                                                   "IN_PROGRESS", "Stack CREATE started")])
        postgres = dialect.is_postgres(tx.conn)
        if postgres:
            first = tx.conn.execute(text(
                "SELECT nextval(pg_get_serial_sequence('resources', 'id'))")).scalar_one()
        else:
            first = (tx.conn.execute(text("SELECT max(id) FROM resources")).scalar() or 0) + 1
        now = tx.now
    physical = {i: owner_uuid(f"{stack_id}/{first + i}") for i in range(n)}
    for start in range(0, n, CHUNK):
        part = range(start, min(start + CHUNK, n))
        with store.begin() as tx:
            _records(tx.conn, dialect, T_RES, stack_id, tid, first, part, physical, now)
            _nodes(tx.conn, dialect, T_NODE, trav, first, part, now)
            _events(tx.conn, dialect, T_EVENT, stack_id, trav, part, physical, now)
    with store.begin() as tx:
        if postgres:
            tx.conn.execute(text("SELECT setval(pg_get_serial_sequence('resources', 'id'), "
                                 ":last)"), {"last": first + n - 1})
        tx.conn.execute(update(T_TRAV).where(T_TRAV.c.id == trav).values(
            state="COMPLETE", nodes_total=n, nodes_remaining=0, finished_at=tx.now,
            progressed_at=tx.now))
        outputs = {"first_value": {"value": "v0", "description": "the first resource's value"},
                   "last_id": {"value": physical[n - 1], "description": "the last resource's id"},
                   "size": {"value": n, "description": ""}}
        reason = "Stack CREATE completed successfully"
        tx.update_stack(stack_id, observed_generation=1, rollback_template_id=tid,
                        status="COMPLETE", status_reason=reason, outputs=outputs)
        tx.add_events(stack_id, trav, 1, [NewEvent(BIG, stack_id, "OS::Heat::Stack", "CREATE",
                                                   "COMPLETE", reason)])
    return stack_id


def _records(conn: Any, dialect: Any, table: Any, stack_id: str, tid: str, first: int,
             part: range, physical: dict[int, str], now: float) -> None:
    columns = ("id", "stack_id", "name", "type", "physical_id", "action", "status",
               "status_reason", "template_id", "generation", "requires", "properties",
               "attributes", "reference_id", "operation", "fencing_token", "created_at",
               "updated_at", "deletion_policy")

    def row(i: int) -> dict[str, Any]:
        return dict(zip(columns, (
            first + i, stack_id, f"r{i}", "OS::Heat::Value", physical[i], "CREATE", "COMPLETE",
            "", tid, 1, [], {"value": f"v{i}"}, {"value": f"v{i}"}, physical[i], None, 1, now,
            now, "Delete"), strict=True))

    def line(i: int) -> str:
        value = json.dumps({"value": f"v{i}"})
        return "\t".join((str(first + i), stack_id, f"r{i}", "OS::Heat::Value", physical[i],
                          "CREATE", "COMPLETE", "", tid, "1", "[]", value, value, physical[i],
                          "null", "1", repr(now), repr(now), "Delete"))

    dialect.bulk_insert(conn, table, list(part), columns, row=row, line=line)


def _nodes(conn: Any, dialect: Any, table: Any, trav: str, first: int, part: range,
           now: float) -> None:
    columns = ("traversal_id", "seq", "record_id", "name", "phase", "pending", "state",
               "successors", "updated_at")

    def row(i: int) -> dict[str, Any]:
        return dict(zip(columns, (trav, i, first + i, f"r{i}", "converge", 0, "DONE", [], now),
                        strict=True))

    def line(i: int) -> str:
        return "\t".join((trav, str(i), str(first + i), f"r{i}", "converge", "0", "DONE", "[]",
                          repr(now)))

    dialect.bulk_insert(conn, table, list(part), columns, row=row, line=line)


def _events(conn: Any, dialect: Any, table: Any, stack_id: str, trav: str, part: range,
            physical: dict[int, str], now: float) -> None:
    columns = ("stack_id", "traversal_id", "generation", "resource_name",
               "physical_resource_id", "resource_type", "action", "status", "reason",
               "created_at")
    items = [(i, status) for i in part for status in ("IN_PROGRESS", "COMPLETE")]

    def row(item: tuple[int, str]) -> dict[str, Any]:
        i, status = item
        return dict(zip(columns, (stack_id, trav, 1, f"r{i}", physical[i], "OS::Heat::Value",
                                  "CREATE", status, "state changed", now), strict=True))

    def line(item: tuple[int, str]) -> str:
        i, status = item
        return "\t".join((stack_id, trav, "1", f"r{i}", physical[i], "OS::Heat::Value",
                          "CREATE", status, "state changed", repr(now)))

    dialect.bulk_insert(conn, table, items, columns, row=row, line=line)


# Databases ----------------------------------------------------------------------------------------

@contextmanager
def database(kind: str, folder: str) -> Iterator[str]:
    """A fresh database's URL, migrated; a PostgreSQL one is dropped afterwards."""
    from convergence.store.migrate import upgrade

    if kind == "sqlite":
        url = f"sqlite:///{folder}/big.db"
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


def make_rows(url: str, n: int, how: str) -> dict[str, Any]:
    """``populate`` in a child process (the engine's caches and the big template leave with
    it); on PostgreSQL, then a vacuum and analyse."""
    out = subprocess.run([sys.executable, __file__, "--child", url, str(n), how], check=True,
                         capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()}).stdout
    made: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    if url.startswith("postgresql"):
        raw = psycopg2.connect(url.replace("postgresql+psycopg2://", "postgresql://"))
        raw.autocommit = True
        raw.cursor().execute("VACUUM ANALYZE")
        raw.close()
    return made


# Reading ----------------------------------------------------------------------------------------

def reads(url: str, stack_id: str, n: int) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each read: its path and query. The markers are read from the database, so that each
    read's first answer through the API is its first."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        def one(sql: str, **values: Any) -> Any:
            return conn.execute(text(sql), {"s": stack_id, **values}).scalar_one()

        next_event = one("SELECT id FROM events WHERE stack_id = :s ORDER BY id "
                         "LIMIT 1 OFFSET :o", o=PAGE - 1)
        middle = f"r{n // 2}"
        mid_event = one("SELECT min(id) FROM events WHERE stack_id = :s "
                        "AND resource_name = :r", r=middle)
        next_name = one("SELECT name FROM resources WHERE stack_id = :s ORDER BY name "
                        "LIMIT 1 OFFSET :o", o=PAGE - 1)
    engine.dispose()
    stack = f"/v1/{TENANT}/stacks/{BIG}/{stack_id}"
    return {
        "stack list": (f"/v1/{TENANT}/stacks", {}),
        "stack show": (stack, {}),
        "events, first 100": (stack + "/events", {"limit": PAGE}),
        "events, next 100": (stack + "/events", {"limit": PAGE, "marker": next_event}),
        "events, 100 mid-way": (stack + "/events", {"limit": PAGE, "marker": mid_event}),
        "resources, first 100": (stack + "/resources", {"limit": PAGE}),
        "resources, next 100": (stack + "/resources", {"limit": PAGE, "marker": next_name}),
        "resources, 100 mid-way": (stack + "/resources", {"limit": PAGE, "marker": middle}),
        "resource show": (f"{stack}/resources/{middle}", {}),
    }


def timed(client: httpx.Client, path: str, params: dict[str, Any]) -> float:
    start = time.perf_counter()
    answer = client.get(path, params=params)
    elapsed = time.perf_counter() - start
    answer.raise_for_status()
    return elapsed * 1000


def measure(kind: str, n: int, how: str, repeat: int, explain: bool,
            spy: pathlib.Path | None) -> dict[str, tuple[float, float, float]]:
    """Per read: (first, median, slowest) in ms."""
    with tempfile.TemporaryDirectory() as folder, database(kind, folder) as url:
        made = make_rows(url, n, how)
        print(f"{kind}, {n:,} resources: made {how} in {made['seconds']:.1f} s", flush=True)
        server, base = start_api(folder, url, None)
        profiler = None
        try:
            with httpx.Client(base_url=base, timeout=600) as client:
                # The first answer of each read, the stack show the process's first.
                paths = reads(url, made["stack_id"], n)
                first = {"stack show": timed(client, *paths["stack show"])}
                for label, (path, params) in paths.items():
                    first.setdefault(label, timed(client, path, params))
                if spy is not None:
                    spy.mkdir(parents=True, exist_ok=True)
                    spy_exe = shutil.which("py-spy") or \
                        str(pathlib.Path(sys.executable).with_name("py-spy"))
                    profiler = subprocess.Popen(
                        [spy_exe, "record", "--pid", str(server.pid), "--format", "speedscope",
                         "--output", str(spy / f"{kind}-{n}.json"), "--rate", "500"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(1)
                times: dict[str, list[float]] = {label: [] for label in paths}
                for _ in range(repeat):
                    for label, (path, params) in paths.items():
                        times[label].append(timed(client, path, params))
        finally:
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
                profiler.wait(60)
            server.terminate()
            server.wait(30)
        if explain:
            show_plans(url, made["stack_id"], n, paths)
    return {label: (first[label], statistics.median(t), max(t)) for label, t in times.items()}


# Plans ------------------------------------------------------------------------------------------

def show_plans(url: str, stack_id: str, n: int,
               paths: dict[str, tuple[str, dict[str, Any]]]) -> None:
    """The plan of every SELECT each read's use cases send, called in this process."""
    from sqlalchemy import event

    from convergence.heat_fields import StackQuery
    from convergence.ports.pages import EventQuery, ResourceQuery
    from convergence.runtime import open_runtime
    from convergence.services import inputs, pages, queries
    from convergence.settings import Settings

    rt = open_runtime(Settings(database_url=url, encryption_keys=encryption_keys()),
                      migrate=False)
    middle = f"r{n // 2}"

    def marker(label: str) -> Any:
        return paths[label][1].get("marker")

    def show() -> None:
        stack = queries.get_stack(rt, TENANT, stack_id)
        inputs.descriptions(rt, [stack])
        inputs.stack_parameters(rt, stack)

    def listing() -> None:
        found = pages.stack_page(rt, TENANT, StackQuery())
        inputs.descriptions(rt, found.stacks)

    def events(label: str) -> Any:
        return lambda: queries.list_events(rt, TENANT, stack_id, query=EventQuery(
            limit=PAGE, marker=marker(label)))

    def resources(label: str) -> Any:
        return lambda: next(queries.resource_chunks(rt, TENANT, stack_id, ResourceQuery(
            limit=PAGE, marker=marker(label)), chunk=500))

    calls = {"stack list": listing, "stack show": show,
             **{label: events(label) for label in paths if label.startswith("events")},
             **{label: resources(label) for label in paths if label.startswith("resources")},
             "resource show": lambda: queries.resource_page(
                 rt, TENANT, stack_id, ResourceQuery(limit=1, names=(middle,)))}
    postgres = url.startswith("postgresql")
    try:
        for label, call in calls.items():
            sent: list[tuple[str, Any]] = []

            def capture(conn: Any, cursor: Any, statement: str, parameters: Any,
                        context: Any, executemany: bool, into: list[Any] = sent) -> None:
                if statement.lstrip().upper().startswith("SELECT"):
                    into.append((statement, parameters))

            event.listen(rt.store.engine, "before_cursor_execute", capture)
            try:
                call()
            finally:
                event.remove(rt.store.engine, "before_cursor_execute", capture)
            print(f"\n{label}: {len(sent)} SELECTs")
            for statement, parameters in sent:
                print("  " + " ".join(statement.split())[:300])
                for line in plan(rt.store.engine, postgres, statement, parameters):
                    print(f"      {line}")
    finally:
        rt.store.engine.dispose()


def plan(engine: Any, postgres: bool, statement: str, parameters: Any) -> list[str]:
    prefix = "EXPLAIN (ANALYZE, BUFFERS) " if postgres else "EXPLAIN QUERY PLAN "
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(prefix + statement, parameters)
        rows = cursor.fetchall()
    finally:
        raw.close()
    return [str(r[0]) for r in rows] if postgres else [str(r[-1]) for r in rows]


# Checking the seeding ---------------------------------------------------------------------------

def verify(kind: str, n: int = 30) -> bool:
    """A stack of ``n`` resources made both ways: whether their rows are alike."""
    found = {}
    for how in ("real", "seed"):
        with tempfile.TemporaryDirectory() as folder, database(kind, folder) as url:
            made = make_rows(url, n, how)
            found[how] = snapshot(url, made["stack_id"])
    alike = True
    for table in found["real"]:
        real, seeded = found["real"][table], found["seed"][table]
        if real != seeded:
            alike = False
            print(f"{kind}: {table} differs:\n  real:   {real[:3]}\n  seeded: {seeded[:3]}")
    print(f"{kind}: the seeded rows of {n} resources are "
          f"{'the engine rows' if alike else 'NOT the engine rows'}")
    return alike


def snapshot(url: str, stack_id: str) -> dict[str, list[Any]]:
    """The big stack's rows, ids, times and uuids replaced by what they stand for."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    volatile = {"id", "stack_id", "traversal_id", "record_id", "seq"}
    times = {"created_at", "updated_at", "finished_at", "deadline", "progressed_at"}
    out: dict[str, list[Any]] = {}
    with engine.connect() as conn:
        physical = {str(p): f"<{name}>" for p, name in conn.execute(text(
            "SELECT physical_id, name FROM resources WHERE stack_id = :s"), {"s": stack_id})}
        physical[stack_id] = "<stack>"
        queries = {
            "stacks": "SELECT * FROM stacks WHERE id = :s",
            "templates": "SELECT t.* FROM templates t JOIN stacks s ON s.template_id = t.id "
                         "WHERE s.id = :s",
            "resources": "SELECT * FROM resources WHERE stack_id = :s ORDER BY name",
            "events": "SELECT * FROM events WHERE stack_id = :s ORDER BY resource_name, id",
            "traversals": "SELECT * FROM traversals WHERE stack_id = :s",
            "nodes": "SELECT n.* FROM nodes n JOIN traversals t ON t.id = n.traversal_id "
                     "WHERE t.stack_id = :s ORDER BY n.name",
        }
        for table, sql in queries.items():
            rows = []
            for row in conn.execute(text(sql), {"s": stack_id}).mappings():
                rows.append({k: v is not None if k in times else _plain(v, physical)
                             for k, v in row.items() if k not in volatile})
            out[table] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
    engine.dispose()
    return out


def _plain(value: Any, physical: dict[str, str]) -> Any:
    if isinstance(value, str):
        for uid, name in physical.items():
            value = value.replace(uid, name)
        try:
            return _plain(json.loads(value), physical) if value[:1] in "[{" else value
        except ValueError:
            return value
    if isinstance(value, dict):
        return {k: _plain(v, physical) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, physical) for v in value]
    return value


# The table --------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--databases", nargs="+", choices=["sqlite", "postgresql"],
                        default=["sqlite", "postgresql"])
    parser.add_argument("--real-up-to", type=int, default=100_000,
                        help="the largest stack created through the engine; above: seeded")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--py-spy", type=pathlib.Path, default=None)
    parser.add_argument("--verify", action="store_true")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, n, how = args.child
        print(json.dumps(populate(url, int(n), how)))
        return
    if args.verify:
        sys.exit(0 if all([verify(kind) for kind in args.databases]) else 1)
    figures: dict[tuple[str, int], dict[str, tuple[float, float, float]]] = {}
    for kind in args.databases:
        for n in sorted(args.sizes):
            how = "real" if n <= args.real_up_to else "seed"
            figures[kind, n] = measure(kind, n, how, args.repeat, args.explain, args.py_spy)
    print(f"\nms per read: median / slowest of {args.repeat} (the first answer, cold)")
    columns = list(figures)
    print(f"{'read':<24}" + "".join(f"{f'{k} {n:,}':>26}" for k, n in columns))
    for label in next(iter(figures.values())):
        cells = (figures[c][label] for c in columns)
        print(f"{label:<24}" + "".join(f"{f'{m:.1f} / {s:.1f} ({f:.0f})':>26}"
                                        for f, m, s in cells))


if __name__ == "__main__":
    main()
