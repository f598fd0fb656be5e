"""The autoscaler storm: how soon a group converges after 50 overlapping count changes.

    python benchmarks/storm.py                                  # embedded (SQLite)
    python benchmarks/storm.py --mode distributed --workers 2   # PostgreSQL + Redis
    python benchmarks/storm.py --runs 5 --seed 1                # seeds 1..5

The distributed mode's Redis database index is ``--redis-db`` (9 by default), not the 14 that
``distributed.py`` gives the other benchmarks: two clusters on one index take each other's
messages (a worker of one runs, against its own database, the work of the other, which is
then lost), which shows as stuck or slow traversals that are no fault of the engine.

Starts ``convergence api`` as a real process on a loopback port (embedded: a SQLite file of
its own, the API steps the work on its in-process dispatcher; distributed: a fresh PostgreSQL
database, Redis and N ``convergence worker`` processes, see ``distributed.py``). Then runs the
storm of ``tests/storm.py``: a group of ``OS::Heat::TestResource`` members m0..m39 driven by a
``count`` parameter (conditions), created with 20; ``--clients`` clients send ``--requests``
PATCHes of the count (random in 0..40, seeded) over ``--seconds``; then the stack is watched
until it is terminal at its last generation.

Printed per run: requests accepted, the last generation and its count, seconds from the last
answer to the stack seen converged (the requirement: 10 s embedded, 20 s distributed),
entities created against the most the requests required, and what is wrong with the end state
(nothing, when it is the last accepted request's and the events are a faithful ledger of the
entities, ``tests/ledger.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import statistics
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # distributed.py, a sibling script
sys.path.insert(0, str(HERE.parent))  # the storm driver, shared with the tests
from distributed import start_api  # noqa: E402

from tests import storm  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["embedded", "distributed"], default="embedded")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--redis-db", type=int, default=9,
                        help="Redis database index of the distributed mode (emptied)")
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--runs", type=int, default=1, help="storms, seeds seed, seed+1, ...")
    parser.add_argument("--requests", type=int, default=storm.REQUESTS)
    parser.add_argument("--clients", type=int, default=storm.CLIENTS)
    parser.add_argument("--seconds", type=float, default=storm.SPREAD_SECONDS)
    parser.add_argument("--timeout", type=float, default=300,
                        help="give up on a stack not converged after this")
    parser.add_argument("--keep", action="store_true",
                        help="keep the folder (logs, SQLite file) and the PostgreSQL database")
    args = parser.parse_args()
    tails: list[float] = []
    failures = 0
    kept = contextlib.nullcontext(tempfile.mkdtemp(prefix="storm-")) if args.keep else None
    with kept or tempfile.TemporaryDirectory() as folder:
        if args.keep:
            print(f"kept in {folder}")
        workers = None
        if args.mode == "embedded":
            url, broker = f"sqlite:///{folder}/bench.db", None
        else:
            import distributed

            distributed.REDIS_DB = args.redis_db  # read by start_cluster
            url, broker, workers = distributed.start_cluster(folder, args.workers)
        api = None
        try:
            api, base = start_api(folder, url, broker)
            print(f"mode: {args.mode}" + (f" ({args.workers} workers, Redis db {args.redis_db})"
                                           if workers else "")
                  + f", {args.requests} PATCHes from {args.clients} clients over "
                  f"{args.seconds:g} s, {storm.MEMBERS} possible members, {storm.INITIAL} "
                  "at first")
            for seed in range(args.seed, args.seed + args.runs):
                result = storm.run_storm(base, url, seed=seed, requests=args.requests,
                                         clients=args.clients, seconds=args.seconds,
                                         timeout=args.timeout)
                wrong = storm.problems(result)
                failures += bool(wrong)
                tails.append(result.tail_seconds)
                print(f"\nseed {seed}:\n{storm.summary(result)}")
                print("end state: " + ("as the last accepted request" if not wrong
                                       else "WRONG\n  " + "\n  ".join(wrong)))
        finally:
            if api is not None:
                api.terminate()
                api.wait(30)
            if workers is not None:
                workers.stop(keep_database=args.keep)
                if args.keep:
                    print(f"kept database {workers.database}")
    if len(tails) > 1:
        print(f"\nlast answer -> converged over {len(tails)} runs: median "
              f"{statistics.median(tails):.2f} s, max {max(tails):.2f} s; runs with a wrong "
              f"end state or errors: {failures}")


if __name__ == "__main__":
    main()
