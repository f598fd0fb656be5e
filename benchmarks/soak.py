"""The soak: random stacks, updates and faults for N minutes, then the invariants.

    python benchmarks/soak.py --minutes 10                   # default lease 30 s, sweep 5 s
    python benchmarks/soak.py --minutes 3 --lease 3 --sweep 0.5 --fault-every 2
    python benchmarks/soak.py --minutes 10 --weight SIGSTOP=40  # frozen workers, mostly

Builds the fault tier's environment (``tests/faults``): a private PostgreSQL cluster and Redis
server, ``--workers`` ``convergence worker`` processes kept up by a supervisor, one
``convergence api``. A workload thread keeps ``--stacks`` stacks busy over the API (wide,
layered and replacing shapes; updates, some on top of running ones, some told to fail;
deletes and new creates). A fault thread injects, every ``--fault-every`` seconds on average,
one of: ``kill -9`` of a worker's process group or of one pool child, SIGTERM (graceful),
SIGSTOP past the lease then SIGCONT, a Redis restart, ``pg_terminate_backend`` of every
session, a PostgreSQL restart, an API killed after committing an update and before enqueuing
it, a burst of duplicated and reordered messages (each kind's weight: ``--weight``). Every
backend call of the workers answers ``--latency`` seconds late
(``CONVERGENCE_TEST_BACKEND_LATENCY``), so that steps hold their leases long enough for kills
to land in them.

When the time is up the faults stop, the workload stops, and once everything is quiet (or a
bound of lease + sweep + 5 minutes passed) it prints: traversals completed, faults injected by
kind, recovery after a kill -9 (of a worker, of one pool process) and after a SIGTERM (median
and max: from the signal until no lease the worker held is its own any more; again for the
faults with no Redis or PostgreSQL fault meanwhile, when neither the sweeper nor the let-go
could work), and the leaked / duplicated / stuck counts, which must be 0, with the late
writes refused and the orphans (what a late step made) removed or adopted. Exit status 1 when
they are not; the logs and a dump of the database (``database.sql``) are then kept for
reading what happened.
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import random
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable

import httpx

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the fault tier's machinery, shared with the tests
from tests.faults import invariants  # noqa: E402
from tests.faults.chaos import MessageChaos  # noqa: E402
from tests.faults.cluster import DATABASE, Fault, FaultCluster, Timing  # noqa: E402
from tests.faults.workload import SHAPES, TENANT, Tracked, Workload, mutate, template  # noqa: E402

KINDS: dict[str, float] = {  # fault kind -> weight
    "kill -9": 40, "kill -9 pool child": 8, "SIGTERM": 15, "SIGSTOP": 5, "redis restart": 5,
    "pg_terminate_backend": 10, "postgres restart": 4, "API killed after commit": 5,
    "messages": 8,
}

# Faults on what the sweeper and the let-go need, and how long before a worker fault one may
# still be going on (a restart is recorded once done; the API's failures last after it).
SERVICE_FAULTS = ("redis restart", "pg_terminate_backend", "postgres restart")
SERVICE_OUTAGE = 15.0


def _figures(times: list[float]) -> str:
    if not times:
        return "none"
    return f"median {statistics.median(times):.2f} s, max {max(times):.2f} s"


class Soak:
    def __init__(self, cluster: FaultCluster, args: argparse.Namespace) -> None:
        self.cluster = cluster
        self.args = args
        self.rng = random.Random(args.seed)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.tracked: list[Tracked] = []  # every stack ever created, deleted ones too
        measured = ("kill -9", "kill -9 pool child", "SIGTERM")
        self.recovery: dict[str, list[tuple[Fault, float]]] = {k: [] for k in measured}
        self.unrecovered: dict[str, int] = dict.fromkeys(measured, 0)
        self.threads: list[threading.Thread] = []  # the workload, the faults, their helpers
        self.measures: list[threading.Thread] = []  # recovery measurements, left to finish

    def spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    # workload ---------------------------------------------------------------------------------
    def drive(self) -> None:
        assert self.cluster.api is not None
        workload = Workload(self.cluster.api.url, seed=self.args.seed)
        live: list[Tracked] = []
        try:
            while not self.stop.wait(self.rng.uniform(0.3, 2.0)):
                if len(live) < self.args.stacks:
                    shape = self.rng.choice(SHAPES)
                    t = workload.create(shape, size={"wide": 30, "layered": 12,
                                                     "replacing": 8}[shape])
                    with self.lock:
                        self.tracked.append(t)
                    if not t.deleted:
                        live.append(t)
                    continue
                t = self.rng.choice(live)
                roll = self.rng.random()
                if roll < 0.1:
                    workload.delete(t)
                    if t.deleted:
                        live.remove(t)
                else:
                    workload.update(t, fail=roll > 0.95, patch=roll > 0.6)
        finally:
            workload.close()

    # faults -----------------------------------------------------------------------------------
    def inject(self) -> None:
        kinds, weights = zip(*KINDS.items(), strict=True)
        while not self.stop.wait(self.rng.expovariate(1 / self.args.fault_every)):
            kind = self.rng.choices(kinds, weights)[0]
            try:
                self.one(kind)
            except Exception as exc:  # a fault that could not be injected is reported
                print(f"  ({kind} not injected: {exc})", flush=True)

    def one(self, kind: str) -> None:
        c = self.cluster
        if kind in ("kill -9", "kill -9 pool child", "SIGTERM", "SIGSTOP") and \
                not c.live_workers():
            return
        if kind == "kill -9":
            self.measure(c.kill9(), "kill -9")
        elif kind == "kill -9 pool child":
            child = c.kill9_child()
            if child is not None:
                self.measure(child, "kill -9 pool child")
        elif kind == "SIGTERM":
            self.measure(c.sigterm(wait=False), "SIGTERM")
        elif kind == "SIGSTOP":
            worker = c.pick_worker()
            c.freeze(worker)

            def thaw() -> None:  # past the lease: its work is taken over meanwhile
                time.sleep(c.timing.lease + 1)
                c.thaw(worker)

            self.spawn(thaw, "thaw")
        elif kind == "redis restart":
            c.restart_redis()
        elif kind == "pg_terminate_backend":
            c.terminate_pg_backends()
        elif kind == "postgres restart":
            c.restart_pg()
        elif kind == "API killed after commit":
            self.spawn(self.api_crash, "api-crash")
        elif kind == "messages":
            self.spawn(self.messages, "messages")

    def measure(self, fault: Fault, kind: str) -> None:
        if not fault.held:
            return
        bound = self.cluster.timing.recovery + 300

        def wait() -> None:
            took = invariants.reclaimed_after(self.cluster, fault, bound)
            with self.lock:
                if took is None:
                    self.unrecovered[kind] += 1
                else:
                    self.recovery[kind].append((fault, took))

        thread = threading.Thread(target=wait, name="measure", daemon=True)
        thread.start()
        self.measures.append(thread)

    def api_crash(self) -> None:
        """An update of a stack of its own, committed by an API that then hangs and dies."""
        c = self.cluster
        assert c.api is not None
        workload = Workload(c.api.url, seed=self.rng.randrange(10**6))
        try:
            t = workload.create("layered", size=8)
            if t.deleted:
                return
            with self.lock:
                self.tracked.append(t)
            spec = mutate(t.shape, t.spec, workload.rng, workload.wait)
            with c.hanging_api() as api:
                def send() -> None:
                    with contextlib.suppress(httpx.HTTPError):
                        httpx.put(f"{api.url}/v1/{TENANT}/stacks/{t.name}/{t.id}",
                                  json={"template": template(spec)}, timeout=60)

                sender = threading.Thread(target=send, daemon=True)
                sender.start()
                deadline = time.monotonic() + 60
                while not c.query("SELECT 1 FROM stacks WHERE id = :id AND generation > :g",
                                  id=t.id, g=t.generation):
                    if time.monotonic() > deadline:
                        return  # not committed (the database was down): nothing to kill
                    time.sleep(0.05)
                api.kill()
                c.record_fault("API killed after commit", api.url)
                t.spec, t.generation = spec, t.generation + 1
        finally:
            workload.close()

    def messages(self) -> None:
        assert self.cluster.redis is not None
        client = self.cluster.redis.client()
        try:
            with MessageChaos(client, seed=self.rng.randrange(10**6)) as chaos:
                for _ in range(4):  # the fleet paused a moment: a backlog for the chaos
                    self.cluster.pause_all(0.6)
                    time.sleep(0.6)
            self.cluster.record_fault("messages duplicated and reordered",
                                      f"{chaos.duplicated} copies")
        finally:
            client.close()

    # the end ----------------------------------------------------------------------------------
    def run(self) -> int:
        args = self.args
        self.spawn(self.drive, "workload")
        self.spawn(self.inject, "faults")
        end = time.monotonic() + args.minutes * 60
        while time.monotonic() < end:
            time.sleep(min(30, max(0.0, end - time.monotonic())))
            print(f"  {time.strftime('%H:%M:%S')} faults so far: {sum(self.cluster.kinds.values())}"
                  f", stacks: {len(self.tracked)}", flush=True)
        self.stop.set()
        for thread in self.threads:
            thread.join(self.cluster.timing.lease + 120)
        last_fault = time.time()
        bound = self.args.quiet_timeout or self.cluster.timing.recovery + 300
        quiet = invariants.wait_quiet(self.cluster, self.tracked, bound)
        for thread in self.measures:  # each gives up by itself after the same bound
            thread.join(max(0.0, bound - (time.time() - last_fault)))
        report = invariants.problems(self.cluster, self.tracked, self.cluster.faults)
        return self.print(report, quiet, last_fault)

    def overlapped(self, fault: Fault, took: float) -> bool:
        """Whether PostgreSQL or Redis was restarted, or its sessions killed, while the
        worker's leases were waiting (from a while before, since a restart takes seconds):
        the sweeper and the let-go cannot work without them."""
        return any(other.kind in SERVICE_FAULTS
                   and fault.at - SERVICE_OUTAGE <= other.at <= fault.at + took
                   for other in self.cluster.faults)

    def print(self, report: invariants.Report, quiet: float | None, last_fault: float) -> int:
        c = self.cluster
        states = {s: int(n) for s, n in c.query("SELECT state, count(*) FROM traversals "
                                                "GROUP BY state")}
        print(f"\nsoak: {self.args.minutes} min, lease {c.timing.lease:g} s, sweep "
              f"{c.timing.sweep:g} s, {self.args.workers} workers, seed {self.args.seed}")
        print(f"stacks: {len(self.tracked)}, requests: "
              f"{sum(len(t.requests) for t in self.tracked)}")
        print(f"traversals completed: {states.get('COMPLETE', 0)} (failed "
              f"{states.get('FAILED', 0)}, superseded {states.get('SUPERSEDED', 0)}, "
              f"unfinished {states.get('RUNNING', 0) + states.get('PLANNING', 0)})")
        print("faults injected: " + (", ".join(f"{k}: {n}" for k, n in
                                               sorted(c.kinds.items())) or "none"))
        for kind, measured in self.recovery.items():
            if not measured:
                print(f"recovery after {kind}: no such fault left leases behind "
                      f"({self.unrecovered[kind]} never recovered)")
                continue
            alone = [took for fault, took in measured if not self.overlapped(fault, took)]
            print(f"recovery after {kind}: {_figures([t for _, t in measured])} "
                  f"({len(measured)} that left leases, {self.unrecovered[kind]} never "
                  f"recovered); without a service fault meanwhile: {_figures(alone)} "
                  f"({len(alone)})")
        print("quiet after the last fault: " + (f"{quiet:.1f} s" if quiet is not None else
                                                "NOT within the bound"))
        counts = report.counts
        print(f"leaked: {counts['leaked']}, duplicated: {counts['duplicated']}, stuck: "
              f"{counts['stuck']}, event-ledger problems: {counts['ledger']}")
        others = {k: n for k, n in counts.items()
                  if k not in ("leaked", "duplicated", "stuck", "ledger")}
        if others:
            print("other problems: " + ", ".join(f"{k}: {n}" for k, n in sorted(others.items())))
        if report:
            print(str(report))
        fenced = len(c.grep_logs("fenced off"))
        print(f"late writes refused (\"fenced off\" log lines): {fenced}")
        noted = len(c.grep_logs("noted as an orphan"))
        removed = sum(") removed" in line for line in c.grep_logs("orphan "))
        adopted = sum(int(m) for line in c.grep_logs("orphans adopted")
                      for m in re.findall(r"orphans adopted (\d+)", line))
        print(f"orphans (what a late step made): noted {noted}, removed {removed}, adopted by "
              f"the resource's new holder {adopted}")
        return 1 if report or quiet is None else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--lease", type=float, default=30.0, help="CONVERGENCE_LEASE_SECONDS")
    parser.add_argument("--sweep", type=float, default=5.0, help="CONVERGENCE_SWEEP_SECONDS")
    parser.add_argument("--heartbeat", type=float, default=None,
                        help="CONVERGENCE_HEARTBEAT_SECONDS (default: the lease / 6, <= 5)")
    parser.add_argument("--grace", type=float, default=10.0,
                        help="CONVERGENCE_SHUTDOWN_GRACE_SECONDS")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--stacks", type=int, default=6, help="stacks kept busy at once")
    parser.add_argument("--fault-every", type=float, default=3.0,
                        help="mean seconds between two faults")
    parser.add_argument("--latency", type=float, default=0.2,
                        help="CONVERGENCE_TEST_BACKEND_LATENCY of every worker: a step holds "
                        "its lease that long per backend call, so that kills land in steps")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quiet-timeout", type=float, default=None,
                        help="give up waiting for quiet after this (default: lease + sweep "
                        "+ 300 s)")
    parser.add_argument("--weight", action="append", default=[], metavar="KIND=N",
                        help="the weight of a fault kind (repeatable; defaults: "
                        + ", ".join(f"{k}={v:g}" for k, v in KINDS.items()) + ")")
    parser.add_argument("--keep", action="store_true",
                        help="keep the logs and a dump of the database (kept anyway on failure)")
    args = parser.parse_args()
    for given in args.weight:
        kind, _, weight = given.rpartition("=")
        if kind not in KINDS:
            parser.error(f"--weight {given}: no fault kind {kind!r}; the kinds: "
                         + ", ".join(KINDS))
        try:
            KINDS[kind] = float(weight)
        except ValueError:
            parser.error(f"--weight {given}: {weight!r} is not a number")
    # A SIGTERM (a CI timeout) ends the run through the cleanup below, not around it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    heartbeat = args.heartbeat or min(5.0, args.lease / 6)
    timing = Timing(lease=args.lease, sweep=args.sweep, heartbeat=heartbeat,
                    poll=1.0, grace=args.grace)
    folder = pathlib.Path(tempfile.mkdtemp(prefix="convergence-soak-"))
    cluster = FaultCluster(folder, timing, workers=args.workers, seed=args.seed,
                           extra_env={"CONVERGENCE_TEST_BACKEND_LATENCY": str(args.latency)})
    status = 1
    try:
        cluster.start()
        print(f"soak running for {args.minutes} min; logs in {cluster.logs}", flush=True)
        status = Soak(cluster, args).run()
    finally:
        if args.keep or status != 0:
            try:  # the database, for reading what happened
                assert cluster.pg is not None
                cluster.pg.dump(DATABASE, folder / "database.sql")
                print(f"database dumped to {folder / 'database.sql'}")
            except Exception as exc:
                print(f"(database not dumped: {exc})")
        cluster.close()
        if not args.keep and status == 0:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"logs kept in {folder}")
    sys.exit(status)


if __name__ == "__main__":
    main()
