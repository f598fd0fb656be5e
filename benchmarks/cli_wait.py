"""What following a request from the command line costs: ``convergence stack create --wait``,
``update --wait`` and ``delete --wait`` against the engine's own time for the same stack.

    python benchmarks/cli_wait.py                              # 10,000 resources, layered
    python benchmarks/cli_wait.py --sizes 1000 10000 100000
    python benchmarks/cli_wait.py --sizes 10000 --modes embedded   # skip the API process
    python benchmarks/cli_wait.py --repeats 3                  # medians of three rounds

For each size N, a stack of N no-op resources (``OS::Heat::None``, shaped as
``benchmarks/engine_scale.py`` makes them; ``update`` changes every resource's value) goes
through create, update and delete three ways, each on a fresh SQLite file:

- ``engine``: ``engine_scale.py``'s own run of the three requests (one process calling the use
  cases and ``running.wait_for_stack``, no progress shown): the reference;
- ``embedded``: ``python -m convergence stack create|update|delete ... --wait`` as a fresh
  process per command, the database named by ``CONVERGENCE_DATABASE_URL`` (the default mode:
  the work runs in the command's process, which shows the progress as it goes);
- ``remote``: the same commands pointed at ``convergence api`` (a process of its own, its
  in-process dispatcher doing the work) with ``CONVERGENCE_URL``; the command follows the
  stack's progress stream. The server's own time for each request (its first event to its
  last, read from the API's database afterwards) is printed beside it.

The commands' output is a pipe, so their progress comes as plain lines: the last one is
printed, to show the counts it ended with. Wall times are the whole command, the interpreter's
start included (with its imports' bytecode cached, as an installed package has it); the
ratio is the command's time over the engine's. Templates this big are past
the default size limits: the commands and the API run with ``CONVERGENCE_MAX_TEMPLATE_BYTES``
and ``CONVERGENCE_MAX_REQUEST_BYTES`` raised.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from engine_scale import PHASES, template  # noqa: E402

BIG = str(1 << 30)  # bytes: the size limits, out of the way


# Compiled bytecode, cached across the benchmark's commands as an installed package has it
# (``PYTHONDONTWRITEBYTECODE`` would have every command compile its imports again).
PYCACHE = Path(tempfile.gettempdir()) / "convergence-cli-wait-pycache"


def env_for(folder: Path, url: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(PYCACHE),
           "CONVERGENCE_DATABASE_URL": f"sqlite:///{folder / 'bench.db'}",
           "CONVERGENCE_DATA_DIR": str(folder / "data"), "CONVERGENCE_PROJECT_ID": "bench",
           "CONVERGENCE_MAX_TEMPLATE_BYTES": BIG, "CONVERGENCE_MAX_REQUEST_BYTES": BIG,
           "PYTHONPATH": str(HERE.parent)}
    for name in ("CONVERGENCE_BROKER_URL", "CONVERGENCE_URL", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    if url is not None:
        env["CONVERGENCE_URL"] = url
        env["CONVERGENCE_DATABASE_URL"] = "sqlite:////nonexistent/never.db"  # never opened
    return env


def engine_times(n: int, shape: str) -> dict[str, float]:
    """``engine_scale.py``'s wall seconds per phase, in a fresh process and database."""
    with tempfile.TemporaryDirectory(prefix="cli-wait-engine-") as folder:
        out = subprocess.run(
            [sys.executable, str(HERE / "engine_scale.py"), "--child", str(n), shape,
             "embedded", f"sqlite:///{folder}/bench.db", "-"],
            check=True, capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": str(HERE.parent)}).stdout
    report = json.loads(out.strip().splitlines()[-1])
    for r in report["results"]:
        if not r["status"].endswith("_COMPLETE"):
            raise SystemExit(f"engine {r['phase']}: {r['status']}")
    return {r["phase"]: float(r["wall"]) for r in report["results"]}


def commands(folder: Path) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "convergence", "stack"]
    return {"create": [*cli, "create", "s", "-t", str(folder / "a.json"), "--wait"],
            "update": [*cli, "update", "s", "-t", str(folder / "b.json"), "--wait"],
            "delete": [*cli, "delete", "s", "--yes", "--wait"]}


