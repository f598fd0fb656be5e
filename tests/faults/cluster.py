"""The fault environment: private PostgreSQL and Redis, N ``convergence worker`` processes kept
up by a supervisor, ``convergence api`` processes, and the faults injected into them.

Callers: the fault tests (``tests/faults/conftest.py`` builds one :class:`FaultCluster` per
run) and ``benchmarks/soak.py``. Nothing here uses pytest.

Each worker runs in a process group of its own (``start_new_session``), so that a signal to
the group reaches the Celery main process and its pool children at once, as a machine or
container crash does. A worker that dies is started again with the same Celery node name
after a short random delay (the supervisor thread), so capacity stays; one stopped on purpose
(``hold``) is left down until released.

Every fault is recorded as a :class:`Fault`: its kind, its target, when, and for a worker the
leases it held at that instant (record id -> fencing token), from which
:mod:`tests.faults.invariants` measures recovery and checks the takeover events.

Lease owners are ``"{worker id}/{random}"`` and a worker id ``"{node name}:{start}:{pid}"``,
where ``{start}`` is ``"{main pid}.{random}"``, one per start of the node; so the leases of the
worker as it runs now are those whose owner starts with ``"{node}:{main pid}."``, and those of
one process the ones whose worker id ends with ``":{pid}"``.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import DBAPIError

from convergence_simcloud.serve import CLOUD_NAME, clouds_yaml, running
from convergence_simcloud.state import Options, SimCloud
from tests.conftest_services import encryption_environ
from tests.faults.services import BlackHole, PrivatePostgres, PrivateRedis, free_port

REPO = Path(__file__).resolve().parents[2]
HOST = "faults"  # the host part of every Celery node name
DATABASE = "convergence"
READY_TIMEOUT = 60.0


@dataclass(frozen=True)
class Timing:
    """The mechanisms' clocks, as the workers and the API are given them."""

    lease: float = 30.0
    sweep: float = 5.0
    heartbeat: float = 5.0
    poll: float = 1.0
    grace: float = 10.0

    def env(self) -> dict[str, str]:
        return {"CONVERGENCE_LEASE_SECONDS": str(self.lease),
                "CONVERGENCE_SWEEP_SECONDS": str(self.sweep),
                "CONVERGENCE_HEARTBEAT_SECONDS": str(self.heartbeat),
                "CONVERGENCE_POLL_SECONDS": str(self.poll),
                "CONVERGENCE_SHUTDOWN_GRACE_SECONDS": str(self.grace)}

    @property
    def recovery(self) -> float:
        """Lease + sweep period: how long work held by a dead worker may wait, at most."""
        return self.lease + self.sweep


CI_TIMING = Timing(lease=3.0, sweep=0.5, heartbeat=1.0, poll=0.5, grace=5.0)


@dataclass
class Fault:
    """One injected fault; for a worker, the leases it held then (record id -> token)."""

    kind: str
    target: str
    at: float  # time.time()
    held: dict[int, int] = field(default_factory=dict)
    owners: dict[int, str] = field(default_factory=dict)  # record id -> lease owner
    stacks: dict[int, str] = field(default_factory=dict)  # record id -> stack id
    names: dict[int, str] = field(default_factory=dict)  # record id -> resource name


@dataclass
class WorkerProcess:
    """One ``convergence worker``: its node name, process (group leader) and log."""

    name: str
    node: str
    log: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    hold: bool = False  # stopped on purpose: the supervisor leaves it down
    frozen: bool = False
    stopping: bool = False  # SIGTERM sent: shutting down gracefully, no other fault for it

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def group(self) -> list[int]:
        """Pids of the worker's process group (the Celery main and its pool)."""
        if self.process is None:
            return []
        return process_group(self.process.pid)

    def tail(self, lines: int = 30) -> str:
        text_ = self.log.read_text(errors="replace") if self.log.exists() else ""
        exit_code = self.process.poll() if self.process is not None else None
        return f"--- {self.node} (exit {exit_code}) ---\n" + \
            "\n".join(text_.splitlines()[-lines:])


@dataclass
class ApiProcess:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        text_ = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- api {self.url} (exit {self.process.poll()}) ---\n" + \
            "\n".join(text_.splitlines()[-lines:])

    def kill(self, sig: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)
        self.process.wait()


def process_group(pgid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces, so split after the ")".
        fields = stat.rsplit(")", 1)[1].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry))
    return pids


def owner_pid(lease_owner: str) -> int | None:
    """The pid of the process a lease owner belongs to (the last part of its worker id)."""
    last = lease_owner.split("/", 1)[0].rsplit(":", 1)[-1]
    return int(last) if last.isdigit() else None


