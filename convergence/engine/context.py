"""What the parts of one engine share: its store, settings, leases, counters and observers.

:class:`~convergence.engine.engine.Engine` builds one :class:`EngineContext` and hands it to
each of its parts (:mod:`~convergence.engine.planning`, :mod:`~convergence.engine.claim`,
:mod:`~convergence.engine.batch`, :mod:`~convergence.engine.recording`,
:mod:`~convergence.engine.accounting`, :mod:`~convergence.engine.conclusion`); the parts hold a
reference to it, never to the engine nor to each other's state. Also here: the small helpers
more than one part needs (:func:`owner_key`, :func:`policies`) and the engine's counters
(:class:`EngineStats`, read by benchmarks, tests and the API's metrics).
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from convergence.engine.definitions import DefinitionCache
from convergence.engine.deletion import definition_policy
from convergence.engine.leases import LeaseKeeper
from convergence.engine.secrets import SecretMarks
from convergence.plugins.base import DEFAULT_SCOPE, CloudScope
from convergence.plugins.registry import PluginRegistry
from convergence.ports.store import Store, Tx
from convergence.ports.views import StackView, TemplateContent, TraversalView
from convergence.template import StackDefinition


@dataclass(slots=True)
class EngineStats:
    """Counters for benchmarks and tests (not for correctness)."""

    batches: int = 0
    nodes: int = 0
    polls: int = 0
    fenced_off: int = 0
    skipped_busy: int = 0
    stale: int = 0
    handed_over: int = 0
    by_outcome: Counter[str] = field(default_factory=Counter)


def owner_key(stack_id: str, record_id: int) -> str:
    """The key a plugin finds what it made for a record by (a tag, a name in the cloud)."""
    return f"{stack_id}/{record_id}"


def policies(definition: StackDefinition | None,
             items: Sequence[tuple[str, str]]) -> dict[str, str | None]:
    """The deletion policy of each new record's definition (see ``Tx.insert_records``)."""
    if definition is None:
        return {}
    return {name: definition_policy(definition, name) for name, _ in items}


MAX_RETRY_DELAY = 300.0  # the longest a call the cloud refused waits before it is made again


def next_step_delay(outcome: str, delay: float, max_poll_delay: float) -> float:
    """How long until a node is stepped again. An operation under way is looked at again
    within ``max_poll_delay`` (a newer definition, a cancel or a shutdown is noticed soon);
    a call the cloud refused for now waits as long as the plugin says the cloud asked (a
    429's ``Retry-After``: 30 s is 30 s, not one), up to :data:`MAX_RETRY_DELAY`."""
    if outcome == "retry":
        return min(max(delay, 0.0), MAX_RETRY_DELAY)
    return min(max(delay, 0.0), max_poll_delay)


class EngineContext:
    """One engine's shared state. Settings are fixed at construction; ``stats``,
    ``finishes``, ``observers`` and ``on_step`` are read and written by the parts and, through
    the engine's attributes of the same names, by its callers."""

    def __init__(self, store: Store, registry: PluginRegistry, *, worker_id: str,
                 lease_seconds: float, batch_size: int, max_poll_delay: float,
                 inline_seconds: float, sweep_seconds: float,
                 action_retry_limit: int = 5) -> None:
        self.store = store
        self.registry = registry
        # Which values of resources and outputs are secrets (the store keeps them encrypted).
        self.secrets = SecretMarks(registry.lookup)
        self.worker_id = worker_id
        self.lease_seconds = lease_seconds
        self.batch_size = batch_size
        self.max_poll_delay = max_poll_delay
        self.action_retry_limit = action_retry_limit
        self.inline_seconds = inline_seconds
        self.sweep_seconds = sweep_seconds
        self.leases = LeaseKeeper(store, lease_seconds)
        # Set when the process is told to stop: steps in hand finish, nothing more is taken
        # on inline (what they release goes back to the dispatcher, for others).
        self.stopping = threading.Event()
        self.stats = EngineStats()
        self.finishes = 0  # traversals this engine finished: lets waiters skip needless reads
        # Called, in order, after each transaction that recorded events: the API's event stream
        # and webhook deliverer register here (``convergence.api.stream``/``subscriptions``).
        self.observers: list[Callable[[], None]] = []
        self.on_step: Callable[[float], None] | None = None  # each step's seconds (metrics)
        self.definitions = DefinitionCache(self.load_template, registry)

    def load_template(self, template_id: str) -> TemplateContent:
        """A template's stored content, read in a transaction of its own."""
        with self.store.read() as tx:
            return tx.template(template_id)

    def definition(self, trav: TraversalView, tx: Tx) -> StackDefinition | None:
        """The definition a traversal converges to (None: it deletes everything)."""
        if trav.template_id is None:
            return None
        return self.definitions.get(trav.template_id, tx.template)

    def owner(self) -> str:
        """A fresh lease owner: this worker, and one run of a batch (or its inline hops)."""
        return f"{self.worker_id}/{uuid.uuid4().hex[:12]}"

    def busy_delay(self, tx: Tx, record_ids: Sequence[int]) -> float:
        """How long to wait before looking again at nodes whose records another worker holds:
        until the sweeper had a turn after the last of their leases ran out (it takes over
        expired leases, says so in an event, and offers the node again)."""
        retry_at = tx.lease_expiry(record_ids)
        return max((retry_at or tx.now) - tx.now, 0.0) + self.sweep_seconds + 0.5

    def tell_observers(self) -> None:
        """After a transaction that recorded events committed: every observer, in order."""
        for observer in list(self.observers):
            observer()


def scope_of(stack: StackView | None) -> CloudScope:
    """The cloud and credentials a stack's resources are reached with."""
    if stack is None or (stack.cloud is None and stack.trust_id is None):
        return DEFAULT_SCOPE
    return CloudScope(cloud=stack.cloud, trust_id=stack.trust_id)
