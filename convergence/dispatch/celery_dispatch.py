"""The Celery dispatcher: work items as Celery tasks on Redis, run by ``convergence worker``.

Callers: :func:`convergence.runtime.open_runtime` builds a :class:`CeleryDispatcher` when a
broker is configured (API and CLI processes enqueue through it); ``workers/celery_worker.py``
and ``convergence worker`` run the app made by :func:`make_celery`. Celery is imported here
and in ``workers/`` only.

A message carries one :class:`~convergence.engine.work.Work` as its JSON dict (ids only); the
task ``convergence.execute`` runs ``Engine.execute`` and sends the follow-up work. Delivery is
at least once (``acks_late``, ``reject_on_worker_lost``; the visibility timeout is far longer
than any step or countdown) and every step is idempotent, so a duplicate costs a few queries.

To save broker hops a task keeps going inline with ONE follow-up item that is due now, for a
short time budget, and sends every other follow-up at once so other workers take them in
parallel. Planning has a queue of its own, so that new traversals are not stuck behind the
steps of a large one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from celery import Celery, Task, signals
from kombu.entity import Exchange, Queue

from convergence import webhooks
from convergence.background import Loop
from convergence.dispatch.worker_stats import TASKS
from convergence.engine.work import PLAN, Work
from convergence.settings import Settings, load_settings
from convergence.store.worker_views import WORKER

if TYPE_CHECKING:
    from convergence.engine.sweeper import SweepLoop
    from convergence.heartbeat import Heartbeat
    from convergence.runtime import Runtime

log = logging.getLogger(__name__)

TASK_NAME = "convergence.execute"
PLAN_QUEUE = "convergence.plan"
STEP_QUEUE = "convergence.steps"
QUEUES = (PLAN_QUEUE, STEP_QUEUE)
# Longer than any step and any countdown (polls wait at most ``poll_seconds``): a message is
# redelivered only when its worker is gone. A worker killed outright has its unacknowledged
# messages back after this long; the sweeper re-drives traversals sooner from the database.
VISIBILITY_TIMEOUT = 3600
INLINE_BUDGET_SECONDS = 0.5
MAX_ATTEMPTS = 5
RETRY_DELAY_SECONDS = 0.5
POOL_WATCH_SECONDS = 0.5  # how often a prefork node looks for pool processes that died

Execute = Callable[[Work], list[Work]]
Send = Callable[[Sequence[Work]], None]


def make_celery(settings: Settings) -> Celery:
    """The one Celery app, configured from ``settings``, with the ``convergence.execute`` task."""
    if not settings.broker_url:
        raise ValueError("no broker configured: set CONVERGENCE_BROKER_URL (a redis:// URL)")
    app = Celery("convergence", broker=settings.broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        result_backend=None,
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT},
        broker_connection_retry_on_startup=True,
        task_default_queue=STEP_QUEUE,
        # Each queue its own exchange and key (a shared binding would deliver to both). A
        # worker consumes both queues unless told otherwise.
        task_queues=[Queue(name, Exchange(name), routing_key=name)  # type: ignore[no-untyped-call]
                     for name in QUEUES],
        worker_send_task_events=False,
        worker_hijack_root_logger=False,
    )
    app.task(name=TASK_NAME, bind=True)(_execute_task)
    app.task(name=webhooks.TASK_NAME)(webhooks.deliver_task)  # notification webhooks
    # Workers log JSON lines through ``convergence.logs``, Celery's own lines included.
    signals.setup_logging.connect(_setup_logging, weak=False, dispatch_uid=__name__)
    # Heartbeats: a pool process beats from its start; SIGTERM (warm shutdown) marks it stopped.
    signals.worker_init.connect(_worker_init, weak=False, dispatch_uid=__name__)
    signals.worker_process_init.connect(_process_init, weak=False, dispatch_uid=__name__)
    signals.worker_process_shutdown.connect(_process_shutdown, weak=False,
                                            dispatch_uid=__name__)
    signals.worker_ready.connect(_worker_ready, weak=False, dispatch_uid=__name__)
    signals.worker_shutting_down.connect(_shutting_down, weak=False, dispatch_uid=__name__)
    signals.worker_shutdown.connect(_worker_shutdown, weak=False, dispatch_uid=__name__)
    return app


def _setup_logging(loglevel: int | str | None = None, **_: Any) -> None:
    from convergence.logs import configure_logging

    configure_logging("json", loglevel or logging.INFO)


def send(app: Celery, work: Sequence[Work], attempt: int = 0, delay: float = 0.0) -> None:
    """Enqueue work items (after the transaction that made them ready has committed)."""
    TASKS["sent"] += len(work)
    for w in work:
        countdown = max(w.countdown, delay)
        app.send_task(TASK_NAME, args=[w.to_json()],
                      kwargs={"attempt": attempt} if attempt else None,
                      countdown=countdown if countdown > 0 else None,
                      queue=PLAN_QUEUE if w.kind == PLAN else STEP_QUEUE)


class CeleryDispatcher:
    """The ``Dispatcher`` that sends work to Celery workers (see the module docstring)."""

    def __init__(self, settings: Settings, app: Celery | None = None) -> None:
        self.app = app if app is not None else make_celery(settings)

    def dispatch(self, work: Sequence[Work]) -> None:
        send(self.app, work)

    def close(self) -> None:
        """Release the broker connections this dispatcher opened."""
        self.app.close()


def drive(execute: Execute, send_now: Send, retry: Callable[[Work, int], None], first: Work,
          attempt: int = 0, budget: float = INLINE_BUDGET_SECONDS,
          monotonic: Callable[[], float] = time.monotonic,
          stopping: Callable[[], bool] = lambda: False) -> None:
    """Run ``first``, then follow-up work due now inline while ``budget`` (from the end of
    ``first``) lasts and the worker is not ``stopping``.

    Only one follow-up item continues here; the others are sent at once, so that a wave of
    ready nodes spreads over the workers. An item that raises is handed to ``retry`` with its
    attempt number; what it would have released stays in the database, for its retry.
    """
    deadline: float | None = None
    work: Work | None = first
    while work is not None:
        try:
            follow = execute(work)
        except Exception:
            log.exception("work %s failed (attempt %d)", work, attempt + 1)
            retry(work, attempt + 1)
            return
        attempt = 0
        work = None
        if deadline is None:
            # The budget counts from the end of the first item: a long plan still goes on
            # with its first batch here, rather than queueing it behind other work.
            deadline = monotonic() + budget
        if monotonic() < deadline and not stopping():
            now = [w for w in follow if w.countdown <= 0]
            if now:
                work = now[0]
                follow = [w for w in follow if w is not work]
        send_now(follow)


# The worker side ---------------------------------------------------------------------------

_runtime_lock = threading.Lock()
_runtime: tuple[int, Runtime] | None = None  # (pid, Runtime): built once per worker process
_heartbeat: Heartbeat | None = None  # this worker process's (convergence.heartbeat)
_sweep_loop: SweepLoop | None = None  # this worker process's sweeper thread
_celery_app: Celery | None = None  # the worker's app, for the pool processes' start hook
# The Celery node (``--hostname``) this process belongs to, its pool, and this start of it
# ("{main pid}.{random}"): set when the worker starts, before the pool forks. Every process of
# a node has a worker id "{node}:{start}:{pid}", so that the leases of this start of the node
# are those whose owner begins with "{node}:{start}:". A node started again after a crash
# (same name, maybe the same pid in a container) is another start: what the crashed one held
# is the sweeper's to take over, with an event, not the new start's to let go of.
_node: dict[str, Any] = {"name": "", "prefork": True, "start": ""}


def _worker_execute(app: Celery) -> Execute:
    """``Engine.execute`` of this process's runtime, built on first use (after any fork)."""
    global _runtime
    with _runtime_lock:
        if _runtime is None or _runtime[0] != os.getpid():
            from convergence.runtime import open_runtime

            settings = load_settings()
            if not settings.worker_id:  # one id per process: lease owner and heartbeat row
                settings = settings.with_(worker_id=_worker_id())
            # No migration here: ``convergence db upgrade`` does it, the worker refuses to start
            # on a stale schema (``convergence worker``).
            rt = open_runtime(settings, migrate=False,
                              dispatcher=CeleryDispatcher(settings, app=app))
            _runtime = (os.getpid(), rt)
            stats_dir = os.environ.get("CONVERGENCE_STATS_DIR")
            if stats_dir:
                from convergence.dispatch.worker_stats import start_exporting

                start_exporting(rt.store.engine, stats_dir)
            _start_background(rt)
        engine = _runtime[1].engine
    return engine.execute


