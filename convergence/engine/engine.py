"""The engine: plan traversals and run batches of node steps, each in few transactions.

:class:`Engine` is the facade the rest of the program uses: the dispatchers (in-process and
Celery) call :meth:`Engine.execute` with a :class:`~convergence.ports.work.Work` item and
dispatch the follow-up work it returns after its commit; the sweeper
(:mod:`convergence.engine.sweeper`) calls :meth:`~Engine.time_out`, :meth:`~Engine.discard`
and reads its settings and leases; the services call :meth:`~Engine.resume` and use its
definition cache; the API registers :attr:`~Engine.observers` and :attr:`~Engine.on_step` and
reads :attr:`~Engine.stats` and :attr:`~Engine.finishes`; ``convergence.runtime`` builds it.

It holds no logic of its own beyond wiring the plugins to the steps. The work is done by its
parts, each holding the shared :class:`~convergence.engine.context.EngineContext`:

- :mod:`~convergence.engine.planning`: plan a traversal (one transaction);
- :mod:`~convergence.engine.batch`: run a batch of ready nodes, claimed by
  :mod:`~convergence.engine.claim`, stepped by :mod:`~convergence.engine.step` (no
  transaction open), recorded by :mod:`~convergence.engine.recording` and counted off by
  :mod:`~convergence.engine.accounting` (a second transaction, whatever the batch's size);
- :mod:`~convergence.engine.conclusion`: finish a traversal, time it out, resume it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence

from convergence.engine.accounting import Accountant
from convergence.engine.batch import BatchRunner
from convergence.engine.claim import Claimer
from convergence.engine.conclusion import Concluder
from convergence.engine.context import EngineContext, EngineStats, owner_key, scope_of
from convergence.engine.definitions import DefinitionCache
from convergence.engine.deletion import record_policy
from convergence.engine.hooks import hooks_of
from convergence.engine.leases import LeaseKeeper
from convergence.engine.planning import Planner
from convergence.engine.recording import Recorder
from convergence.engine.step import Stepper
from convergence.logs import bind
from convergence.plugins.base import REPORT, Observation, PluginContext, ResourcePlugin
from convergence.plugins.registry import PluginRegistry
from convergence.ports.store import Store
from convergence.ports.views import Orphan, RecordView, StackView
from convergence.ports.work import FINISH, NODES, PLAN, Work

__all__ = ["Engine", "EngineStats", "owner_key"]


class Engine:
    """One engine: its parts, wired to the store and the plugins (see the module's docstring).

    Settings, leases, counters and observers live in :attr:`ctx`; the attributes of the same
    names here are views of it (settings read-only; ``on_step`` may be set)."""

    def __init__(self, store: Store, registry: PluginRegistry, *, worker_id: str = "",
                 lease_seconds: float = 30.0,
                 batch_size: int = 200, max_poll_delay: float = 1.0,
                 inline_seconds: float = 0.5, sweep_seconds: float = 5.0,
                 action_retry_limit: int = 5) -> None:
        self.ctx = ctx = EngineContext(
            store, registry, worker_id=worker_id or f"engine-{uuid.uuid4().hex[:8]}",
            lease_seconds=lease_seconds, batch_size=batch_size, max_poll_delay=max_poll_delay,
            inline_seconds=inline_seconds, sweep_seconds=sweep_seconds,
            action_retry_limit=action_retry_limit)
        self._plugins: dict[str, ResourcePlugin] = {}
        self.stepper = Stepper(self._plugin, self._context, store.clock,
                               self._deletion_policy, unreachable=store.unreachable,
                               action_retry_limit=action_retry_limit, hooks=self._hooks,
                               secrets=ctx.secrets)
        self.planner = Planner(ctx)
        self.claimer = Claimer(ctx)
        self.concluder = Concluder(ctx)
        self.recorder = Recorder(ctx, Accountant(ctx, self.claimer))
        self.runner = BatchRunner(ctx, self.stepper, self.claimer, self.recorder)

    # what the callers read ------------------------------------------------------------------
    @property
    def store(self) -> Store:
        return self.ctx.store

    @property
    def registry(self) -> PluginRegistry:
        return self.ctx.registry

    @property
    def worker_id(self) -> str:
        return self.ctx.worker_id

    @property
    def lease_seconds(self) -> float:
        return self.ctx.lease_seconds

    @property
    def batch_size(self) -> int:
        return self.ctx.batch_size

    @property
    def leases(self) -> LeaseKeeper:
        return self.ctx.leases

    @property
    def definitions(self) -> DefinitionCache:
        return self.ctx.definitions

    @property
    def stopping(self) -> threading.Event:
        """Set when the process is told to stop: steps in hand finish, nothing more is taken
        on inline (what they release goes back to the dispatcher, for others)."""
        return self.ctx.stopping

    @property
    def stats(self) -> EngineStats:
        return self.ctx.stats

    @property
    def finishes(self) -> int:
        """Traversals this engine finished: lets waiters skip needless reads."""
        return self.ctx.finishes

    @property
    def observers(self) -> list[Callable[[], None]]:
        """Called, in order, after each transaction that recorded events: the API's event
        stream and webhook deliverer register here (``convergence.api``)."""
        return self.ctx.observers

    @property
    def on_step(self) -> Callable[[float], None] | None:
        """Told each step's seconds (the API's step latency histogram)."""
        return self.ctx.on_step

    @on_step.setter
    def on_step(self, value: Callable[[float], None] | None) -> None:
        self.ctx.on_step = value

    # plugins --------------------------------------------------------------------------------
    def _plugin(self, type_name: str) -> ResourcePlugin | None:
        plugin = self._plugins.get(type_name)
        if plugin is None:
            cls = self.ctx.registry.plugin(type_name)
            if cls is None:
                return None
            plugin = self._plugins[type_name] = cls()  # type: ignore[assignment]
        return plugin

    def observe_record(self, stack: StackView,
                       record: RecordView) -> tuple[Observation | None, str]:
        """What ``record``'s resource really is (None: its type cannot tell) and its type's
        observer policy (``repair``, ``mark_unhealthy`` or ``report``); for the observer
        (:mod:`convergence.engine.observer`). Raises what the plugin raises."""
        plugin = self._plugin(record.type)
        if plugin is None or record.physical_id is None:
            return None, REPORT
        policy = str(getattr(plugin, "observe_policy", REPORT))
        return plugin.observe(self._context(stack, record), record.physical_id,
                              record.properties), policy

    def _context(self, stack: StackView, record: RecordView,
                 lease_good: Callable[[], bool] = lambda: True,
                 token: int | None = None) -> PluginContext:
        """``token``: the fencing token the step's claim gave the record; the first claim's
        (1) means no step ever acted on it, so nothing of it can be in the cloud yet."""
        return PluginContext(owner=owner_key(stack.id, record.id), stack_id=stack.id,
                             stack_name=stack.name, resource_name=record.name,
                             now=self.ctx.store.clock, backends=self.ctx.registry.backends,
                             lease_good=lease_good, first_attempt=token == 1,
                             scope=scope_of(stack), stack_tenant=stack.tenant)

    def _hooks(self, record: RecordView) -> frozenset[str]:
        """The hooks on a record's resource in the template it converged to (none when that
        cannot be read)."""
        if record.template_id is None:
            return frozenset()
        try:
            definition = self.ctx.definitions.get(record.template_id)
        except Exception:  # a template that no longer validates: no hook to honour
            return frozenset()
        return hooks_of(definition, record.name)

    def _deletion_policy(self, record: RecordView) -> str | None:
        """The deletion policy of what a record made; None: it cannot be told (see
        :func:`convergence.engine.deletion.record_policy`)."""
        return record_policy(record, self.ctx.definitions.get, self.ctx.load_template)

    def discard(self, orphan: Orphan, stack: StackView | None,
                lease_good: Callable[[], bool]) -> bool:
        """Have the orphan's plugin remove it (raises what the plugin raises); False if no
        plugin of its type is known here. Called by :mod:`convergence.engine.orphans`."""
        plugin = self._plugin(orphan.type)
        if plugin is None:
            return False
        plugin.discard(PluginContext(
            owner=owner_key(orphan.stack_id, orphan.record_id), stack_id=orphan.stack_id,
            stack_name=stack.name if stack is not None else "", resource_name=orphan.name,
            now=self.ctx.store.clock, backends=self.ctx.registry.backends,
            lease_good=lease_good, scope=scope_of(stack)), orphan.physical_id)
        return True

    # work -----------------------------------------------------------------------------------
    def execute(self, work: Work) -> list[Work]:
        """Do one work item; returns the follow-up work, to dispatch once this committed."""
        with bind(traversal=work.traversal_id):  # on every line logged by plan/run/finish
            if work.kind == PLAN:
                return self.plan(work.traversal_id)
            if work.kind == NODES:
                return self.run_nodes(work.traversal_id, work.seqs, work.expects)
            if work.kind == FINISH:
                return self.finish(work.traversal_id)
        raise ValueError(f"unknown work kind {work.kind!r}")

    def plan(self, traversal_id: str) -> list[Work]:
        """Plan a traversal (see :mod:`convergence.engine.planning`)."""
        return self.planner.plan(traversal_id)

    def run_nodes(self, traversal_id: str, seqs: Sequence[int],
                  expects: Sequence[int] | None = None) -> list[Work]:
        """Run a batch of nodes, and on inline (see :mod:`convergence.engine.batch`).
        ``expects``: for polls, the fencing token each node's record had when it was
        scheduled."""
        return self.runner.run_nodes(traversal_id, seqs, expects)

    def finish(self, traversal_id: str) -> list[Work]:
        """Set the stack's outcome (see :mod:`convergence.engine.conclusion`)."""
        return self.concluder.finish(traversal_id)

    def time_out(self, traversal_id: str) -> list[Work]:
        """Fail a traversal past its deadline (the sweeper); finishing it may roll back."""
        return self.concluder.time_out(traversal_id)

    def resume(self, traversal_id: str) -> list[Work]:
        """Work that re-drives a traversal from the database (after a crash or a Ctrl-C)."""
        return self.concluder.resume(traversal_id)
