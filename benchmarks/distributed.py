"""A throwaway distributed cluster for benchmarks: a fresh PostgreSQL database, a Redis db
index, and N ``convergence worker`` processes that export their figures to a folder.

The secrets the benchmarks store are encrypted as a deployment's are: imported, this sets
``CONVERGENCE_ENCRYPTION_KEYS`` (unless it is set) to a key of this run, which every process
started with this environment shares; a benchmark's own runtime takes
:func:`encryption_keys`."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg2
import redis
from cryptography.fernet import Fernet

PG_ADMIN = os.environ.get("CONVERGENCE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("CONVERGENCE_BENCH_REDIS", "redis://127.0.0.1:6379")
REDIS_DB = 14
PR_SET_PDEATHSIG = 1  # prctl(2)
os.environ.setdefault("CONVERGENCE_ENCRYPTION_KEYS", Fernet.generate_key().decode())


def encryption_keys() -> tuple[str, ...]:
    """The keys of this run (``CONVERGENCE_ENCRYPTION_KEYS``), for a runtime of its own."""
    return tuple(k for k in os.environ["CONVERGENCE_ENCRYPTION_KEYS"].split(",") if k)


@dataclass
class Workers:
    database: str
    stats: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def figures(self) -> dict[str, float]:
        total: dict[str, float] = {"statements": 0, "transactions": 0, "executed": 0,
                                   "sent": 0}
        for f in self.stats.glob("*.json"):
            data = json.loads(f.read_text())
            for k in total:
                total[k] += data[k]
        return total

    def peaks(self) -> list[float]:
        return [json.loads(f.read_text())["peak_mib"] for f in sorted(self.stats.glob("*.json"))]

    def stop(self, keep_database: bool = False) -> None:
        for p in self.processes:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.processes:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if keep_database:
            return
        conn = psycopg2.connect(PG_ADMIN)
        conn.autocommit = True
        conn.cursor().execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
        conn.close()


def start_cluster(folder: str, workers: int, extra_env: dict[str, str] | None = None,
                  concurrency: int = 1) -> tuple[str, str, Workers]:
    from convergence.store.migrate import upgrade

    database = f"convergence_bench_{uuid.uuid4().hex[:8]}"
    conn = psycopg2.connect(PG_ADMIN)
    conn.autocommit = True
    conn.cursor().execute(f'CREATE DATABASE "{database}"')
    conn.close()
    url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg2://") + \
        f"/{database}"
    upgrade(url)
    broker = f"{REDIS}/{REDIS_DB}"
    redis.Redis.from_url(broker).flushdb()
    stats = Path(folder) / "stats"
    stats.mkdir()
    env = {**os.environ, "CONVERGENCE_DATABASE_URL": url, "CONVERGENCE_BROKER_URL": broker,
           "CONVERGENCE_STATS_DIR": str(stats), "CONVERGENCE_POLL_SECONDS": "0.2",
           **(extra_env or {})}
    handle = Workers(database, stats)
    for i in range(workers):
        log = open(Path(folder) / f"worker{i}.log", "wb")  # noqa: SIM115 - lives with the worker
        handle.processes.append(subprocess.Popen(
            [sys.executable, "-m", "convergence", "worker", "--concurrency", str(concurrency),
             "--loglevel", "warning", "--hostname", f"bench{i}-{database}@%h"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_die_with_parent))
    _wait_ready(broker, workers, database)
    return url, broker, handle


def _die_with_parent() -> None:
    """In a worker before it starts: SIGTERM when the benchmark that started it dies, so a
    killed run leaves no worker behind to take the next run's messages off the shared
    queues (and run them against a database that is gone: the next run stalls)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _wait_ready(broker: str, count: int, database: str) -> None:
    """Until this cluster's ``count`` workers answer. Any other worker on the broker (left
    by an earlier run) is told to shut down first: it would take this cluster's work."""
    from convergence.dispatch.celery_dispatch import make_celery
    from convergence.settings import Settings

    app = make_celery(Settings(database_url="sqlite://", broker_url=broker))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        names = [name for reply in app.control.ping(timeout=0.5) or [] for name in reply]
        strays = [n for n in names if database not in n]
        if strays:
            print(f"stopping workers of an earlier run: {', '.join(strays)}", file=sys.stderr)
            app.control.shutdown(destination=strays)
            continue
        if len(names) >= count:
            return
    raise RuntimeError("workers did not start")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_api(folder: str, url: str, broker: str | None,
              extra_env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """A ``convergence api`` process on a free loopback port (embedded when ``broker`` is
    None: it runs the steps itself); returns it and its base URL once it answers."""
    port = free_port()
    env = {**os.environ, "CONVERGENCE_DATABASE_URL": url,
           "CONVERGENCE_DATA_DIR": f"{folder}/data", **(extra_env or {})}
    env.pop("CONVERGENCE_BROKER_URL", None)
    if broker:
        env["CONVERGENCE_BROKER_URL"] = broker
    log = Path(folder, "api.log").open("wb")  # noqa: SIM115 - lives with the server
    proc = subprocess.Popen([sys.executable, "-m", "convergence", "api", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the API did not start:\n" + Path(folder, "api.log").read_text())
        time.sleep(0.1)
