"""Resource list pages through the API: a page of 100 resources of stacks of 1,000, 10,000 and
100,000 resources, and the whole list of each.

    python benchmarks/resource_list.py                          # SQLite
    python benchmarks/resource_list.py --database postgresql    # a fresh PostgreSQL database
    python benchmarks/resource_list.py --sizes 1000 200000 --repeat 50 --explain

A fresh database (a SQLite file in a temporary folder, or a PostgreSQL database created for
the run and dropped after it, on ``CONVERGENCE_BENCH_PG``'s server), migrated; a ``convergence
api`` process on it (embedded: no broker). A stack per size and a neighbour stack of
``--neighbour`` resources are written directly through the store, as the planner and the steps
write them (``Tx.insert_records``, then ``Tx.apply_many``), the stacks taking turns of 1,000
resources so that their rows are interleaved in the table as concurrent stacks' are. Each
resource is ``CREATE_COMPLETE`` with a physical id, a few hundred bytes of properties and
attributes, and requires the one before it and the one half-way back (a layered graph: most
resources are required by one or two others); one in 1,000 is ``FAILED``; one in 100 is of a
rare type; one in 500 is being replaced (its old version, still required by the others, lives
beside the new one). On PostgreSQL the table is then analysed, as autovacuum would soon do.

Then each kind of request is made ``--repeat`` times on each stack over one keep-alive
connection, the sizes taking turns, and the median latency printed (the whole HTTP request:
the stack's look-up, the page's transaction, ``required_by``, the JSON):

- ``first``: ``?limit=100``; ``middle``: ``?limit=100&marker=<the name half-way>``, in both
  orders, and with ``with_detail=true``;
- ``status FAILED (0.1%)``: ``?limit=100&status=FAILED`` (``ix_resources_stack_status``);
- ``type, common (20%)`` and ``type, rare (1%)``: ``?limit=100&type=...``
  (``ix_resources_stack_type``);
- ``one name``, ``one physical id`` (``ix_resources_stack_physical``; an id no resource has);
- ``sorted by type, middle``: ``?limit=100&sort_keys=resource_type&marker=...``
  (``ix_resources_stack_type`` from the marker on);
- ``show``: ``GET .../resources/<name>``;
- ``whole list`` (``--whole-repeat`` times): every resource, streamed in chunks; printed per
  resource too, to show it stays linear.

Every page reads ``required_by`` for its resources through an index: ``ix_resources_requires``
(GIN) on PostgreSQL, ``resource_requirements`` on SQLite. ``--explain`` also prints the
database's plan of each page's statements (the marker's look-up, the page, the ``required_by``
look-up) on the largest stack, as the store sends them (captured from the store's own call in
this process): ``EXPLAIN QUERY PLAN`` on SQLite, ``EXPLAIN (ANALYZE, BUFFERS)`` on PostgreSQL.
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
from typing import Any

import httpx
from sqlalchemy import event, text

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # sibling scripts
from distributed import start_api  # noqa: E402
from event_list import database  # noqa: E402

from convergence.ports.pages import ResourceQuery  # noqa: E402
from convergence.ports.views import RecordChange  # noqa: E402
from convergence.store.db import make_engine  # noqa: E402
from convergence.store.transactions import Store  # noqa: E402

TENANT = "bench"
PAGE = 100
TURN = 1000
TYPES = ("OS::Nova::Server", "OS::Neutron::Port", "OS::Cinder::Volume", "OS::Neutron::Net",
         "OS::Heat::RandomString")
RARE = "OS::Heat::WaitCondition"
PROPERTIES = {"name": "x" * 40, "flavor": "m1.small", "image": "cirros",
              "networks": [{"port": "p" * 36}], "metadata": {"role": "worker", "tier": "a"}}


def name_of(i: int) -> str:
    return f"res-{i:07d}"


def resources(n: int) -> Iterator[tuple[str, str, str]]:
    """``n`` resources: (name, type, status)."""
    for i in range(n):
        rtype = RARE if i % 100 == 37 else TYPES[i % len(TYPES)]
        yield name_of(i), rtype, "FAILED" if i % 1000 == 420 else "COMPLETE"


def fill(store: Store, stacks: dict[str, tuple[str, int]]) -> None:
    """Each stack (name -> (id, resources wanted)) gets its records, in turns of 1,000, so that
    the stacks' rows are interleaved in the table as concurrent stacks' are."""
    ids: dict[str, dict[str, int]] = {name: {} for name in stacks}
    queues = {name: enumerate(resources(n)) for name, (_, n) in stacks.items()}
    while queues:
        for name in list(queues):
            turn = list(itertools.islice(queues[name], TURN))
            if not turn:
                del queues[name]
                continue
            stack_id, known = stacks[name][0], ids[name]
            with store.begin() as tx:
                made = tx.insert_records(stack_id, [(rname, rtype) for _, (rname, rtype, _)
                                                    in turn])
                known.update(made)
                tx.apply_many([RecordChange(made[rname], 0, {
                    "action": "CREATE", "status": status, "physical_id": str(uuid.uuid4()),
                    "status_reason": "state changed", "properties": PROPERTIES,
                    "attributes": {"first_address": f"10.0.{i // 250 % 250}.{i % 250}",
                                   "show": {"id": rname}},
                    "requires": sorted({known[name_of(j)] for j in (i - 1, i // 2)
                                        if 0 <= j < i})})
                    for i, (rname, _, status) in turn])
                # One in 500 is being replaced: a new version beside the old one.
                olds = tx.records_by_id([made[rname] for i, (rname, _, _) in turn
                                         if i % 500 == 250])
                for old in olds.values():
                    tx.insert_replacement(old, old.fencing_token, old.type)
    if store.engine.dialect.name == "postgresql":
        with store.engine.begin() as conn:
            conn.execute(text("ANALYZE resources"))


def kinds(n: int) -> dict[str, tuple[str, dict[str, Any], ResourceQuery | None]]:
    """Each kind of request: its path under the stack, its query, the store's query."""
    mid = name_of(n // 2)
    return {
        "first": ("/resources", {"limit": PAGE}, ResourceQuery(limit=PAGE)),
        "middle": ("/resources", {"limit": PAGE, "marker": mid},
                   ResourceQuery(limit=PAGE, marker=mid)),
        "middle, desc": ("/resources", {"limit": PAGE, "marker": mid, "sort_dir": "desc"},
                         ResourceQuery(limit=PAGE, marker=mid, descending=True)),
        "middle, with detail": ("/resources", {"limit": PAGE, "marker": mid,
                                               "with_detail": "true"}, None),
        "status FAILED (0.1%)": ("/resources", {"limit": PAGE, "status": "FAILED"},
                                 ResourceQuery(limit=PAGE, statuses=("FAILED",))),
        "type, common (20%)": ("/resources", {"limit": PAGE, "type": TYPES[1],
                                              "marker": mid},
                               ResourceQuery(limit=PAGE, types=(TYPES[1],), marker=mid)),
        "type, rare (1%)": ("/resources", {"limit": PAGE, "type": RARE},
                            ResourceQuery(limit=PAGE, types=(RARE,))),
        "one name": ("/resources", {"name": mid}, ResourceQuery(names=(mid,))),
        "one physical id": ("/resources", {"physical_resource_id": "none-such"},
                            ResourceQuery(physical_ids=("none-such",))),
        "sorted by type, middle": ("/resources", {"limit": PAGE, "marker": mid,
                                                  "sort_keys": "resource_type"},
                                   ResourceQuery(limit=PAGE, marker=mid, sort_keys=("type",))),
        "show": (f"/resources/{mid}", {}, None),
    }


Target = tuple[str, str, dict[str, Any]]  # the stack's path, the request's path and query


def medians(client: httpx.Client, targets: dict[tuple[str, int], Target],
            repeat: int) -> dict[tuple[str, int], tuple[float, int]]:
    """Per (kind, size): the median latency, ms, and how many resources the answer has. Each
    round asks for everything once, so that what else the machine does weighs on every
    figure alike."""
    counts = {}
    for key, (stack, path, params) in targets.items():
        for _ in range(3):  # warm: the first reads after the load fill the caches
            answer = client.get(stack + path, params=params)
            answer.raise_for_status()
        body = answer.json()
        counts[key] = len(body["resources"]) if "resources" in body else 1
    times: dict[tuple[str, int], list[float]] = {key: [] for key in targets}
    for _ in range(repeat):
        for key, (stack, path, params) in targets.items():
            start = time.perf_counter()
            client.get(stack + path, params=params).raise_for_status()
            times[key].append(time.perf_counter() - start)
    return {key: (statistics.median(times[key]) * 1000, counts[key]) for key in targets}


def whole(client: httpx.Client, stacks: dict[int, str], repeat: int) -> dict[int, float]:
    """Per size: the median time of the whole list, seconds, checked complete."""
    out = {}
    for n, stack in stacks.items():
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            answer = client.get(f"{stack}/resources")
            answer.raise_for_status()
            listed = answer.json()["resources"]
            times.append(time.perf_counter() - start)
            assert len(listed) == n, (len(listed), n)
        out[n] = statistics.median(times)
    return out


def plan(store: Store, stack_id: str, query: ResourceQuery) -> list[list[str]]:
    """The database's plan of each statement of the page, as the store sends them."""
    sent: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
                executemany: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            sent.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        with store.read() as tx:
            tx.resource_page(stack_id, query)
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)
    postgres = store.engine.dialect.name == "postgresql"
    prefix = "EXPLAIN (ANALYZE, BUFFERS) " if postgres else "EXPLAIN QUERY PLAN "
    plans = []
    raw = store.engine.raw_connection()
    try:
        for statement, parameters in sent:
            cursor = raw.cursor()
            cursor.execute(prefix + statement, parameters)
            rows = cursor.fetchall()
            plans.append([str(r[0]) for r in rows] if postgres else [str(r[-1]) for r in rows])
    finally:
        raw.close()
    return plans


