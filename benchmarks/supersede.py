"""Updates that supersede a running 10,000-resource traversal: how soon the new one steps.

    python benchmarks/supersede.py                                  # embedded (SQLite)
    python benchmarks/supersede.py --mode distributed --workers 2   # PostgreSQL + Redis

Starts ``convergence api`` as a real process on a loopback port (embedded: a SQLite file of
its own, the API steps the work on its in-process dispatcher; distributed: a fresh PostgreSQL
database, Redis and N ``convergence worker`` processes, see ``distributed.py``). Creates a
stack of ``--size`` ``OS::Heat::None`` resources (``engine_scale.template``); when its
traversal is ``--at`` of the way through, sends an update (``PUT``, answered 202) that changes
``--changed`` resources, and so on ``--repeats`` times, each update superseding the traversal
of the one before while it runs. Then waits for the stack to converge.

Per update, from the 202 (the client has the answer), watching the database every 5 ms:

- first step: until a node of the new traversal is DONE (or FAILED);
- running: until the new traversal leaves PLANNING (its plan committed);
- plan: from the plan transaction's start (its nodes' ``updated_at``) to ``running``; the
  rest of ``running`` is the plan message waiting for a worker (queue).

Printed: median and max of each, the request's own round trip, and where the superseded
traversal was when the update came.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from distributed import start_api  # sibling scripts, not a package
from engine_scale import template

TENANT = "bench"
POLL = 0.005


@dataclass
class Figures:
    generation: int
    request: float  # the PUT's round trip
    first_step: float  # 202 -> a node of the new traversal done
    running: float  # 202 -> the new traversal RUNNING
    plan: float  # the plan transaction's start -> RUNNING seen
    queued: float  # traversal row written -> the plan transaction's start
    superseded_done: float  # fraction of the superseded traversal done when the update came
    nodes: int  # the new traversal's node count


def changed_template(n: int, shape: str, k: int, changed: int) -> str:
    """The stack's template with ``changed`` resources (spread over the stack) given new
    values for update ``k``."""
    doc: str = template(n, shape, "a")
    if changed <= 0:
        return doc
    body = json.loads(doc)
    step = max(n // changed, 1)
    for i in range(0, n, step)[:changed]:
        body["resources"][f"r{i}"]["properties"]["value"] = f"u{k}-{i}"
    return json.dumps(body)


class Watch:
    """Reads the engine's tables directly (short read-only transactions)."""

    def __init__(self, url: str) -> None:
        self.db: Engine = create_engine(url)

    def one(self, sql: str, **params: Any) -> Any:
        with self.db.connect() as c:
            return c.execute(text(sql), params).first()

    def traversal(self, stack_id: str, generation: int) -> Any:
        return self.one("SELECT id, state, nodes_total, nodes_remaining, created_at "
                        "FROM traversals WHERE stack_id = :s AND generation = :g",
                        s=stack_id, g=generation)

    def stepped(self, traversal_id: str) -> bool:
        return self.one("SELECT 1 FROM nodes WHERE traversal_id = :t AND state IN "
                        "('DONE', 'FAILED') LIMIT 1", t=traversal_id) is not None

    def plan_started(self, traversal_id: str) -> float:
        return float(self.one("SELECT min(updated_at) FROM nodes WHERE traversal_id = :t",
                              t=traversal_id)[0])


