"""What following a request from the command line costs: ``convergence stack create --wait``,
``update --wait`` and ``delete --wait`` against the engine's own time for the same stack.

    python benchmarks/cli_wait.py                              # 10,000 resources, layered
    python benchmarks/cli_wait.py --sizes 1000 10000 100000
    python benchmarks/cli_wait.py --sizes 10000 --modes embedded   # skip the API process
    python benchmarks/cli_wait.py --repeats 3                  # medians of three rounds

Run from the repository's root. For each size N, a stack of N no-op resources
(``OS::Heat::None``, made by ``benchmarks/engine_scale.py``'s ``template``; ``update`` changes
every resource's value) goes through create, update and delete three ways, each on a fresh
SQLite file:

- ``engine``: ``engine_scale.measure``, the engine's own run of the three requests (a process
  calling the use cases and ``running.wait_for_stack``, no progress shown): the reference;
- ``embedded``: ``python -m convergence stack create|update|delete ... --wait`` as a fresh
  process per command, the database named by ``CONVERGENCE_DATABASE_URL`` (the default mode:
  the work runs in the command's process, which shows the progress as it goes);
- ``remote``: the same commands pointed at ``convergence api`` (a process of its own, its
  in-process dispatcher doing the work) with ``CONVERGENCE_URL``; the command follows the
  stack's progress stream.

Two tables: wall seconds, and CPU seconds (engine: its process's during the phase; embedded:
the command's process, which does the work; remote: the command's process plus what the API
process spent meanwhile). On a machine busy with other work the wall figures swell with
whatever else runs and the CPU ones do not, so the CPU ratio is the one to trust there. Each
ratio is the command's figure over the engine's; the ``server`` column is the remote request's
own wall time in the API process (its first event to its last, read from its database).

The commands' output is a pipe, so their progress comes as plain lines: the last one is
printed, to show the counts it ended with. A command's figures include the interpreter's start
(with its imports' bytecode cached, as an installed package has it). Templates this big are
past the default size limits: the commands and the API run with
``CONVERGENCE_MAX_TEMPLATE_BYTES`` and ``CONVERGENCE_MAX_REQUEST_BYTES`` raised.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from engine_scale import PHASES, measure, template  # noqa: E402

BIG = str(1 << 30)  # bytes: the size limits, out of the way
# Compiled bytecode, cached across the benchmark's commands as an installed package has it
# (``PYTHONDONTWRITEBYTECODE`` would have every command compile its imports again).
PYCACHE = Path(tempfile.gettempdir()) / "convergence-cli-wait-pycache"
MODES = ("embedded", "remote")


@dataclass(frozen=True, slots=True)
class Figure:
    wall: float
    cpu: float
    shown: str = ""  # the last progress line a command printed


@dataclass
class Round:
    engine: dict[str, Figure] = field(default_factory=dict)
    commands: dict[str, dict[str, Figure]] = field(default_factory=dict)  # mode -> phase ->
    server: dict[str, float] = field(default_factory=dict)  # phase -> the API's own wall


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


def engine_figures(n: int, shape: str) -> dict[str, Figure]:
    """``engine_scale``'s wall and CPU seconds per phase, in a fresh process and database."""
    report = measure(n, shape, "embedded")
    for r in report["results"]:
        if not r["status"].endswith("_COMPLETE"):
            raise SystemExit(f"engine {r['phase']}: {r['status']}")
    return {r["phase"]: Figure(float(r["wall"]), float(r["cpu"])) for r in report["results"]}


def commands(folder: Path) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "convergence", "stack"]
    return {"create": [*cli, "create", "s", "-t", str(folder / "a.json"), "--wait"],
            "update": [*cli, "update", "s", "-t", str(folder / "b.json"), "--wait"],
            "delete": [*cli, "delete", "s", "--yes", "--wait"]}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu(pid: int | None) -> float:
    """CPU seconds a running process spent so far (0 for none)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def command_figures(folder: Path, env: Mapping[str, str],
                    server: int | None = None) -> dict[str, Figure]:
    """Each command's wall and CPU seconds (the templates in ``folder``; ``server``: the API
    process whose CPU counts too), and the last progress line it printed."""
    found: dict[str, Figure] = {}
    for phase, argv in commands(folder).items():
        cpu = children_cpu() + process_cpu(server)
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        cpu = children_cpu() + process_cpu(server) - cpu
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv[2:])} exited {done.returncode}:\n"
                             f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        shown = [line for line in (done.stdout + done.stderr).splitlines()
                 if line.startswith("s: ")]
        found[phase] = Figure(wall, cpu, shown[-1] if shown else "(no progress line)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def api(folder: Path) -> Iterator[tuple[str, int]]:
    """``convergence api`` on a fresh SQLite file in ``folder``; yields its URL and pid."""
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
        yield url, server.pid
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


def one_round(n: int, shape: str, modes: list[str]) -> Round:
    found = Round(engine=engine_figures(n, shape))
    with tempfile.TemporaryDirectory(prefix="cli-wait-") as name:
        folder = Path(name)
        (folder / "a.json").write_text(template(n, shape, "a"))
        (folder / "b.json").write_text(template(n, shape, "b"))
        for mode in modes:
            (folder / mode).mkdir()
        if "embedded" in modes:
            found.commands["embedded"] = command_figures(folder, env_for(folder / "embedded"))
        if "remote" in modes:
            with api(folder / "remote") as (url, pid):
                found.commands["remote"] = command_figures(
                    folder, env_for(folder / "remote", url), server=pid)
            found.server = server_times(folder / "remote" / "bench.db")
    return found


def report(n: int, rounds: list[Round], modes: list[str]) -> None:
    """Each figure the median of the rounds' (a ratio: of each round's own)."""
    for what in ("wall", "cpu"):
        for phase in PHASES:
            engines = [getattr(r.engine[phase], what) for r in rounds]
            line = f"{what:4} {n:>7} {phase:7} {statistics.median(engines):>8.2f}"
            for mode in MODES:
                if mode not in modes:
                    line += f" {'-':>9} {'-':>6}"
                    continue
                mine = [getattr(r.commands[mode][phase], what) for r in rounds]
                ratios = [m / e for m, e in zip(mine, engines, strict=True)]
                line += f" {statistics.median(mine):>9.2f} {statistics.median(ratios):>6.2f}"
            if what == "wall" and "remote" in modes:
                line += f" {statistics.median([r.server[phase] for r in rounds]):>9.2f}"
            print(line)
    for mode in modes:
        for phase, figure in rounds[-1].commands[mode].items():
            print(f"     {mode} {phase}: {figure.shown}")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000])
    parser.add_argument("--shape", choices=["wide", "chain", "layered"], default="layered")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--repeats", type=int, default=1,
                        help="Rounds per size; the figures are their medians.")
    args = parser.parse_args()
    warm_up()
    print(f"shape: {args.shape}; seconds; ratio: the command's over the engine's")
    print(f"{'':4} {'size':>7} {'phase':7} {'engine':>8} {'embedded':>9} {'ratio':>6} "
          f"{'remote':>9} {'ratio':>6} {'server':>9}")
    for n in args.sizes:
        report(n, [one_round(n, args.shape, args.modes) for _ in range(args.repeats)],
               args.modes)


if __name__ == "__main__":
    main()
