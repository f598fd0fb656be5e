"""The integration tier: PostgreSQL + Redis + real ``convergence worker`` processes.

Once per run, the ``cluster`` fixture creates a database of its own on the test PostgreSQL
server and migrates it (as ``convergence db upgrade`` would), claims and empties a Redis
database index (two runs at once on one machine each get their own), starts ``WORKERS`` worker
processes and waits until each answers a ping; at the end it stops them (SIGTERM: Celery's
warm shutdown; then SIGKILL), drops the database and empties the index. Without PostgreSQL or
Redis the tier skips, or fails in CI (``tests/conftest_services.py``). The workers' logs are
shown when a stack does not finish in time.

The test side acts through ``open_runtime`` with a broker configured, exactly as the API and
the CLI do: services enqueue to Celery, and waiting polls the store. The fixtures ``rt`` and
``story`` have the embedded tier's names and meaning, so its scenarios run here unchanged
(``test_scenarios_distributed.py``). Every story gets a stack name of its own, since the
database is shared by the whole run.

``run_api`` starts a real ``convergence api`` process on a free loopback port with the cluster's
environment (so the workers run what it enqueues), for ``test_api_distributed.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from convergence.dispatch.celery_dispatch import CeleryDispatcher
from convergence.ports.views import StackView
from convergence.runtime import Runtime, open_runtime
from convergence.services import queries, running
from convergence.settings import Settings
from convergence.store.migrate import upgrade
from convergence_simcloud.serve import CLOUD_NAME, clouds_yaml
from convergence_simcloud.serve import running as serve_cloud
from convergence_simcloud.state import Options, SimCloud
from tests.conftest_services import (
    TEST_ENCRYPTION_KEYS,
    claim_redis_db,
    drop_postgres_database,
    encryption_environ,
    postgres_url,
    require_postgres,
    require_redis,
)
from tests.engine.harness import TENANT, Story

DATABASE_PREFIX = "convergence_it_"  # + a suffix of the run: runs at once do not collide
REDIS_DBS = range(11, 16)
WORKERS = 2
CONCURRENCY = 2
POLL_SECONDS = 0.5
READY_TIMEOUT = 60.0
WAIT_TIMEOUT = 180.0
CLOUD_BUILD_SECONDS = 1.0
OBSERVE_SECONDS = 1.0  # a stack that has not finished by then is stuck: fail, show the logs
REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

# Scenarios that fail here for a known reason the embedded tier cannot see (its manual clock
# stands still): expected to fail until fixed, and strict, so that the fix is noticed.
KNOWN_FAILURES: dict[str, str] = {}


@dataclass
class Worker:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- {self.name} (exit {self.process.poll()}) ---\n" + \
            "\n".join(text.splitlines()[-lines:])


@dataclass
class Cluster:
    """What the tier runs on: settings (database + broker), the workers and their logs, and
    the simulated cloud every worker reaches as its cloud (``OS_CLOUD``)."""

    settings: Settings
    env: dict[str, str]
    logs: Path
    cloud: SimCloud
    cloud_url: str
    clouds_file: Path
    workers: list[Worker] = dataclasses.field(default_factory=list)

    def start_worker(self, name: str, *extra: str) -> Worker:
        hostname = f"{name}@{socket.gethostname()}"
        log = self.logs / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "convergence", "worker", "--concurrency",
                 str(CONCURRENCY), "--loglevel", "info", "--hostname", hostname, *extra],
                env=self.env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)  # its own process group: the pool's children too
        worker = Worker(hostname, process, log)
        self.workers.append(worker)
        return worker

    def wait_ready(self, workers: list[Worker]) -> None:
        """Until every worker answers a ping through the broker."""
        dispatcher = CeleryDispatcher(self.settings)
        try:
            deadline = time.monotonic() + READY_TIMEOUT
            waiting = {w.name for w in workers}
            while waiting:
                for w in workers:
                    if w.process.poll() is not None:
                        pytest.fail(f"worker {w.name} exited at start\n{w.tail()}",
                                    pytrace=False)
                if time.monotonic() > deadline:
                    pytest.fail(f"workers not ready after {READY_TIMEOUT}s: {sorted(waiting)}\n"
                                + self.logs_tail(), pytrace=False)
                replies = dispatcher.app.control.ping(destination=sorted(waiting), timeout=0.5)
                for reply in replies or []:
                    waiting -= set(reply)
        finally:
            dispatcher.close()

    def stop(self, worker: Worker, grace: float = 30.0) -> None:
        """SIGTERM (warm shutdown), then SIGKILL to the worker's whole process group."""
        process = worker.process
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # leftovers of the pool, if any
        process.wait()

    def logs_tail(self) -> str:
        return "\n".join(w.tail() for w in self.workers)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = getattr(item, "originalname", item.name)
        if item.path.is_relative_to(HERE) and name in KNOWN_FAILURES:
            item.add_marker(pytest.mark.xfail(reason=KNOWN_FAILURES[name], strict=True))


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_postgres()
    require_redis()
    run = f"{os.getpid()}_{uuid.uuid4().hex[:6]}"
    database = DATABASE_PREFIX + run
    database_url = postgres_url(database)  # created, empty
    broker_url, release_broker = claim_redis_db(REDIS_DBS, run)
    settings = Settings(database_url=database_url, broker_url=broker_url,
                        poll_seconds=POLL_SECONDS, batch_size=50,
                        encryption_keys=TEST_ENCRYPTION_KEYS)
    env = {**os.environ,
           "CONVERGENCE_DATABASE_URL": database_url,
           "CONVERGENCE_BROKER_URL": broker_url,
           **encryption_environ(),
           "CONVERGENCE_POLL_SECONDS": str(POLL_SECONDS),
           "CONVERGENCE_BATCH_SIZE": "50",
           "PYTHONUNBUFFERED": "1"}
    logs = tmp_path_factory.mktemp("workers")
    # A cloud whose servers build in a second of real time, observed every second (stacks
    # that opt in only).
    cloud = SimCloud(options=Options(build_seconds=CLOUD_BUILD_SECONDS))
    serving = contextlib.ExitStack()
    cloud_url = serving.enter_context(serve_cloud(cloud))
    clouds_file = logs / "clouds.yaml"
    clouds_file.write_text(clouds_yaml(cloud_url))
    env.update(OS_CLOUD=CLOUD_NAME, OS_CLIENT_CONFIG_FILE=str(clouds_file),
               CONVERGENCE_OBSERVE_SECONDS=str(OBSERVE_SECONDS))
    cluster = Cluster(settings, env, logs, cloud, cloud_url, clouds_file)
    try:
        upgrade(database_url)  # as `convergence db upgrade` does; workers migrate nothing
        workers = [cluster.start_worker(f"it-{i}-{run}") for i in range(WORKERS)]
        cluster.wait_ready(workers)
        yield cluster
    finally:
        for w in cluster.workers:
            cluster.stop(w)
        release_broker()
        drop_postgres_database(database)
        serving.close()


