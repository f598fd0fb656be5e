"""A million resources in one stack: create, update-all and delete at growing sizes, and
whether the cost per resource stays flat; one run prints it all.

    python benchmarks/million.py                                # 10K, 100K, 1M; both tiers
    python benchmarks/million.py --sizes 10000 100000 --modes embedded --shapes wide
    python benchmarks/million.py --sizes --chain 1000           # hop latency only
    python benchmarks/million.py --sizes 1000000 --shapes layered --phases create
    python benchmarks/million.py --modes distributed --analyze  # PostgreSQL analysed
    python benchmarks/million.py --modes distributed --vacuum   # ... and vacuumed

Each size, shape and tier runs in a fresh process on a fresh database
(:func:`engine_scale.measure`): the embedded tier on SQLite in the process itself, the
distributed one on PostgreSQL and Redis with ``--workers`` worker processes. Shapes: ``wide``,
``layered`` (10 layers, each resource on two of the layer before), ``group`` (one
``OS::Heat::ResourceGroup`` of every resource) and ``groups`` (groups of 1,000). Per phase: wall
seconds, resources per second, the client process's CPU seconds (embedded: the whole engine),
the whole machine's CPU seconds and PostgreSQL's share of them (what a million must fit in: two
cores give 600 CPU seconds in five minutes), SQL statements and transactions per resource (every
process), and the peak resident memory of every process. Then, per phase, the cost per resource
of each size over the size before it (1.0: linear), by wall time and by the client's CPU time
(on a machine that is busy with other work the wall figures swell and the CPU ones do not;
embedded, the client's CPU is the whole engine's), and with ``--chain N`` the time per hop of an
N-long chain.
"""

from __future__ import annotations

import argparse
import itertools
import pathlib
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from engine_scale import measure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10000, 100000, 1000000],
                        help="none: the chain alone")
    parser.add_argument("--shapes", nargs="+", default=["wide", "layered"])
    parser.add_argument("--modes", nargs="+", choices=["embedded", "distributed"],
                        default=["embedded", "distributed"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--phases", nargs="+", choices=["create", "update", "delete"],
                        default=["create", "update", "delete"],
                        help="create alone, or create and update: the rest are not run")
    parser.add_argument("--analyze", action="store_true",
                        help="PostgreSQL: ANALYZE before each phase after the first, as "
                             "autovacuum would (untimed)")
    parser.add_argument("--vacuum", action="store_true",
                        help="PostgreSQL: VACUUM ANALYZE before each phase after the first, as "
                             "autovacuum would (untimed)")
    parser.add_argument("--chain", type=int, default=1000,
                        help="the length of the chain timed hop by hop (0: none)")
    args = parser.parse_args()
    print(f"{'tier':11} {'shape':8} {'size':>8} {'phase':7} {'status':16} {'wall s':>8} "
          f"{'res/s':>7} {'cpu s':>7} {'all cpu':>8} {'pg cpu':>7} {'stmt/res':>8} "
          f"{'txn/res':>7} {'peak MiB':>14}",
          flush=True)
    figures: dict[tuple[str, str, int, str], float] = {}
    cpus: dict[tuple[str, str, int, str], float] = {}
    for mode in args.modes:
        for shape in args.shapes:
            for n in args.sizes:
                report = measure(n, shape, mode, args.workers, tuple(args.phases),
                                 args.analyze, args.vacuum)
                peaks = "/".join(f"{p:.0f}" for p in report["peaks"])
                for r in report["results"]:
                    figures[mode, shape, n, r["phase"]] = r["wall"]
                    cpus[mode, shape, n, r["phase"]] = r["cpu"]
                    print(f"{mode:11} {shape:8} {n:>8} {r['phase']:7} {r['status']:16} "
                          f"{r['wall']:>8.2f} {n / r['wall']:>7.0f} {r['cpu']:>7.1f} "
                          f"{r['machine_cpu']:>8.1f} {r['postgres_cpu']:>7.1f} "
                          f"{r['statements'] / n:>8.2f} {r['transactions'] / n:>7.3f} "
                          f"{peaks:>14}", flush=True)
    sizes = sorted(args.sizes)
    for label, table in (("wall", figures), ("client CPU", cpus)) if len(sizes) > 1 else ():
        print(f"\n{label} per resource, each size over the one before (1.0: linear)")
        for mode in args.modes:
            for shape in args.shapes:
                for phase in args.phases:
                    shown = "  ".join(
                        f"{_k(b)}/{_k(a)} "
                        f"{_ratio(table, (mode, shape, a, phase), (mode, shape, b, phase)):.2f}"
                        for a, b in itertools.pairwise(sizes))
                    print(f"{mode:11} {shape:8} {phase:7} {shown}")
    if args.chain:
        print(f"\na chain of {args.chain}: time per hop (create)")
        for mode in args.modes:
            report = measure(args.chain, "chain", mode, args.workers, ("create",))
            wall = report["results"][0]["wall"]
            print(f"{mode:11} {wall:.2f} s, {wall / args.chain * 1000:.2f} ms per hop",
                  flush=True)


def _k(n: int) -> str:
    return f"{n // 1000}K" if n >= 1000 else str(n)


def _ratio(figures: dict[Any, float], small: Any, big: Any) -> float:
    return (figures[big] / big[2]) / (figures[small] / small[2])


if __name__ == "__main__":
    main()