def wait_progress(watch: Watch, stack_id: str, generation: int, fraction: float,
                  timeout: float = 600) -> Any:
    """Wait until the traversal of ``generation`` is RUNNING with ``fraction`` of its nodes
    done; return its row then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = watch.traversal(stack_id, generation)
        if row is not None and row.state not in ("PLANNING", "RUNNING"):
            raise RuntimeError(f"traversal of generation {generation} ended {row.state} "
                               "before the update")
        if row is not None and row.state == "RUNNING" and row.nodes_total and \
                row.nodes_total - row.nodes_remaining >= fraction * row.nodes_total:
            return row
        time.sleep(0.02)
    raise RuntimeError(f"traversal of generation {generation} made no progress")


def measure(watch: Watch, stack_id: str, generation: int, answered: float,
            timeout: float = 300) -> tuple[float, float, float, str]:
    """Seconds from ``answered`` (perf_counter) to the new traversal's first step and to its
    RUNNING state; the epoch time RUNNING was seen; and its id."""
    first: float | None = None
    running: float | None = None
    seen = 0.0
    trav_id = ""
    deadline = time.monotonic() + timeout
    while first is None or running is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"generation {generation}: no step after {timeout} s")
        now = time.perf_counter()
        if running is None:
            row = watch.traversal(stack_id, generation)
            trav_id = row.id
            if row.state in ("SUPERSEDED", "FAILED"):
                raise RuntimeError(f"generation {generation} ended {row.state}")
            if row.state != "PLANNING":
                running, seen = now - answered, time.time()
        if first is None and running is not None and watch.stepped(trav_id):
            first = time.perf_counter() - answered
        if first is None or running is None:
            time.sleep(POLL)
    return first, running, seen, trav_id


def run(base: str, url: str,
        args: argparse.Namespace) -> tuple[list[Figures], str, float, list[str]]:
    client = httpx.Client(base_url=base, timeout=600)
    watch = Watch(url)
    n, shape = args.size, args.shape
    created = client.post(f"/v1/{TENANT}/stacks", json={
        "stack_name": "s", "template": template(n, shape, "a")})
    created.raise_for_status()
    stack_id = created.json()["stack"]["id"]
    path = f"/v1/{TENANT}/stacks/s/{stack_id}"
    generation = 1
    bodies = [changed_template(n, shape, k + 1, args.changed) for k in range(args.repeats)]
    results = []
    deadlocks: list[str] = []
    for body in bodies:
        before = wait_progress(watch, stack_id, generation, args.at)
        for _ in range(4):
            start = time.perf_counter()
            response = client.put(path, content=f'{{"template": {body}}}'.encode(),
                                  headers={"Content-Type": "application/json"})
            answered = time.perf_counter()
            if response.status_code == 500 and "deadlock detected" in response.text:
                # A bug, counted and shown; a client would send the update again.
                deadlocks.append(response.json()["error"]["message"].splitlines()[0])
                continue
            break
        if response.status_code != 202:
            raise RuntimeError(f"update answered {response.status_code}: {response.text}")
        generation = response.json()["stack"]["generation"]
        first, running, seen, trav_id = measure(watch, stack_id, generation, answered)
        row = watch.traversal(stack_id, generation)
        plan_start = watch.plan_started(trav_id)
        done = before.nodes_total - before.nodes_remaining
        results.append(Figures(
            generation, answered - start, first, running,
            plan=max(seen - plan_start, 0.0),
            queued=max(plan_start - float(row.created_at), 0.0),
            superseded_done=done / before.nodes_total, nodes=row.nodes_total))
    start = time.perf_counter()
    status = ""
    while time.perf_counter() - start < args.finish_timeout:
        stack = client.get(path).json()["stack"]
        status = stack["stack_status"]
        if status.endswith(("_COMPLETE", "_FAILED")):
            break
        time.sleep(0.25)
    return results, status, time.perf_counter() - start, deadlocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["embedded", "distributed"], default="embedded")
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--shape", choices=["wide", "chain", "layered"], default="wide")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--changed", type=int, default=100,
                        help="resources each update changes")
    parser.add_argument("--at", type=float, default=0.3,
                        help="fraction of the running traversal done when an update is sent")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--finish-timeout", type=float, default=900)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        workers = None
        if args.mode == "embedded":
            url, broker = f"sqlite:///{folder}/bench.db", None
        else:
            from distributed import start_cluster

            url, broker, workers = start_cluster(folder, args.workers)
        api = None
        try:
            api, base = start_api(folder, url, broker, {
                # A 10,000-resource template is about 1 MiB of JSON.
                "CONVERGENCE_MAX_TEMPLATE_BYTES": str(16 << 20),
                "CONVERGENCE_MAX_REQUEST_BYTES": str(32 << 20)})
            results, status, tail, deadlocks = run(base, url, args)
        finally:
            if api is not None:
                api.terminate()
                api.wait(30)
            if workers is not None:
                workers.stop()
    print(f"mode: {args.mode}" + (f" ({args.workers} workers)" if workers else "")
          + f", {args.size} resources ({args.shape}), {args.repeats} updates of "
          f"{args.changed} resources each, sent at {args.at:.0%} of the running traversal")
    print(f"{'gen':>4} {'superseded at':>13} {'nodes':>6} {'PUT s':>6} {'queued s':>8} "
          f"{'plan s':>7} {'running s':>9} {'first step s':>12}")
    for r in results:
        print(f"{r.generation:>4} {r.superseded_done:>13.0%} {r.nodes:>6} {r.request:>6.3f} "
              f"{r.queued:>8.3f} {r.plan:>7.3f} {r.running:>9.3f} {r.first_step:>12.3f}")
    for label, values in (
            ("202 -> first step of the new traversal", [r.first_step for r in results]),
            ("202 -> new traversal RUNNING (planned)", [r.running for r in results]),
            ("plan transaction (start -> RUNNING)", [r.plan for r in results]),
            ("PUT round trip", [r.request for r in results])):
        print(f"{label}: median {statistics.median(values):.3f} s, max {max(values):.3f} s")
    print(f"after the last update: {status} in {tail:.1f} s more")
    if deadlocks:
        print(f"updates answered 500 (deadlock) and sent again: {len(deadlocks)}")


if __name__ == "__main__":
    main()