def cli_times(folder: Path, env: dict[str, str]) -> dict[str, tuple[float, str]]:
    """Wall seconds of each command (the templates in ``folder``), and the last progress
    line it printed."""
    found: dict[str, tuple[float, str]] = {}
    for phase, argv in commands(folder).items():
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv[2:])} exited {done.returncode}:\n"
                             f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        shown = [line for line in (done.stdout + done.stderr).splitlines()
                 if line.startswith("s: ")]
        found[phase] = (wall, shown[-1] if shown else "(no progress line)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def api(folder: Path) -> Iterator[str]:
    """``convergence api`` on a fresh SQLite file in ``folder``; yields its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = folder / "api.log"
    with log.open("wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "convergence", "api", "--port",
                                   str(port)], env=env_for(folder), stdout=out,
                                  stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the API did not start:\n" + log.read_text())
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def server_times(database: Path) -> dict[str, float]:
    """Per request, the seconds from the stack's first event to its last (the API's
    database, read after the run): the server's own time for it."""
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT generation, min(created_at), max(created_at) FROM events "
                          "WHERE resource_type = 'OS::Heat::Stack' GROUP BY generation "
                          "ORDER BY generation").fetchall()
    return {phase: hi - lo for phase, (_, lo, hi) in zip(PHASES, rows, strict=False)}


def warm_up() -> None:
    """One embedded command first, so that the bytecode of what the commands import is
    compiled before any is timed."""
    with tempfile.TemporaryDirectory(prefix="cli-wait-warm-") as folder:
        subprocess.run([sys.executable, "-m", "convergence", "stack", "list"],
                       env=env_for(Path(folder)), capture_output=True, check=True)


Run = tuple[dict[str, float], dict[str, tuple[float, str]], dict[str, tuple[float, str]],
            dict[str, float]]
"""One round: the engine's, the embedded commands', the remote commands', the server's."""


def run_size(n: int, shape: str, modes: list[str], repeats: int) -> None:
    """``repeats`` rounds, one after the other; each figure printed is its median (a ratio:
    the median of each round's own)."""
    rounds = [one_round(n, shape, modes) for _ in range(repeats)]
    commands = [("embedded", [r[1] for r in rounds]), ("remote", [r[2] for r in rounds])]
    for phase in PHASES:
        engines = [r[0][phase] for r in rounds]
        line = f"{n:>7} {phase:7} {statistics.median(engines):>8.2f}"
        for _, runs in commands:
            walls = [run[phase][0] for run in runs if phase in run]
            if walls:
                ratios = [w / e for w, e in zip(walls, engines, strict=True)]
                line += f" {statistics.median(walls):>9.2f} {statistics.median(ratios):>6.2f}"
            else:
                line += f" {'-':>9} {'-':>6}"
        servers = [r[3][phase] for r in rounds if phase in r[3]]
        line += f" {statistics.median(servers):>9.2f}" if servers else f" {'-':>9}"
        print(line)
    for label, runs in commands:
        for phase, (_, shown) in runs[-1].items():
            print(f"        {label} {phase}: {shown}")
    sys.stdout.flush()


def one_round(n: int, shape: str, modes: list[str]) -> Run:
    with tempfile.TemporaryDirectory(prefix="cli-wait-") as name:
        folder = Path(name)
        (folder / "a.json").write_text(template(n, shape, "a"))
        (folder / "b.json").write_text(template(n, shape, "b"))
        engine = engine_times(n, shape)
        embedded: dict[str, tuple[float, str]] = {}
        remote: dict[str, tuple[float, str]] = {}
        server: dict[str, float] = {}
        for mode in modes:
            (folder / mode).mkdir()
        if "embedded" in modes:
            embedded = cli_times(folder, env_for(folder / "embedded"))
        if "remote" in modes:
            with api(folder / "remote") as url:
                remote = cli_times(folder, env_for(folder / "remote", url))
            server = server_times(folder / "remote" / "bench.db")
    return engine, embedded, remote, server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000])
    parser.add_argument("--shape", choices=["wide", "chain", "layered"], default="layered")
    parser.add_argument("--modes", nargs="+", choices=["embedded", "remote"],
                        default=["embedded", "remote"])
    parser.add_argument("--repeats", type=int, default=1,
                        help="Rounds per size; the figures are their medians (the ratio too, "
                             "of each round's own pair).")
    args = parser.parse_args()
    warm_up()
    print(f"shape: {args.shape}; seconds of wall time; ratio: the command's over the engine's")
    print(f"{'size':>7} {'phase':7} {'engine':>8} {'embedded':>9} {'ratio':>6} {'remote':>9} "
          f"{'ratio':>6} {'server':>9}")
    for n in args.sizes:
        run_size(n, args.shape, args.modes, args.repeats)


if __name__ == "__main__":
    main()
