"""Throughput under load: many stacks created at once by concurrent clients, against one
stack of the same total size, through the API.

    python benchmarks/many_stacks.py                         # 100 x 1,000 by 20 clients
    python benchmarks/many_stacks.py --mode distributed      # PostgreSQL, Redis, 2 workers
    python benchmarks/many_stacks.py --stacks 20 --size 500 --clients 5

Starts ``convergence api`` as a real process (embedded: a SQLite file of its own, the API
steps the work itself; distributed: a fresh PostgreSQL database, Redis and ``--workers``
worker processes, see ``distributed.py``). First ``--clients`` threads create ``--stacks``
stacks of ``--size`` no-op resources between them (``POST /v1/{tenant}/stacks``, each client
its share, one after the other) and the time until every stack is ``CREATE_COMPLETE`` is
taken; then, on a fresh database, one stack of ``--stacks`` x ``--size`` resources. Printed:
both times and their ratio (the requirement: 1.5 at most), and the stacks that did not
complete, if any.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from api_show import free_port
from engine_scale import template

TENANT = "bench"
LIMITS = {"CONVERGENCE_MAX_TEMPLATE_BYTES": str(1 << 30),
          "CONVERGENCE_MAX_REQUEST_BYTES": str(1 << 30)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stacks", type=int, default=100)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--mode", choices=["embedded", "distributed"], default="embedded")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    many = run(args, [(f"s{i}", args.size) for i in range(args.stacks)], args.clients)
    print(f"{args.mode}: {args.stacks} stacks of {args.size} by {args.clients} clients: "
          f"{many:.1f} s", flush=True)
    one = run(args, [("one", args.stacks * args.size)], 1)
    print(f"{args.mode}: one stack of {args.stacks * args.size}: {one:.1f} s")
    print(f"ratio: {many / one:.2f}")


def run(args: argparse.Namespace, stacks: list[tuple[str, int]], clients: int) -> float:
    """Seconds from the first request until every stack is complete, on a fresh server."""
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, **LIMITS}
        cluster = None
        if args.mode == "embedded":
            env["CONVERGENCE_DATABASE_URL"] = f"sqlite:///{folder}/api.db"
            env.pop("CONVERGENCE_BROKER_URL", None)
        else:
            from distributed import start_cluster

            url, broker, cluster = start_cluster(folder, args.workers, extra_env=LIMITS)
            env.update(CONVERGENCE_DATABASE_URL=url, CONVERGENCE_BROKER_URL=broker)
        port = free_port()
        log = Path(folder, "api.log").open("wb")  # noqa: SIM115 - lives with the server
        server = subprocess.Popen([sys.executable, "-m", "convergence", "api", "--port",
                                   str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            _ready(base)
            texts = {name: template(n, "wide", "a") for name, n in stacks}
            ids: dict[str, str] = {}
            shares = [stacks[i::clients] for i in range(clients)]
            start = time.perf_counter()
            threads = [threading.Thread(target=_create, args=(base, share, texts, ids))
                       for share in shares]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            left = _wait(base, ids)
            wall = time.perf_counter() - start
            if left or len(ids) != len(stacks):
                print(f"not complete: {sorted(left)[:5]} ({len(left)}), "
                      f"accepted {len(ids)} of {len(stacks)}")
            return wall
        finally:
            server.terminate()
            server.wait(60)
            if cluster is not None:
                cluster.stop()


def _ready(base: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/healthz").status_code == 200:
                return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def _create(base: str, share: list[tuple[str, int]], texts: dict[str, str],
            ids: dict[str, str]) -> None:
    with httpx.Client(base_url=base, timeout=600) as client:
        for name, _ in share:
            body = {"stack_name": name, "template": json.loads(texts[name])}
            answer = client.post(f"/v1/{TENANT}/stacks", json=body)
            answer.raise_for_status()
            ids[name] = answer.json()["stack"]["id"]


def _wait(base: str, ids: dict[str, str]) -> set[str]:
    """Until every stack is complete (or failed, or 2 hours passed), looking at the stack
    list twice a second (one request, however many stacks); the ones that are not."""
    left = set(ids)
    deadline = time.monotonic() + 7200
    with httpx.Client(base_url=base, timeout=600) as client:
        while left and time.monotonic() < deadline:
            for s in client.get(f"/v1/{TENANT}/stacks").json()["stacks"]:
                if s["stack_status"].endswith(("_COMPLETE", "_FAILED")):
                    left.discard(s["stack_name"])
            if left:
                time.sleep(0.5)
    return left


if __name__ == "__main__":
    main()