class FaultCluster:
    """Everything the fault tests and the soak run on (see the module docstring)."""

    def __init__(self, folder: Path, timing: Timing = CI_TIMING, workers: int = 3,
                 concurrency: int = 2, seed: int = 0, restart_delay: tuple[float, float] =
                 (0.2, 1.0), extra_env: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.logs = folder / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.timing = timing
        self.concurrency = concurrency
        self.random = random.Random(seed)
        self.restart_delay = restart_delay
        self.extra_env = extra_env or {}
        self.worker_count = workers
        self.workers: dict[str, WorkerProcess] = {}
        self.apis: list[ApiProcess] = []
        self.faults: list[Fault] = []
        self.kinds: Counter[str] = Counter()
        self.pg: PrivatePostgres | None = None
        self.redis: PrivateRedis | None = None
        self.database_url = ""
        self._db: Engine | None = None
        self._stop = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._lock = threading.RLock()
        self.api: ApiProcess | None = None
        # A simulated cloud served by this process, which every worker and API reaches as
        # its cloud (OS_CLOUD), for stacks of OpenStack resource types.
        self.cloud: SimCloud | None = None
        self.cloud_url = ""
        self._serving = contextlib.ExitStack()

    # life -----------------------------------------------------------------------------------
    def start(self) -> None:
        from convergence.store.migrate import upgrade

        self.pg = PrivatePostgres()
        self.pg.start()
        self.database_url = self.pg.create_database(DATABASE)
        upgrade(self.database_url)  # as `convergence db upgrade`; workers migrate nothing
        self.redis = PrivateRedis(self.folder)
        self.redis.start()
        self.cloud = SimCloud(options=Options(build_seconds=0.5, volume_seconds={
            "create": 0.5, "attach": 0.2, "detach": 0.2, "delete": 0.2, "snapshot": 0.5}))
        self.cloud_url = self._serving.enter_context(running(self.cloud))
        clouds = self.folder / "clouds.yaml"
        clouds.write_text(clouds_yaml(self.cloud_url))
        self.extra_env = {"OS_CLOUD": CLOUD_NAME, "OS_CLIENT_CONFIG_FILE": str(clouds),
                          **self.extra_env}
        started = [self.start_worker(f"w{i}") for i in range(self.worker_count)]
        self.wait_ready(started)
        self._supervisor = threading.Thread(target=self._supervise, name="supervisor",
                                            daemon=True)
        self._supervisor.start()
        self.api = self.start_api("main")

    def close(self) -> None:
        self._stop.set()
        if self._supervisor is not None:
            self._supervisor.join(5)
        for api in self.apis:
            if api.process.poll() is None:
                api.kill(signal.SIGTERM)
        for w in self.workers.values():
            if w.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(w.process.pid, signal.SIGCONT)
                    os.killpg(w.process.pid, signal.SIGKILL)
                w.process.wait()
        if self._db is not None:
            self._db.dispose()
        if self.redis is not None:
            self.redis.kill()
        if self.pg is not None:
            self.pg.destroy()
        self._serving.close()

    @property
    def db(self) -> Engine:
        if self._db is None:
            self._db = create_engine(self.database_url, pool_pre_ping=True, pool_size=4)
        return self._db

    def query(self, sql: str, **params: Any) -> list[Any]:
        """Rows of ``sql``, retried while the database is down (a fault may be under way)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                with self.db.begin() as conn:
                    return list(conn.execute(text(sql), params))
            except DBAPIError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def env(self, **extra: str) -> dict[str, str]:
        assert self.redis is not None
        return {**os.environ,
                "CONVERGENCE_DATABASE_URL": self.database_url,
                "CONVERGENCE_BROKER_URL": self.redis.url,
                **encryption_environ(),
                "CONVERGENCE_BATCH_SIZE": "50",
                "PYTHONUNBUFFERED": "1",
                **self.timing.env(), **self.extra_env, **extra}

    # workers --------------------------------------------------------------------------------
    def start_worker(self, name: str, **extra_env: str) -> WorkerProcess:
        with self._lock:
            worker = self.workers.get(name)
            if worker is None:
                worker = WorkerProcess(name, f"{name}@{HOST}", self.logs / f"{name}.log",
                                       self.env(**extra_env))
                self.workers[name] = worker
            worker.hold = False
            worker.frozen = False
            self._spawn(worker)
            return worker

    def _spawn(self, worker: WorkerProcess) -> None:
        worker.starts += 1
        worker.stopping = False
        with worker.log.open("ab") as out:
            out.write(f"=== start {worker.starts} at {time.time():.3f}\n".encode())
            out.flush()
            worker.process = subprocess.Popen(
                [sys.executable, "-m", "convergence", "worker", "--concurrency",
                 str(self.concurrency), "--loglevel", "info", "--hostname", worker.node],
                env=worker.env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)

    def wait_ready(self, workers: list[WorkerProcess]) -> None:
        """Until every worker answers a ping through the broker."""
        from convergence.dispatch.celery_dispatch import CeleryDispatcher
        from convergence.settings import Settings

        assert self.redis is not None
        dispatcher = CeleryDispatcher(Settings(database_url=self.database_url,
                                               broker_url=self.redis.url))
        try:
            deadline = time.monotonic() + READY_TIMEOUT
            waiting = {w.node for w in workers}
            while waiting:
                for w in workers:
                    if not w.alive:
                        raise RuntimeError(f"worker {w.node} exited at start\n{w.tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"workers not ready: {sorted(waiting)}\n"
                                       + self.logs_tail())
                try:
                    replies = dispatcher.app.control.ping(destination=sorted(waiting),
                                                          timeout=0.5) or []
                except Exception:  # the broker was just restarted: ask again
                    time.sleep(0.2)
                    continue
                for reply in replies:
                    waiting -= set(reply)
        finally:
            dispatcher.close()

    def _supervise(self) -> None:
        """Start again every worker that died and is not held down, after a random delay."""
        due: dict[str, float] = {}
        while not self._stop.wait(0.1):
            with self._lock:
                for w in self.workers.values():
                    if w.alive or w.hold or w.process is None:
                        due.pop(w.name, None)
                        continue
                    at = due.setdefault(w.name, time.monotonic()
                                        + self.random.uniform(*self.restart_delay))
                    if time.monotonic() >= at:
                        # Reap what is left of the group (pool children of a SIGTERM'd main).
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(w.process.pid, signal.SIGKILL)
                        self._spawn(w)
                        due.pop(w.name, None)

    def retire(self, worker: WorkerProcess) -> None:
        """Stop ``worker`` for good (SIGTERM, then SIGKILL to what is left of its group)."""
        with self._lock:
            worker.hold = True
        if worker.frozen:
            self.thaw(worker)
        if worker.process is not None:
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    worker.process.wait(self.timing.grace + 30)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.process.pid, signal.SIGKILL)
            worker.process.wait()

    def leases_of(self, worker: WorkerProcess) -> list[Any]:
        """Records whose lease a process of ``worker`` holds now."""
        return self.held_leases(worker)

    def live_workers(self) -> list[WorkerProcess]:
        return [w for w in self.workers.values()
                if w.alive and not (w.frozen or w.hold or w.stopping)]

    def pick_worker(self) -> WorkerProcess:
        with self._lock:
            candidates = self.live_workers()
            if not candidates:
                raise RuntimeError("no live worker to pick")
            return self.random.choice(candidates)

    def held_leases(self, worker: WorkerProcess, pids: list[int] | None = None,
                    whole: bool = True, main: int | None = None) -> list[Any]:
        """Records whose lease ``worker`` holds: (id, stack_id, name, fencing_token,
        lease_owner): those of its current start (pool processes that ended included) if
        ``whole``, else only those of processes ``pids``. What an earlier start of the same
        node left behind is not the current one's. ``main``: the pid of the start meant (by
        default the current one)."""
        if main is None:
            assert worker.process is not None
            main = worker.process.pid
        start = f"{worker.node}:{main}."
        processes = set(pids if pids is not None else worker.group())
        rows = self.query("SELECT id, stack_id, name, fencing_token, lease_owner FROM resources "
                          "WHERE lease_owner IS NOT NULL")
        return [r for r in rows if r.lease_owner.startswith(start)
                and (whole or owner_pid(r.lease_owner) in processes)]

    def record_fault(self, kind: str, target: str, held: list[Any] | None = None) -> Fault:
        fault = Fault(kind, target, time.time())
        for r in held or []:
            fault.held[int(r.id)] = int(r.fencing_token)
            fault.owners[int(r.id)] = str(r.lease_owner)
            fault.stacks[int(r.id)] = str(r.stack_id)
            fault.names[int(r.id)] = str(r.name)
        with self._lock:
            self.faults.append(fault)
            self.kinds[kind] += 1
        return fault

    # faults on workers ----------------------------------------------------------------------
    def kill9(self, worker: WorkerProcess | None = None) -> Fault:
        """SIGKILL to the worker's whole group (a crash); the supervisor starts it again."""
        with self._lock:
            worker = worker or self.pick_worker()
            assert worker.process is not None
            pids, main = worker.group(), worker.process.pid
            with contextlib.suppress(ProcessLookupError):
                os.killpg(main, signal.SIGKILL)
            worker.process.wait()
        return self.record_fault("kill -9", worker.node, self.held_leases(worker, pids,
                                                                          main=main))

    def kill9_child(self, worker: WorkerProcess | None = None,
                    pid: int | None = None) -> Fault | None:
        """SIGKILL to one pool child (``pid``, else a random one): the Celery main re-queues
        its message and lets go of its leases."""
        worker = worker or self.pick_worker()
        assert worker.process is not None
        children = [p for p in worker.group() if p != worker.process.pid]
        if not children:
            return None
        pid = pid if pid is not None else self.random.choice(children)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return self.record_fault("kill -9 pool child", f"{worker.node} pid {pid}",
                                 self.held_leases(worker, [pid], whole=False))

    def sigterm(self, worker: WorkerProcess | None = None, wait: bool = True) -> Fault:
        """SIGTERM to the Celery main (as ``docker stop`` does): the graceful path."""
        with self._lock:
            worker = worker or self.pick_worker()
            assert worker.process is not None
            held = self.held_leases(worker)
            worker.process.send_signal(signal.SIGTERM)
            worker.stopping = True
        fault = self.record_fault("SIGTERM", worker.node, held)
        if wait:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(self.timing.grace + 30)
        return fault

    def freeze(self, worker: WorkerProcess | None = None) -> Fault:
        """SIGSTOP to the worker's group; :meth:`thaw` resumes it."""
        with self._lock:
            worker = worker or self.pick_worker()
            assert worker.process is not None
            os.killpg(worker.process.pid, signal.SIGSTOP)
            worker.frozen = True
        return self.record_fault("SIGSTOP", worker.node, self.held_leases(worker))

    def thaw(self, worker: WorkerProcess) -> None:
        assert worker.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.process.pid, signal.SIGCONT)
        worker.frozen = False

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Every live worker stopped (SIGSTOP) while the block runs, which must stay well
        within the lease: the queues fill up meanwhile (a pause of the whole fleet, not a
        fault of its own)."""
        with self._lock:  # no other fault picks a worker meanwhile
            paused = [w.process.pid for w in self.live_workers() if w.process is not None]
            for pid in paused:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGSTOP)
            try:
                yield
            finally:
                for pid in paused:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGCONT)

    def pause_all(self, seconds: float) -> None:
        with self.paused():
            time.sleep(seconds)

    # faults on services ---------------------------------------------------------------------
    def restart_redis(self) -> Fault:
        assert self.redis is not None
        self.redis.restart()
        return self.record_fault("redis restart", "redis")

    def terminate_pg_backends(self) -> Fault:
        assert self.pg is not None
        n = self.pg.terminate_backends(DATABASE)
        return self.record_fault("pg_terminate_backend", f"{n} sessions")

    def restart_pg(self) -> Fault:
        assert self.pg is not None
        self.pg.restart("immediate")
        return self.record_fault("postgres restart", "postgres")

    # API processes --------------------------------------------------------------------------
    def start_api(self, name: str, **env: str) -> ApiProcess:
        port = free_port()
        log = self.logs / f"api-{name}.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "convergence", "api", "--host", "127.0.0.1",
                 "--port", str(port)],
                env=self.env(**env), cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        api = ApiProcess(f"http://127.0.0.1:{port}", process, log)
        self.apis.append(api)
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{api.url}/healthz", timeout=1).status_code == 200:
                    return api
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the API did not start\n{api.tail()}")
            time.sleep(0.1)

    @contextlib.contextmanager
    def hanging_api(self) -> Iterator[ApiProcess]:
        """An API whose broker is a black hole: a request commits, then its enqueue hangs."""
        hole = BlackHole()
        try:
            api = self.start_api(f"black-hole-{uuid.uuid4().hex[:6]}", CONVERGENCE_BROKER_URL=
                                 hole.url)
            try:
                yield api
            finally:
                if api.process.poll() is None:
                    api.kill()
        finally:
            hole.close()

    # logs -----------------------------------------------------------------------------------
    def logs_tail(self, lines: int = 30) -> str:
        parts = [w.tail(lines) for w in self.workers.values()]
        parts += [a.tail(lines) for a in self.apis]
        return "\n".join(parts)

    def grep_logs(self, needle: str) -> list[str]:
        """Lines of every worker log that contain ``needle``."""
        found = []
        for w in self.workers.values():
            if w.log.exists():
                found += [line for line in w.log.read_text(errors="replace").splitlines()
                          if needle in line]
        return found


def wait_for(predicate: Callable[[], Any], timeout: float, period: float = 0.05) -> Any:
    """``predicate()``'s first truthy value, polled; None after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(period)
