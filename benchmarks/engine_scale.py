"""Create, update-all and delete stacks of no-op resources; print figures per phase.

    python benchmarks/engine_scale.py                          # embedded, all shapes and sizes
    python benchmarks/engine_scale.py --shapes wide --sizes 10000
    python benchmarks/engine_scale.py --mode distributed --workers 2   # PostgreSQL + Redis

Shapes: ``wide`` (no dependencies), ``chain`` (each on the one before), ``layered`` (10
layers, each resource on two of the layer before), ``group`` (one ``OS::Heat::ResourceGroup``
of all of them) and ``groups`` (groups of 1,000). Resources are ``OS::Heat::None``. Each run
is a fresh process and a fresh database. Per phase: wall seconds, resources per second, SQL
statements and transactions per resource (the client process and, in distributed mode, every
worker), messages per resource (work items dispatched), and peak resident memory per process.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

PHASES = ("create", "update", "delete")


GROUP_SIZE = 1000  # members of each group of the ``groups`` shape


def template(n: int, shape: str, value: str) -> str:
    """The stack's template: ``n`` no-op resources in ``shape``. Written piece by piece (a
    million resources as one dict would weigh more than the engine that reads them)."""
    if shape in ("group", "groups"):
        size = n if shape == "group" else min(GROUP_SIZE, n)
        member = {"type": "OS::Heat::None", "properties": {"value": f"{value}%index%"}}
        groups = {f"g{i}": {"type": "OS::Heat::ResourceGroup",
                            "properties": {"count": size, "resource_def": member}}
                  for i in range(max(n // size, 1))}
        return json.dumps({"heat_template_version": "2018-08-31", "resources": groups})
    layer = max(n // 10, 1)
    parts = []
    for i in range(n):
        deps = ""
        if shape == "chain" and i > 0:
            deps = f', "depends_on": ["r{i - 1}"]'
        elif shape == "layered" and i >= layer:
            prev = (i // layer - 1) * layer
            names = sorted({f"r{prev + i % layer}", f"r{prev + (i + 1) % layer}"})
            deps = ', "depends_on": ' + json.dumps(names)
        parts.append(f'"r{i}": {{"type": "OS::Heat::None", '
                     f'"properties": {{"value": "{value}{i}"}}{deps}}}')
    return ('{"heat_template_version": "2018-08-31", "resources": {'
            + ", ".join(parts) + "}}")


class Counting:
    """Wraps a dispatcher to count the work items (messages) it is given."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.messages = 0

    def dispatch(self, work: Any) -> None:
        self.messages += len(work)
        self.inner.dispatch(work)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def run_child(n: int, shape: str, mode: str, database_url: str, broker: str | None,
              phases: tuple[str, ...] = PHASES) -> None:
    from convergence.dispatch.inprocess import InProcessDispatcher
    from convergence.runtime import open_runtime
    from convergence.services import running, stacks
    from convergence.settings import Settings
    from convergence.store.metrics import StatementCounter

    # Templates of 10,000 resources and more weigh megabytes: past the default size limits.
    # A distributed run's key is in the environment (``distributed.py``); none: an embedded
    # database keeps its own.
    keys = tuple(k for k in os.environ.get("CONVERGENCE_ENCRYPTION_KEYS", "").split(",") if k)
    settings = Settings(database_url=database_url, broker_url=broker,
                        max_template_bytes=1 << 30, max_request_bytes=1 << 30,
                        encryption_keys=keys)
    rt = open_runtime(settings)
    counting = Counting(rt.dispatcher)
    if isinstance(rt.dispatcher, InProcessDispatcher):
        # Follow-up work is dispatched by the dispatcher itself: count it where it is made.
        rt.dispatcher._execute = _counted(rt.engine.execute, counting)
    else:
        rt.dispatcher = counting
    counter = StatementCounter(rt.store.engine)
    stats_dir = os.environ.get("CONVERGENCE_STATS_DIR")
    results = []
    for i, phase in enumerate(phases):
        analyze = os.environ.get("CONVERGENCE_BENCH_ANALYZE")
        if i and analyze and rt.store.engine.dialect.name == "postgresql":
            # As autovacuum would have by then: figures taken before the phase's traversal
            # (and with "vacuum" the dead versions the phase before left cleared away).
            with rt.store.engine.connect() as conn:
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
                conn.exec_driver_sql("VACUUM ANALYZE" if analyze == "vacuum" else "ANALYZE")
        counter.reset()
        before = _worker_figures(stats_dir)
        counting.messages = 1  # the request's own message
        start, cpu, machine = time.perf_counter(), time.process_time(), _machine_cpu()
        if phase == "create":
            stack = stacks.create_stack(rt, "bench", "s", template(n, shape, "a"))
        elif phase == "update":
            stack = stacks.update_stack(rt, "bench", "s", template(n, shape, "b"))
        else:
            stack = stacks.delete_stack(rt, "bench", "s")
        # A chain is timed to the hundredth of a second (its hops take milliseconds: reading
        # the stack every quarter of a second made the figure a hop move by 0.3 ms steps).
        every = 0.01 if shape == "chain" else 0.25
        stack = running.wait_for_stack(rt, "bench", stack.id, refresh=every, poll=min(every, 0.1))
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
        machine = {k: v - machine[k] for k, v in _machine_cpu().items()}
        counts = counter.snapshot()
        statements, transactions, messages = (counts.statements, counts.transactions,
                                              counting.messages)
        if stats_dir:
            time.sleep(1.2)  # the workers write their figures twice a second
            after = _worker_figures(stats_dir)
            statements += after["statements"] - before["statements"]
            transactions += after["transactions"] - before["transactions"]
            messages = counting.messages + after["sent"] - before["sent"]
        results.append({
            "phase": phase, "status": stack.stack_status, "wall": wall, "cpu": cpu,
            "statements": statements, "transactions": transactions, "messages": messages,
            "machine_cpu": machine["machine"], "postgres_cpu": machine["postgres"],
        })
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"results": results, "peak_mib": peak}))