def _worker_id() -> str:
    if _node["name"]:
        return f"{_node_prefix()}{os.getpid()}"
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def _node_prefix() -> str:
    """What the worker ids of this start of the node begin with."""
    return f"{_node['name']}:{_node['start']}:"


def _start_background(rt: Runtime) -> None:
    """This process's heartbeat and sweeper threads."""
    global _heartbeat, _sweep_loop
    from convergence.engine.sweeper import Sweeper, SweepLoop
    from convergence.heartbeat import Heartbeat, worker_info

    _heartbeat = Heartbeat(rt.store, worker_info(rt.engine.worker_id, WORKER, rt.clock.now()),
                           rt.settings.heartbeat_seconds)
    _heartbeat.start()
    _sweep_loop = SweepLoop(Sweeper(rt.engine, rt.settings.sweep_seconds),
                            rt.dispatcher.dispatch)
    _sweep_loop.start()


def _worker_init(sender: Any = None, **_: Any) -> None:
    """The worker starts (before its pool forks): remember its app, node name and pool."""
    global _celery_app
    _celery_app = getattr(sender, "app", None)
    _node["name"] = str(getattr(sender, "hostname", "") or "")
    _node["start"] = f"{os.getpid()}.{uuid.uuid4().hex[:6]}"
    pool = getattr(sender, "pool_cls", None)  # a name ("prefork") or the class
    where = pool if isinstance(pool, str) else getattr(pool, "__module__", "")
    _node["prefork"] = pool is None or "prefork" in str(where)


