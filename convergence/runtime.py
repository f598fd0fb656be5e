"""Wiring: the store, the plugins, the engine and a dispatcher, built once per entry point.

The CLI, the API and the worker each call :func:`open_runtime` with their settings. With no
broker configured, work runs on the in-process dispatcher (the embedded default); with one, it
is sent to Celery workers. The use cases (``convergence.services``) take the :class:`Runtime`
and use what it holds; it holds nothing else (what the API app runs beside it, its event
notifier and webhook deliverer, the app owns: ``convergence.api.app``).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convergence.dispatch.inprocess import InProcessDispatcher, Periodic
from convergence.engine.engine import Engine
from convergence.engine.observer import Observer, observe_pass_seconds
from convergence.engine.sweeper import Sweeper
from convergence.plugins.base import PluginHost
from convergence.plugins.registry import PluginRegistry
from convergence.ports.clock import Clock, SystemClock
from convergence.ports.dispatch import Dispatcher
from convergence.ports.work import Work
from convergence.services.children import ChildStackService
from convergence.services.holds import StackHolds
from convergence.services.software import SoftwareService
from convergence.settings import Settings
from convergence.store.db import make_engine, sqlite_folder
from convergence.store.entity_tables import SqlEntityTables
from convergence.store.migrate import ensure_schema
from convergence.store.sealing import open_sealer
from convergence.store.transactions import Store

log = logging.getLogger(__name__)

# Why the embedded command line has no cloud when none is configured and the simulated cloud
# (an optional distribution) is not installed: a template needing one is refused, saying so.
NO_SIMULATED_CLOUD = ("no cloud is configured, and the simulated cloud this command would serve "
                      "instead is not installed: set OS_CLOUD (a clouds.yaml entry) or the OS_* "
                      "variables, or pip install 'convergence[simcloud]'")


@dataclass
class Runtime:
    settings: Settings
    clock: Clock
    store: Store
    registry: PluginRegistry
    engine: Engine
    dispatcher: Dispatcher
    # The stacks this process drives, held while it does (``convergence.services.running``).
    holds: StackHolds

    @property
    def inprocess(self) -> InProcessDispatcher | None:
        return self.dispatcher if isinstance(self.dispatcher, InProcessDispatcher) else None


def _embedded_cloud(settings: Settings, said: Callable[[str], None] | None,
                    ) -> Callable[[], Mapping[str, str]]:
    """The embedded command line's cloud when none is configured: a simulated one, started
    in this process on first use, kept beside the embedded database (or in a temporary
    folder), and said so (``said``). Only a person's own command line asks for it
    (``open_runtime(simulated_cloud=True)``); a server process never starts one."""
    def start() -> Mapping[str, str]:
        from convergence_simcloud import embedded

        folder = Path(sqlite_folder(settings.database_url) or tempfile.mkdtemp()) / "simcloud"
        started = embedded.start(folder)
        message = (f"No cloud is configured (OS_CLOUD): the resources that need one are made "
                   f"in a simulated cloud served by this command, kept in {folder}. Set "
                   f"OS_CLOUD to use a real cloud.")
        log.info(message)
        if said is not None:
            said(message)
        return started.environ

    return start


def _with_observer(sweep: Periodic, observer: Observer) -> Periodic:
    """The embedded engine's periodic job: a sweep, then a pass of the observer (each takes
    its own turn, so each runs at its own period)."""
    def both(force: bool) -> tuple[Sequence[Work], float | None]:
        work, recheck_at = sweep(force)
        return [*work, *observer.observe().work], recheck_at

    return both


def open_runtime(settings: Settings, *, clock: Clock | None = None,
                 registry: PluginRegistry | None = None, dispatcher: Dispatcher | None = None,
                 migrate: bool = True, environ: Mapping[str, str] | None = None,
                 simulated_cloud: bool = False, said: Callable[[str], None] | None = None,
                 **dispatch_options: Any) -> Runtime:
    """The runtime of one entry point. ``environ``: where the plugins read their own settings
    (the cloud: ``OS_CLOUD``...); the process's environment unless given.
    ``simulated_cloud``: with no cloud configured and no broker, start a simulated cloud in
    this process on first use (the embedded command line, for a person's own use; ``said``
    tells the person). Server processes (``convergence api``, ``convergence worker``) never
    ask for one: a template needing a cloud is refused at acceptance instead.
    Raises ConfigurationError when the secrets the store keeps cannot be encrypted as
    configured (``convergence.store.sealing``: no keys for a server database)."""
    clock = clock or SystemClock()
    sealer = open_sealer(settings.database_url, settings.encryption_keys)
    db = make_engine(settings.database_url)
    if migrate:
        ensure_schema(db)
    store = Store(db, clock.now, sealer)
    # The plugins' backends, built from what every plugin is handed: the clock, the store's
    # entity tables (and the environment, for their own settings).
    environ = os.environ if environ is None else environ
    children = ChildStackService()  # nested stacks: the engine's own stacks, as a backend
    software = SoftwareService()  # software configs, deployments and signed URLs
    # The simulated cloud is an optional distribution (``convergence-simcloud``) that a
    # production install leaves out: without it, a template needing a cloud is refused at
    # acceptance, saying to configure one or to install it.
    fallback: Callable[[], Mapping[str, str]] | None = None
    no_cloud: str | None = None
    if simulated_cloud and settings.embedded:
        if importlib.util.find_spec("convergence_simcloud") is None:
            no_cloud = NO_SIMULATED_CLOUD
        else:
            fallback = _embedded_cloud(settings, said)
    registry = (registry or PluginRegistry.from_entry_points()).bind(
        PluginHost(now=clock.now, entity_tables=SqlEntityTables(db), environ=environ,
                   fallback_cloud=fallback, no_cloud=no_cloud,
                   stacks=children, software=software))
    worker_id = settings.worker_id or f"{socket.gethostname()}-{id(store):x}"
    engine = Engine(store, registry, worker_id=worker_id,
                    lease_seconds=settings.lease_seconds, batch_size=settings.batch_size,
                    max_poll_delay=settings.poll_seconds,
                    inline_seconds=settings.inline_seconds,
                    sweep_seconds=settings.sweep_seconds,
                    action_retry_limit=settings.action_retry_limit)
    if dispatcher is None:
        if settings.broker_url:
            from convergence.dispatch.celery_dispatch import CeleryDispatcher

            dispatcher = CeleryDispatcher(settings)
        else:
            dispatcher = InProcessDispatcher(engine.execute, clock, **dispatch_options)
            # The embedded engine sweeps too: what a process that died left behind is found;
            # and observes, when asked to, beside the sweeps.
            sweeper = Sweeper(engine, settings.sweep_seconds)
            periodic: Periodic = sweeper.periodic
            if settings.observe_seconds:
                periodic = _with_observer(periodic, Observer(
                    engine, settings.observe_seconds, settings.observe_per_pass))
            dispatcher.every(min(settings.sweep_seconds,
                                 observe_pass_seconds(settings.observe_seconds or 60.0)),
                             periodic)
    runtime = Runtime(settings, clock, store, registry, engine, dispatcher,
                      StackHolds(store, settings.lease_seconds))
    children.attach(runtime)
    software.attach(runtime)
    return runtime
