"""Plain values the store hands out and takes in: no SQLAlchemy objects cross the ports.

The engine, the services, the API and the CLI read these; ``convergence.store`` (the adapter
behind :mod:`convergence.ports.store`) builds them from rows. Frozen dataclasses, one per thing
a transaction reads or writes: stacks and their templates, traversals and their nodes, resource
records, events, webhook subscriptions and deliveries, worker heartbeats, orphans and what the
sweeper takes over. The queries of Heat's paged listings are in :mod:`convergence.ports.pages`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Node states
WAITING, READY, DONE, FAILED, SKIPPED = "WAITING", "READY", "DONE", "FAILED", "SKIPPED"
# A node whose step waits on something outside its stack (a nested stack's end): it holds no
# worker, lease or timer, and the event it waits for makes it READY again.
PARKED = "PARKED"
NODE_STATES = (WAITING, READY, PARKED, DONE, FAILED, SKIPPED)
# Traversal states
PLANNING, RUNNING, COMPLETE, SUPERSEDED = "PLANNING", "RUNNING", "COMPLETE", "SUPERSEDED"
TRAVERSAL_FAILED = "FAILED"


@dataclass(frozen=True, slots=True)
class TemplateContent:
    """Everything a stack's desired state is made of; its hash is its id."""

    text: str
    files: Mapping[str, str] = field(default_factory=dict)
    environments: tuple[Any, ...] = ()
    parameters: Mapping[str, Any] = field(default_factory=dict)
    # What the autoscaler decided beside the user's input (``convergence.services.scaling``):
    # ``capacity``, the size of each scaling group a policy's signal set; ``signalled``, when
    # each policy last scaled (its cooldown). Kept by a PATCH, dropped by a new template.
    scaling: Mapping[str, Any] = field(default_factory=dict)


def template_id(content: TemplateContent) -> str:
    """The content address of a desired state: the SHA-256 of its canonical JSON (keys
    sorted, compact), ``{"environments":...,"files":...,"parameters":...,"text":"..."}``.

    The text, last in that order, is escaped and hashed a piece at a time: a large template
    is not copied twice more (escaped, then encoded) to be hashed. JSON escapes each
    character on its own, so the digest is the one of the whole document."""
    body: dict[str, Any] = {
        "files": dict(content.files), "environments": list(content.environments),
        "parameters": dict(content.parameters)}
    if content.scaling:  # absent when empty: the ids of contents stored before stay the same
        body["scaling"] = dict(content.scaling)
    head = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(head[:-1].encode())
    digest.update(b',"text":"')
    text = content.text
    for start in range(0, len(text), _HASHED_AT_ONCE):
        digest.update(json.dumps(text[start:start + _HASHED_AT_ONCE])[1:-1].encode())
    digest.update(b'"}')
    return digest.hexdigest()


_HASHED_AT_ONCE = 1 << 20  # characters of a template's text escaped and hashed at a time


@dataclass(frozen=True, slots=True)
class StackView:
    id: str
    name: str
    tenant: str
    generation: int
    observed_generation: int
    traversal_id: str | None
    template_id: str | None
    rollback_template_id: str | None
    action: str
    status: str
    status_reason: str
    outputs: Mapping[str, Any]
    timeout_mins: int | None
    disable_rollback: bool
    created_at: float
    updated_at: float
    deleted_at: float | None
    # Opted in to the observer, which looks at its resources now and then.
    observe: bool = False
    # The cloud its resources live in (a ``clouds.yaml`` entry; None: the engine's own) and
    # the Keystone trust its caller gave the engine (None: the cloud's own credentials).
    cloud: str | None = None
    trust_id: str | None = None
    # A nested stack: its parent stack, the parent's resource that made it and that
    # resource's record (version); its depth below the top-level stack (0: top-level).
    parent_id: str | None = None
    parent_resource: str | None = None
    parent_record_id: int | None = None
    nested_depth: int = 0
    root_id: str | None = None  # the top-level stack of its tree (None: it is one)

    @property
    def stack_status(self) -> str:
        return f"{self.action}_{self.status}"


@dataclass(frozen=True, slots=True)
class TraversalView:
    id: str
    stack_id: str
    generation: int
    action: str
    template_id: str | None
    state: str
    nodes_total: int
    nodes_remaining: int
    nodes_failed: int
    failure: str
    deadline: float | None
    # Its steps look at the cloud before they decide: a CHECK (which changes nothing) or an
    # update asked to converge with observed reality.
    observe: bool = False


@dataclass(frozen=True, slots=True)
class RecordView:
    id: int
    stack_id: str
    name: str
    type: str
    physical_id: str | None
    action: str
    status: str
    status_reason: str
    template_id: str | None
    generation: int
    requires: tuple[int, ...]
    replaces: int | None
    replaced_by: int | None
    properties: Mapping[str, Any]
    attributes: Mapping[str, Any]
    reference_id: Any
    operation: Mapping[str, Any] | None
    fencing_token: int
    lease_owner: str | None
    created_at: float
    updated_at: float
    # The deletion policy a step stamped (Delete, Retain, Snapshot); None: none yet.
    deletion_policy: str | None = None


@dataclass(frozen=True, slots=True)
class RecordValues:
    """What a template reads of a record (``get_resource``, ``get_attr``): read for a stack's
    outputs, where every member of a group of a million may be named and nothing else of
    the record is wanted."""

    name: str
    action: str
    physical_id: str | None
    reference_id: Any
    attributes: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RecordOutline:
    """A record as planning sees it (no properties, attributes or operation state)."""

    id: int
    name: str
    requires: tuple[int, ...]
    replaced_by: int | None
    template_id: str | None
    action: str
    status: str


