"""The life of a Celery worker node, as one object (:class:`WorkerProcess`).

It holds the node's runtime in each process, the heartbeats, the sweeping, the pool watch and
the graceful stop.

Caller: ``convergence.workers.app.make_worker_app`` builds one :class:`WorkerProcess` per
worker app and connects Celery's signals and the app's tasks to its methods. It holds what
the node needs, built from the settings the entry point made once (``convergence worker``,
``workers/celery_worker.py``); nothing here reads the environment or keeps module state.

A node is a main process and, with the prefork pool (the default), pool processes forked from
it; the object is copied into each by the fork, and whatever a process builds for itself is
tagged with its pid (:class:`Steps`). Each process that runs steps has its own runtime, built
on first use (a pool process builds it when it starts, so that it heartbeats while idle), its
heartbeat and its sweeper thread. The main process of a prefork node watches its pool
(:class:`~convergence.workers.pool.PoolWatch`) and lets go of the leases of a pool process
that died.

SIGTERM (or SIGINT) to the main process is Celery's warm shutdown: no message is taken any
more, the steps in hand reach their commit point, nothing more goes on inline; after
``shutdown_grace_seconds`` the steps still running are stopped (pool processes killed, leases
revoked on threads) and the node's leases are let go of, so that other workers take the
resources over at once. SIGTERM to a pool process itself (a supervisor signalling the whole
group) works the same way for that process.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from celery import Celery

from convergence.dispatch.celery_dispatch import CeleryDispatcher, run_message
from convergence.engine.observer import ObserveLoop, Observer, observe_pass_seconds
from convergence.engine.sweeper import EXITED, STOPPING, Sweeper, SweepLoop, let_go
from convergence.ports.views import WORKER
from convergence.runtime import Runtime, open_runtime
from convergence.services import webhooks
from convergence.settings import Settings
from convergence.workers import pool
from convergence.workers.heartbeat import Heartbeat, worker_info
from convergence.workers.stats import start_exporting

log = logging.getLogger(__name__)


@dataclass
class Node:
    """The Celery node (``--hostname``) this process belongs to, its pool, and this start of
    it ("{main pid}.{random}"): set when the worker starts, before the pool forks. Every
    process of a node has a worker id "{node}:{start}:{pid}", so that the leases of this
    start of the node are those whose owner begins with :attr:`prefix`. A node started again
    after a crash (same name, maybe the same pid in a container) is another start: what the
    crashed one held is the sweeper's to take over, with an event, not the new start's to let
    go of."""

    name: str = ""
    prefork: bool = True
    start: str = ""

    @property
    def prefix(self) -> str:
        """What the worker ids of this start of the node begin with."""
        return f"{self.name}:{self.start}:"


@dataclass
class Steps:
    """What one process built to run steps: its runtime, the dispatcher it sends follow-up
    work through, its heartbeat and its sweeper thread."""

    pid: int
    runtime: Runtime
    dispatcher: CeleryDispatcher
    heartbeat: Heartbeat | None = None
    sweep_loop: SweepLoop | None = None
    observe_loop: ObserveLoop | None = None


class WorkerProcess:
    """One worker node's life (see the module docstring). Its methods are the handlers of
    Celery's worker signals and the bodies of the app's tasks; they do nothing until the
    worker of :attr:`app` starts (:meth:`started`)."""

    def __init__(self, settings: Settings, app: Celery) -> None:
        self.settings = settings
        self.app = app
        self.node = Node()
        self.active = False  # this app's worker started in this process (or its parent)
        self.executed = 0  # tasks run by this process, for the benchmarks' figures
        self._lock = threading.Lock()
        self._steps: Steps | None = None
        self._pool_watch: pool.PoolWatch | None = None
        self._graceful_pid = 0  # the pool process whose SIGTERM handler is ours

    # Celery's signals ----------------------------------------------------------------------

    def started(self, sender: Any = None, **_: Any) -> None:
        """``worker_init``: the worker starts (before its pool forks): remember its node name,
        this start of it and its pool."""
        if getattr(sender, "app", None) is not self.app:
            return
        self.active = True
        self.node.name = str(getattr(sender, "hostname", "") or "")
        self.node.start = f"{os.getpid()}.{uuid.uuid4().hex[:6]}"
        pool_cls = getattr(sender, "pool_cls", None)  # a name ("prefork") or the class
        where = pool_cls if isinstance(pool_cls, str) else getattr(pool_cls, "__module__", "")
        self.node.prefork = pool_cls is None or "prefork" in str(where)

    def ready(self, **_: Any) -> None:
        """``worker_ready``: a pool of threads (or none) runs steps in this process: start its
        runtime now, so that it heartbeats and sweeps while idle (pool processes do so from
        their start). A pool of processes is watched for processes that die."""
        if not self.active:
            return
        if not self.node.prefork:
            self.process_started()
        elif self._pool_watch is None:
            self._pool_watch = pool.PoolWatch(self._pool_process_exited)
            self._pool_watch.start()

    def process_started(self, **_: Any) -> None:
        """``worker_process_init``: a pool process started: build its runtime now, so that it
        heartbeats while idle."""
        if self.active:
            try:
                self.steps()
            except Exception:  # the first task tries again, and reports
                log.exception("could not start the worker runtime")

    def shutting_down(self, **_: Any) -> None:
        """``worker_shutting_down``: SIGTERM (or SIGINT): Celery stops taking messages and lets
        running tasks end. Steps in this process stop going on inline; if the node's steps
        have not reached their commit point within the grace period, their leases are let go
        of (their late writes are then refused) so that others take the resources over at
        once."""
        if not self.active:
            return
        steps = self._own_steps()
        if steps is not None:
            steps.runtime.engine.stopping.set()
        if self._pool_watch is not None:
            self._pool_watch.stop(timeout=0.0)  # a let-go under way ends on its own
        if self.node.prefork:
            # The pool processes are told too, so that the batches in hand stop at the step
            # in hand (an idle process just ends: Celery's warm shutdown ends them all anyway).
            pool.signal_children(signal.SIGTERM)
        timer = threading.Timer(self.settings.shutdown_grace_seconds, self._past_grace)
        timer.daemon = True
        timer.start()

    def process_shutdown(self, **_: Any) -> None:
        """``worker_process_shutdown``: graceful shutdown of a process: stop sweeping and
        beating, and mark its worker row stopped."""
        steps = self._own_steps()
        if steps is None:
            return
        beat, steps.heartbeat = steps.heartbeat, None
        loop, steps.sweep_loop = steps.sweep_loop, None
        if loop is not None:
            loop.stop(timeout=5.0)
        watch, steps.observe_loop = steps.observe_loop, None
        if watch is not None:
            watch.stop(timeout=5.0)
        if beat is not None:
            beat.stop()

    def stopped(self, **_: Any) -> None:
        """``worker_shutdown``: the node stops, its pool gone (a pool process that outlived
        it, one that ignored the pool's SIGTERM to finish its step, is killed first): let go
        of whatever leases its processes still hold."""
        if not self.active:
            return
        self._stop_acting()
        self._let_go_of(self.node.prefix)
        self.process_shutdown()

    # The tasks -----------------------------------------------------------------------------

    def execute(self, work_json: dict[str, Any], attempt: int = 0) -> None:
        """The ``convergence.execute`` task: run a message's work with this process's
        engine (``convergence.dispatch.celery_dispatch.run_message``)."""
        self.executed += 1
        steps = self.steps()
        self._graceful_child()
        engine = steps.runtime.engine
        run_message(steps.dispatcher, engine.execute, work_json, attempt,
                    stopping=engine.stopping.is_set)

    def deliver_webhooks(self, backoff_seconds: float | None = None,
                         max_attempts: int | None = None,
                         allowed_networks: list[str] | None = None) -> int:
        """The ``convergence.webhooks.deliver`` task: deliver the notifications that are due,
        with the sender's delivery settings when given (``webhooks.task_kwargs``)."""
        rt = self.steps().runtime
        return webhooks.deliver_task(rt.store, rt.settings, backoff_seconds, max_attempts,
                                     allowed_networks)

    # This process's runtime ----------------------------------------------------------------

    def steps(self) -> Steps:
        """This process's runtime, dispatcher and threads, built on first use (after any
        fork)."""
        with self._lock:
            steps = self._steps
            if steps is None or steps.pid != os.getpid():
                settings = self.settings
                if not settings.worker_id:  # one id per process: lease owner and heartbeat row
                    settings = settings.with_(worker_id=self._worker_id())
                # No migration here: ``convergence db upgrade`` does it, the worker refuses to
                # start on a stale schema (``convergence worker``).
                dispatcher = CeleryDispatcher(settings, app=self.app)
                rt = open_runtime(settings, migrate=False, dispatcher=dispatcher)
                steps = self._steps = Steps(os.getpid(), rt, dispatcher)
                if settings.stats_dir:
                    start_exporting(rt.store.engine, settings.stats_dir, self._task_counts)
                self._start_background(steps)
            return steps

    def _own_steps(self) -> Steps | None:
        """What this process built to run steps, if it did (not what it inherited)."""
        steps = self._steps
        return steps if steps is not None and steps.pid == os.getpid() else None

    def _task_counts(self) -> Mapping[str, int]:
        steps = self._own_steps()
        return {"executed": self.executed, "sent": steps.dispatcher.sent if steps else 0}

    def _worker_id(self) -> str:
        if self.node.name:
            return f"{self.node.prefix}{os.getpid()}"
        return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"

    def _start_background(self, steps: Steps) -> None:
        """This process's heartbeat and sweeper threads."""
        rt = steps.runtime
        steps.heartbeat = Heartbeat(rt.store, worker_info(rt.engine.worker_id, WORKER,
                                                          rt.clock.now()),
                                    rt.settings.heartbeat_seconds)
        steps.heartbeat.start()
        steps.sweep_loop = SweepLoop(Sweeper(rt.engine, rt.settings.sweep_seconds),
                                     rt.dispatcher.dispatch)
        steps.sweep_loop.start()
        if rt.settings.observe_seconds:
            steps.observe_loop = ObserveLoop(
                Observer(rt.engine, rt.settings.observe_seconds, rt.settings.observe_per_pass),
                rt.dispatcher.dispatch, every=observe_pass_seconds(rt.settings.observe_seconds))
            steps.observe_loop.start()

    # Stopping ------------------------------------------------------------------------------

    def _past_grace(self) -> None:
        """Steps still running after the grace period: nothing of this node may act any more
        before its leases go to others (a step that is still acting would do so next to the
        resource's new holder)."""
        self._stop_acting()
        self._let_go_of(self.node.prefix, late=True)

    def _stop_acting(self) -> None:
        """Make sure no step of this node calls the cloud any more: pool processes still
        alive are killed; steps on threads of this process are told that their leases are
        gone."""
        if self.node.prefork:
            pool.kill_children()
            return
        steps = self._own_steps()
        if steps is not None:
            steps.runtime.engine.leases.revoke()

    def _pool_process_exited(self, pid: int) -> None:
        self._let_go_of(f"{self.node.prefix}{pid}/", exited=True)

    def _let_go_of(self, prefix: str, *, late: bool = False, exited: bool = False) -> None:
        """Release the leases of this node's processes whose worker ids start with ``prefix``
        (``exited``: a pool process that is gone) and offer their nodes to others."""
        if not self.node.name or not self.active:
            return
        try:
            steps = self._own_steps()
            if steps is not None:
                rt, own = steps.runtime, False
            else:
                rt, own = open_runtime(self.settings, migrate=False,
                                       dispatcher=CeleryDispatcher(self.settings,
                                                                   app=self.app)), True
            try:
                work = let_go(rt.engine, prefix, EXITED if exited else STOPPING)
                if work:
                    if late:
                        log.warning("steps still running after the grace period: their "
                                    "resources are handed to other workers")
                    rt.dispatcher.dispatch(work)
            finally:
                if own:
                    rt.store.engine.dispose()
        except Exception:
            log.exception("could not let go of the leases of %s", prefix)

    def _graceful_child(self) -> None:
        """In a pool process, once: SIGTERM lets the step in hand finish (see
        :meth:`_child_terminated`). Installed at the first task, since billiard installs its
        own handlers after the process initializer."""
        if self.node.prefork and self._graceful_pid != os.getpid():
            self._graceful_pid = os.getpid()
            signal.signal(signal.SIGTERM, self._child_terminated)

    def _child_terminated(self, signum: int, frame: Any) -> None:
        """SIGTERM reached a pool process (sent to the whole process group, as some
        supervisors do): like the warm shutdown its main process makes, the step in hand
        reaches its commit point, nothing more goes on inline, and the process ends after the
        grace period at the latest (its main lets go of any lease it still holds)."""
        steps = self._own_steps()
        if steps is not None:
            steps.runtime.engine.stopping.set()
        timer = threading.Timer(self.settings.shutdown_grace_seconds, os._exit, (0,))
        timer.daemon = True
        timer.start()