def _worker_ready(**_: Any) -> None:
    """A pool of threads (or none) runs steps in this process: start its runtime now, so
    that it heartbeats and sweeps while idle (pool processes do so from their start). A pool
    of processes is watched for processes that die."""
    global _pool_watch
    if _celery_app is None:
        return
    if not _node["prefork"]:
        _process_init()
    elif _pool_watch is None:
        _pool_watch = _PoolWatch()
        _pool_watch.start()


def _shutting_down(**_: Any) -> None:
    """SIGTERM (or SIGINT): Celery stops taking messages and lets running tasks end. Steps
    in this process stop going on inline; if the node's steps have not reached their commit
    point within the grace period, their leases are let go of (their late writes are then
    refused) so that others take the resources over at once."""
    if _runtime is not None and _runtime[0] == os.getpid():
        _runtime[1].engine.stopping.set()
    if _pool_watch is not None:
        _pool_watch.stop(timeout=0.0)  # a let-go under way ends on its own
    if _node["prefork"]:
        # The pool processes are told too, so that the batches in hand stop at the step in
        # hand (an idle process just ends: Celery's warm shutdown ends them all anyway).
        from billiard.process import active_children

        for child in active_children():
            with contextlib.suppress(OSError):
                os.kill(child.pid, signal.SIGTERM)
    grace = load_settings().shutdown_grace_seconds
    timer = threading.Timer(grace, _past_grace)
    timer.daemon = True
    timer.start()


def _past_grace() -> None:
    """Steps still running after the grace period: nothing of this node may act any more
    before its leases go to others (a step that is still acting would do so next to the
    resource's new holder)."""
    _stop_acting()
    _let_go_of_node(late=True)


def _stop_acting() -> None:
    """Make sure no step of this node calls the cloud any more: pool processes still alive
    are killed; steps on threads of this process are told that their leases are gone."""
    if _node["prefork"]:
        from billiard.process import active_children

        children = active_children()
        for child in children:
            with contextlib.suppress(OSError):
                os.kill(child.pid, signal.SIGKILL)
        for child in children:
            child.join(5.0)
    elif _runtime is not None and _runtime[0] == os.getpid():
        _runtime[1].engine.leases.revoke()


def _let_go_of_node(late: bool = False) -> None:
    """Release the leases of every process of this node and offer their nodes to others."""
    _let_go_of(_node_prefix(), late=late)


def _let_go_of(prefix: str, *, late: bool = False, exited: bool = False) -> None:
    """Release the leases of this node's processes whose worker ids start with ``prefix``
    (``exited``: a pool process that is gone) and offer their nodes to others."""
    if not _node["name"] or _celery_app is None:
        return
    from convergence.engine.sweeper import EXITED, STOPPING, let_go
    from convergence.runtime import open_runtime

    try:
        if _runtime is not None and _runtime[0] == os.getpid():
            rt, own = _runtime[1], False
        else:
            settings = load_settings()
            rt, own = open_runtime(settings, migrate=False,
                                   dispatcher=CeleryDispatcher(settings, app=_celery_app)), True
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