def _machine_cpu() -> dict[str, float]:
    """CPU seconds used so far: by the whole machine (every process: the engine's, the
    database's, the broker's; the benchmark assumes a quiet machine) and by PostgreSQL's
    processes (those alive, and through the server's main process those that ended: a
    process's CPU is added to its parent's when it ends)."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        fields = pathlib.Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:  # not Linux: no figures
        return {"machine": 0.0, "postgres": 0.0}
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    postgres = 0
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # ended meanwhile
            continue
        name, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:]
        if name != "postgres":
            continue
        values = rest.split()  # from the state on: utime is the 12th, cutime the 14th
        postgres += int(values[11]) + int(values[12])
        if values[1] == "1" or _name_of(values[1]) != "postgres":  # the server's main one
            postgres += int(values[13]) + int(values[14])
    return {"machine": (user + nice + system + irq + softirq) / tick,
            "postgres": postgres / tick}


def _name_of(pid: str) -> str:
    try:
        text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return text[text.index("(") + 1:text.rindex(")")]


def _worker_figures(folder: str | None) -> dict[str, float]:
    total = {"statements": 0.0, "transactions": 0.0, "sent": 0.0}
    if folder:
        for f in pathlib.Path(folder).glob("*.json"):
            data = json.loads(f.read_text())
            for k in total:
                total[k] += data[k]
    return total


def _counted(execute: Any, counting: Counting) -> Any:
    def wrapped(work: Any) -> Any:
        follow = execute(work)
        counting.messages += len(follow)
        return follow

    return wrapped


def measure(n: int, shape: str, mode: str, workers: int = 2,
            phases: tuple[str, ...] = PHASES, analyze: bool = False,
            vacuum: bool = False) -> dict[str, Any]:
    """One stack of ``n`` resources in ``shape`` created, updated and deleted (``phases``:
    the first of them, in that order) in a fresh process on a fresh database
    (``distributed``: PostgreSQL, Redis and ``workers`` worker processes); returns the
    phases' figures and the peak memory (MiB) of every process. ``analyze``: PostgreSQL's
    figures are taken (ANALYZE) before each phase after the first, as autovacuum would on a
    live database; untimed. Without it, the benchmark's databases are never analysed.
    ``vacuum``: VACUUM ANALYZE instead (the dead row versions cleared as well)."""
    phases = tuple(p for p in PHASES if p in phases)
    with tempfile.TemporaryDirectory() as folder:
        cluster = None
        if mode == "embedded":
            url, broker = f"sqlite:///{folder}/bench.db", "-"
        else:
            sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
            from distributed import start_cluster

            url, broker, cluster = start_cluster(folder, workers)
        try:
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(n), shape, mode, url, broker,
                 "--phases", *phases],
                check=True, capture_output=True, text=True,
                env={**os.environ, "PYTHONPATH": os.getcwd(),
                     **({"CONVERGENCE_STATS_DIR": str(cluster.stats)} if cluster else {}),
                     **({"CONVERGENCE_BENCH_ANALYZE": "vacuum" if vacuum else "1"}
                        if analyze or vacuum else {})},
            ).stdout
            report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
            report["peaks"] = [report["peak_mib"], *(cluster.peaks() if cluster else [])]
        finally:
            if cluster is not None:
                cluster.stop()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["wide", "chain", "layered"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--mode", choices=["embedded", "distributed"], default="embedded")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES),
                        help="create alone, or create and update: the rest are not run")
    parser.add_argument("--analyze", action="store_true",
                        help="PostgreSQL: ANALYZE before each phase after the first")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        n, shape, mode, url, broker = args.child
        run_child(int(n), shape, mode, url, None if broker == "-" else broker,
                  tuple(args.phases))
        return
    print(f"mode: {args.mode}")
    print(f"{'shape':8} {'size':>6} {'phase':7} {'status':16} {'wall s':>7} {'res/s':>8} "
          f"{'stmt/res':>8} {'txn/res':>7} {'msg/res':>7} {'peak MiB':>8}")
    for shape in args.shapes:
        for n in args.sizes:
            report = measure(n, shape, args.mode, args.workers, tuple(args.phases),
                             args.analyze)
            peaks = "/".join(f"{p:.0f}" for p in report["peaks"])
            for r in report["results"]:
                print(f"{shape:8} {n:>6} {r['phase']:7} {r['status']:16} {r['wall']:>7.2f} "
                      f"{n / r['wall']:>8.0f} {r['statements'] / n:>8.2f} "
                      f"{r['transactions'] / n:>7.3f} {r['messages'] / n:>7.3f} {peaks:>8}")


if __name__ == "__main__":
    main()