def measure(kind: str, sizes: list[int], neighbour: int, repeat: int, whole_repeat: int,
            explain: bool) -> tuple[dict[str, dict[int, tuple[float, int]]], dict[int, float]]:
    with tempfile.TemporaryDirectory() as folder, database(kind, folder) as url:
        engine = make_engine(url)
        store = Store(engine)
        names = {f"s{n}": n for n in sizes} | {"neighbour": neighbour}
        stacks = {}
        with store.begin() as tx:
            for name, n in names.items():
                stacks[name] = (str(uuid.uuid4()), n)
                tx.insert_stack(stacks[name][0], TENANT, name, timeout_mins=None,
                                disable_rollback=True)
        started = time.perf_counter()
        fill(store, stacks)
        print(f"{kind}: stacks of {', '.join(f'{n:,}' for n in names.values())} resources "
              f"written in {time.perf_counter() - started:.1f} s", flush=True)
        server, base = start_api(folder, url, None)
        try:
            with httpx.Client(base_url=base, timeout=600) as client:
                paths = {n: f"/v1/{TENANT}/stacks/s{n}/{stacks[f's{n}'][0]}" for n in sizes}
                targets = {(label, n): (paths[n], path, params)
                           for n in sizes for label, (path, params, _) in kinds(n).items()}
                found = medians(client, targets, repeat)
                figures = {label: {n: found[label, n] for n in sizes} for label in kinds(1)}
                lists = whole(client, paths, whole_repeat)
            largest = max(sizes)
            for label, (_, _, query) in kinds(largest).items() if explain else []:
                if query is None:
                    continue
                print(f"\nplans of '{label}' ({kind}, the stack of {largest:,} resources):")
                for i, lines in enumerate(plan(store, stacks[f"s{largest}"][0], query)):
                    print(f"  statement {i + 1}:")
                    for line in lines:
                        print(f"    {line}")
            return figures, lists
        finally:
            server.terminate()
            server.wait(30)
            engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--neighbour", type=int, default=20_000,
                        help="resources of another stack, interleaved with theirs")
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--whole-repeat", type=int, default=3)
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    sizes = sorted(set(args.sizes))
    figures, lists = measure(args.database, sizes, args.neighbour, args.repeat,
                             args.whole_repeat, args.explain)
    print(f"\nmedian latency, ms (resources in the answer); {args.database}, "
          f"{args.repeat} requests each")
    print(f"  {'request':<26}" + "".join(f"{f'{n:,} resources':>22}" for n in sizes))
    for label, by_size in figures.items():
        cells = (f"{by_size[n][0]:.2f} ({by_size[n][1]})" for n in sizes)
        print(f"  {label:<26}" + "".join(f"{c:>22}" for c in cells))
    cells = (f"{lists[n]:.2f} s ({lists[n] / n * 1e6:.0f} us/res)" for n in sizes)
    print(f"  {'whole list':<26}" + "".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