class _PoolWatch(Loop):
    """In a prefork node's main process: a pool process that exits while the node runs
    (``kill -9``, the OOM killer) leaves its leases; billiard starts another process and
    re-queues the message, and the leases are let go of at once, with a "taken over" event,
    rather than after they run out. Exited means gone or a zombie: nothing of it can act
    any more. Stopped when the node stops: its let-go then hands everything over."""

    def __init__(self, period: float = POOL_WATCH_SECONDS) -> None:
        super().__init__("pool-watch", on_error_wait=period)
        self._period = period
        self._known: set[int] = set()

    def turn(self, stop: threading.Event) -> float:
        from billiard.process import active_children

        # The pool's processes as billiard knows them; whether one is dead is asked of the
        # system, since billiard may not have reaped it yet (or another reaper did).
        self._known |= {c.pid for c in active_children() if c.pid is not None}
        for pid in sorted(p for p in self._known if _exited(p)):
            if stop.is_set():
                break
            self._known.discard(pid)
            _let_go_of(f"{_node_prefix()}{pid}/", exited=True)
        return self._period


def _exited(pid: int) -> bool:
    """Whether a child process has ended: gone, or a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # "pid (comm) state ...": the state follows the last parenthesis.
            return stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except FileNotFoundError:
        return True
    except OSError:  # no /proc here: ask the kernel whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


_pool_watch: _PoolWatch | None = None


def _process_init(**_: Any) -> None:
    """A pool process started: build its runtime now, so that it heartbeats while idle."""
    if _celery_app is not None:
        try:
            _worker_execute(_celery_app)
        except Exception:  # the first task tries again, and reports
            log.exception("could not start the worker runtime")


_graceful_pid = 0  # the pool process whose SIGTERM handler is ours


def _graceful_child() -> None:
    """In a pool process, once: SIGTERM lets the step in hand finish (see below). Installed at
    the first task, since billiard installs its own handlers after the process initializer."""
    global _graceful_pid
    if _node["prefork"] and _graceful_pid != os.getpid():
        _graceful_pid = os.getpid()
        signal.signal(signal.SIGTERM, _child_terminated)


def _child_terminated(signum: int, frame: Any) -> None:
    """SIGTERM reached a pool process (sent to the whole process group, as some supervisors
    do): like the warm shutdown its main process makes, the step in hand reaches its commit
    point, nothing more goes on inline, and the process ends after the grace period at the
    latest (its main lets go of any lease it still holds)."""
    if _runtime is not None and _runtime[0] == os.getpid():
        _runtime[1].engine.stopping.set()
    timer = threading.Timer(load_settings().shutdown_grace_seconds, os._exit, (0,))
    timer.daemon = True
    timer.start()


def _process_shutdown(**_: Any) -> None:
    """Graceful shutdown of a process: stop sweeping and beating, and mark its worker row
    stopped."""
    global _heartbeat, _sweep_loop
    beat, _heartbeat = _heartbeat, None
    loop, _sweep_loop = _sweep_loop, None
    if _runtime is None or _runtime[0] != os.getpid():
        return
    if loop is not None:
        loop.stop(timeout=5.0)
    if beat is not None:
        beat.stop()


def _worker_shutdown(**_: Any) -> None:
    """The node stops, its pool gone (a pool process that outlived it, one that ignored the
    pool's SIGTERM to finish its step, is killed first): let go of whatever leases its
    processes still hold."""
    _stop_acting()
    _let_go_of_node()
    _process_shutdown()


def _execute_task(task: Task, work_json: dict[str, Any], attempt: int = 0) -> None:
    app = task.app
    TASKS["executed"] += 1

    def retry(work: Work, attempt: int) -> None:
        if attempt >= MAX_ATTEMPTS:
            log.error("giving up on %s after %d attempts; the sweeper re-drives it", work,
                      attempt)
            return
        send(app, [work], attempt, RETRY_DELAY_SECONDS * attempt)

    execute = _worker_execute(app)
    _graceful_child()
    assert _runtime is not None
    engine = _runtime[1].engine
    drive(execute, lambda work: send(app, work), retry, Work.from_json(work_json), attempt,
          stopping=engine.stopping.is_set)