@dataclass(frozen=True, slots=True)
class NodeView:
    traversal_id: str
    seq: int
    record_id: int | None
    name: str
    phase: str
    pending: int
    state: str
    successors: tuple[int, ...]
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class EventView:
    id: int
    stack_id: str
    generation: int
    resource_name: str
    physical_resource_id: str | None
    resource_type: str
    action: str
    status: str
    reason: str
    created_at: float


@dataclass(slots=True)
class NewEvent:
    resource_name: str
    physical_resource_id: str | None
    resource_type: str
    action: str
    status: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SecretFields:
    """Which of a record's values are secrets, to be kept encrypted at rest: ``properties``
    (in its properties, and in those of its operation under way; every one when
    ``all_properties``), ``attributes`` (every one when ``all_attributes``) and its
    ``reference`` (``get_resource``'s value). The engine says which
    (``convergence.engine.secrets``); the store encrypts them as it writes and decrypts them
    as it reads: what it hands out is in clear."""

    properties: frozenset[str] = frozenset()
    attributes: frozenset[str] = frozenset()
    all_attributes: bool = False
    reference: bool = False
    all_properties: bool = False


@dataclass(slots=True)
class RecordChange:
    """What a step learned about a record, written fenced by its token."""

    record_id: int
    token: int
    values: dict[str, Any]
    delete: bool = False  # the record is gone: remove its row
    # Seconds within which the record must be worked on again (a pending operation's next
    # poll): the lease is let go, and its deadline kept as a watch the sweeper checks.
    watch: float | None = None
    # Its values that are secrets (None: none, the store writes them as they are).
    secret: SecretFields | None = None


@dataclass(slots=True)
class NodeOutcome:
    """The end of one node's step (pending steps have no outcome: they are polled again)."""

    seq: int
    failed: bool = False
    reason: str = ""
    record_id: int | None = None  # a converge node whose record changed (a replacement)


# notification webhooks (convergence.services.webhooks) ---------------------------------------
@dataclass(frozen=True, slots=True)
class SubscriptionView:
    id: str
    tenant: str
    url: str
    events: tuple[str, ...]
    stack_id: str | None
    secret: str
    last_event_id: int
    created_at: float


@dataclass(frozen=True, slots=True)
class DeliveryView:
    id: int
    subscription_id: str
    event_id: str
    event_type: str
    body: dict[str, Any]
    attempts: int
    next_attempt_at: float | None
    delivered_at: float | None
    last_error: str


@dataclass(frozen=True, slots=True)
class NewDelivery:
    subscription_id: str
    event_id: str
    event_type: str
    body: dict[str, Any]


# worker processes (convergence.workers.heartbeat) --------------------------------------------
WORKER = "worker"  # a Celery worker process
API = "api"  # an API process running steps on its in-process dispatcher


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """Who is beating: what a heartbeat writes (the time is the transaction's)."""

    id: str
    hostname: str
    pid: int
    kind: str  # WORKER | API
    started_at: float


@dataclass(frozen=True, slots=True)
class WorkerView:
    id: str
    hostname: str
    pid: int
    kind: str
    started_at: float
    heartbeat_at: float
    stopped_at: float | None

    def is_up(self, now: float, heartbeat_seconds: float) -> bool:
        """Beating: not stopped, and the last heartbeat younger than three intervals."""
        return self.stopped_at is None and now - self.heartbeat_at < 3 * heartbeat_seconds


# orphans: what a step made after its lease was taken over (convergence.engine.orphans) -------
@dataclass(frozen=True, slots=True)
class NewOrphan:
    record_id: int
    stack_id: str
    name: str
    type: str
    physical_id: str


@dataclass(frozen=True, slots=True)
class Orphan:
    id: int
    record_id: int
    stack_id: str
    name: str
    type: str
    physical_id: str
    attempts: int


@dataclass(frozen=True, slots=True)
class Claim:
    """The record of an orphan, as the sweeper took it."""

    adopted: bool = False  # the record names the orphan: it is not one (the row is gone)
    held: bool = False  # True: the sweeper holds the record's lease (False: no record left)
    watch: float | None = None  # a poll watch the lease replaced, put back at the end
    action: str = ""
    status: str = ""


# recovery (convergence.engine.sweeper) -------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TakenOver:
    """A record whose lease (or poll watch) the sweeper took over, and whose it was."""

    record_id: int
    stack_id: str
    name: str
    type: str
    physical_id: str | None
    action: str
    status: str
    owner: str | None  # None: a poll watch nobody kept


# software configuration (convergence.services.software) ---------------------------------------
@dataclass(frozen=True, slots=True)
class SoftwareConfigView:
    id: str
    tenant: str
    name: str
    group: str
    config: Any  # text, or a structure (a structured config's)
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    options: dict[str, Any]
    created_at: float
    owner: str | None = None  # the record of the resource that made it, if one did


@dataclass(frozen=True, slots=True)
class SoftwareDeploymentView:
    id: str
    tenant: str
    config_id: str
    server_id: str
    action: str
    status: str  # IN_PROGRESS COMPLETE FAILED
    status_reason: str
    input_values: dict[str, Any]
    output_values: dict[str, Any]
    created_at: float
    updated_at: float | None = None
    stack_user_project_id: str | None = None
    # The stack's resource that made it (None: made through the API).
    stack_id: str | None = None
    resource_name: str | None = None
    owner: str | None = None