class Poller:
    """``run(until=...)`` for a runtime whose work runs elsewhere: wait until it holds.

    Stands in for the in-process dispatcher's ``run`` in scenarios that drive a traversal
    part way (``rt.inprocess.run(until=...)``), so that they run unchanged on real workers.
    """

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def run(self, until: Callable[[], bool] | None = None, **_: object) -> bool:
        deadline = time.monotonic() + WAIT_TIMEOUT
        while until is not None and not until():
            if time.monotonic() > deadline:
                pytest.fail(f"condition not reached in {WAIT_TIMEOUT}s\n"
                            + self._cluster.logs_tail(), pytrace=False)
            time.sleep(0.05)
        return True


@dataclass
class DistributedRuntime(Runtime):
    """A ``Runtime`` sending work to the workers, with a ``Poller`` as ``inprocess``."""

    poller: Poller | None = None

    @property
    def inprocess(self) -> Poller | None:  # type: ignore[override]
        return self.poller


@pytest.fixture(scope="session")
def rt(cluster: Cluster) -> Iterator[Runtime]:
    # The test side validates templates against the cluster's cloud, as the API does.
    base = open_runtime(cluster.settings, environ={
        "OS_CLOUD": CLOUD_NAME, "OS_CLIENT_CONFIG_FILE": str(cluster.clouds_file)})
    assert isinstance(base.dispatcher, CeleryDispatcher)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    runtime = DistributedRuntime(**fields, poller=Poller(cluster))
    yield runtime
    base.dispatcher.close()
    base.store.engine.dispose()


@pytest.fixture
def story(rt: Runtime, cluster: Cluster) -> Story:
    def wait(stack_id: str) -> StackView:
        deadline = time.monotonic() + WAIT_TIMEOUT
        while True:
            stack = queries.get_stack(rt, TENANT, stack_id)
            if stack.status in running.TERMINAL and stack.observed_generation == stack.generation:
                return stack
            if time.monotonic() > deadline:
                pytest.fail(f"stack {stack.name} still {stack.stack_status} after "
                            f"{WAIT_TIMEOUT}s\n" + cluster.logs_tail(), pytrace=False)
            time.sleep(0.05)

    return Story(rt, f"stack-{uuid.uuid4().hex[:8]}", wait)


API_READY_TIMEOUT = 30.0


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ApiProcess:
    """A ``convergence api`` process on the cluster: its base URL and its log."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- api {self.url} (exit {self.process.poll()}) ---\n" + \
            "\n".join(text.splitlines()[-lines:])


@contextlib.contextmanager
def run_api(cluster: Cluster, name: str, **env: str) -> Iterator[ApiProcess]:
    """``convergence api`` on a free loopback port with the cluster's environment (PostgreSQL
    and the Redis broker: the workers run the traversals) plus ``env``; stopped on exit.

    Waits until ``/healthz`` answers; fails with the API's log when it does not start.
    """
    port = free_port()
    log = cluster.logs / f"api-{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "convergence", "api", "--host", "127.0.0.1",
             "--port", str(port)],
            env={**cluster.env, **env}, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    api = ApiProcess(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + API_READY_TIMEOUT
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{api.url}/healthz", timeout=1).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the API did not start\n{api.tail()}", pytrace=False)
            time.sleep(0.1)
        yield api
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
