"""The tables: SQLAlchemy 2 typed models. The only place the schema is written down.

Alembic migrations (``store/migrations``) create these tables; ``rows.py`` gives the store's
aggregate modules their Core tables, ``entity_tables.py`` the plugins' tables and
``migrations/env.py`` the metadata to compare against. Nothing outside ``convergence.store``
reaches them: the engine goes through the ports' ``Store`` protocol. Times are epoch seconds
(floats) so that SQLite and PostgreSQL compare them the same way and leases need no time-zone
arithmetic.

- ``templates``: what a stack should be, immutable and content-addressed (template text,
  files, environment documents, parameter values), with the template's description and its
  parameters as a stack show gives them.
- ``stacks``: a tenant's named desired state, with its generation counters and outcome; a
  nested stack names its parent stack and the resource record that made it.
- ``resources``: one row per physical resource *version* (a replacement and what it replaces
  live side by side); the lease and fencing token of whoever works on it.
- ``resource_requirements``: on SQLite, each record's ``requires`` as rows, kept by triggers
  (the resource list's ``required_by``).
- ``traversals``: one pass toward one generation, with node counters.
- ``nodes``: the plan of a traversal, one row per (resource record, phase), keyed by a
  sequence number the planner assigns, with a dependency counter and successor list.
- ``events``: what happened, for users and clients.
- ``test_entities``: the backend of OS::Heat::TestResource, apart from the engine's tables:
  an entity table for a plugin (``store/entity_tables.py``), with a migration of its own.
- ``workers``: the processes running steps (and API processes stepping in-process), each
  with its last heartbeat (``convergence.workers.heartbeat``).
- ``sweeps``: one row per periodic job (the sweeper): who holds its turn, until when, and
  when it last ran, so that among all the workers one runs it at a time, once a period; and
  one per stack an embedded process is driving (``stack:<id>``, ``convergence.store.holds``).
- ``software_configs``, ``software_deployments``: Heat's software configuration API and
  what the servers' agents report (``store/software.py``); ``handle_signals``: what wait
  condition handles received; ``service_keys``: the key the engine signs the URLs servers
  signal through with, when none is configured (encrypted: ``store/sealing.py``, as are a
  subscription's secret, the hidden parameters' values of ``templates`` and the secret
  members of ``resources``' properties, attributes and operation and of ``stacks``' outputs).
- ``orphans``: what a step made in the cloud after its lease had been taken over (it woke up
  late): its result was refused, so no record names it, and the sweeper removes it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
    cast,
    false,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Integer primary keys autoincrement on SQLite only as INTEGER; BigInteger elsewhere.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class TemplateRow(Base):
    __tablename__ = "templates"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # sha256 of the content
    files: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    environments: Mapped[list[Any]] = mapped_column(JSON, default=list)
    parameters: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[float] = mapped_column(Float)
    # The template's description, written with it so that a stack list reads no template
    # body; None: stored before migration 0010 (read from the text then).
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    # What the autoscaler decided (``TemplateContent.scaling``); None: nothing.
    scaling: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # Every parameter's value as a stack show gives it (hidden ones masked), written with
    # the template so that a show parses no template; None: stored before migration 0018.
    shown_parameters: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # Last (migration 0018): SQLite keeps a row's columns in this order, and a big text spills
    # into a chain of overflow pages that must be walked to reach any column after it (60 MB
    # of pages for a 1,000,000-resource template, on every stack list and show). A column
    # added later goes before it (SQLite's ADD COLUMN appends: a migration rebuilds the table
    # there, as 0018 does; ``tests/store/test_migrations.py`` checks the order).
    text: Mapped[str] = mapped_column(Text)


class StackRow(Base):
    __tablename__ = "stacks"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    tenant: Mapped[str] = mapped_column(String(64))
    generation: Mapped[int] = mapped_column(Integer, default=0)
    observed_generation: Mapped[int] = mapped_column(Integer, default=0)
    traversal_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    template_id: Mapped[str | None] = mapped_column(ForeignKey("templates.id"), nullable=True)
    # The last template the stack converged to successfully: what a rollback returns to.
    rollback_template_id: Mapped[str | None] = mapped_column(
        ForeignKey("templates.id"), nullable=True)
    action: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str] = mapped_column(Text, default="")
    # On SQLite the last column (migration 0020): a big group's member lists are not walked
    # to reach the others.
    outputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    timeout_mins: Mapped[int | None] = mapped_column(Integer, nullable=True)
    disable_rollback: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    deleted_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    # Opted in to the observer (``convergence.engine.observer``), and when it last looked.
    observe: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    observed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    # The stack's cloud: a ``clouds.yaml`` entry (None: the engine's own), and the Keystone
    # trust its caller gave the engine (None: the cloud's own credentials are used).
    cloud: Mapped[str | None] = mapped_column(String(255), nullable=True)
    trust_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # A nested stack: the stack whose resource made it, that resource's name and the record
    # (version) that owns it (what its end wakes), and how deep it is (0: a top-level stack).
    parent_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    parent_resource: Mapped[str | None] = mapped_column(String(255), nullable=True)
    parent_record_id: Mapped[int | None] = mapped_column(BigId, nullable=True)
    nested_depth: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # The top-level stack of its tree (None: it is one).
    root_id: Mapped[str | None] = mapped_column(String(36), nullable=True)

    __table_args__ = (
        Index("ix_stacks_tenant_name", "tenant", "name"),
        Index("ix_stacks_parent", "parent_id"),
        Index("ix_stacks_parent_record", "parent_record_id"),
        Index("ix_stacks_root", "root_id"),
        Index("ix_stacks_observe", "observe", "observed_at"),
        Index("ix_stacks_trust", "trust_id"),
        # One live stack of a name per tenant: creates racing on a name end with one stack.
        Index("ix_stacks_tenant_live_name", "tenant", "name", unique=True,
              sqlite_where=text("deleted_at IS NULL"),
              postgresql_where=text("deleted_at IS NULL")),
    )


class ResourceRow(Base):
    __tablename__ = "resources"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    stack_id: Mapped[str] = mapped_column(ForeignKey("stacks.id"))
    name: Mapped[str] = mapped_column(String(255))
    type: Mapped[str] = mapped_column(String(255))
    physical_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    action: Mapped[str] = mapped_column(String(16), default="INIT")
    status: Mapped[str] = mapped_column(String(16), default="COMPLETE")
    status_reason: Mapped[str] = mapped_column(Text, default="")
    # The template (and generation) this version was last converged to; None: never.
    template_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    generation: Mapped[int] = mapped_column(Integer, default=0)
    requires: Mapped[list[Any]] = mapped_column(JSON, default=list)  # record ids built on
    replaces: Mapped[int | None] = mapped_column(BigId, nullable=True)
    replaced_by: Mapped[int | None] = mapped_column(BigId, nullable=True)
    properties: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # as resolved
    attributes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    reference_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    # A pending operation's poll state (which action, since when, the plugin's own data).
    operation: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # Delete, Retain or Snapshot: the policy of the definition a step last acted for (see
    # engine/deletion.py); None: never stamped (converged before migration 0009).
    deletion_policy: Mapped[str | None] = mapped_column(String(16), nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_expires: Mapped[float | None] = mapped_column(Float, nullable=True)
    fencing_token: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)

    __table_args__ = (
        Index("ix_resources_stack_name", "stack_id", "name"),
        # The resource list (``store/resource_pages.py``): its status and type filters in name
        # order, its order by type, and its physical id filter.
        Index("ix_resources_stack_status", "stack_id", "status", "name"),
        Index("ix_resources_stack_type", "stack_id", "type", "name"),
        Index("ix_resources_stack_physical", "stack_id", "physical_id"),
        # The sweeper's expired leases: only the few records held right now are in it.
        Index("ix_resources_lease", "lease_expires",
              sqlite_where=text("lease_expires IS NOT NULL"),
              postgresql_where=text("lease_expires IS NOT NULL")),
        # Never an id twice, on SQLite too (PostgreSQL's sequence never reuses one): the id
        # is part of the key plugins find what a record made by, so a new record given a
        # deleted one's id would adopt what that one left in the cloud, retained or lost.
        {"sqlite_autoincrement": True},
    )


# ``required_by``: the records whose ``requires`` holds a record's id, found through the
# elements of the list (``requires @> '[id]'``). PostgreSQL only: SQLite cannot index a JSON
# list's elements (``RequirementRow`` is its counterpart there). Without a pending list
# (``fastupdate``): entries go into the index as records are written (which costs about the
# same), and a look-up never scans megabytes of entries waiting for a vacuum.
Index("ix_resources_requires",
      cast(ResourceRow.__table__.c.requires, JSONB).label("requires_jsonb"),
      postgresql_using="gin", postgresql_ops={"requires_jsonb": "jsonb_path_ops"},
      postgresql_with={"fastupdate": "off"},
      ).ddl_if(dialect="postgresql")


class RequirementRow(Base):
    """On SQLite, ``resources.requires`` as rows: one per record and record it requires, so
    that the records built on a record (``required_by``) are an index look-up, as
    ``ix_resources_requires`` makes them on PostgreSQL. Kept by triggers on ``resources``
    (migration 0011: a record inserted, its ``requires`` changed, the record deleted), so that
    no writer can forget it; nothing else writes it. On PostgreSQL the table is there, empty,
    and nothing reads it (``store/resource_pages.py``). A migration that rebuilds
    ``resources`` on SQLite (``batch_alter_table``) drops the triggers with the old table and
    must make them again (as migration 0011 does)."""

    __tablename__ = "resource_requirements"

    record_id: Mapped[int] = mapped_column(BigId, primary_key=True)  # the record that requires
    required_id: Mapped[int] = mapped_column(BigId, primary_key=True)  # what it requires

    __table_args__ = (Index("ix_resource_requirements_required", "required_id"),)


class TraversalRow(Base):
    __tablename__ = "traversals"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    stack_id: Mapped[str] = mapped_column(ForeignKey("stacks.id"))
    generation: Mapped[int] = mapped_column(Integer)
    action: Mapped[str] = mapped_column(String(16))  # CREATE UPDATE DELETE ROLLBACK CHECK
    # Its steps look at the cloud before they decide (a check; an update that converges).
    observe: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    template_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    state: Mapped[str] = mapped_column(String(16))  # PLANNING RUNNING COMPLETE FAILED SUPERSEDED
    nodes_total: Mapped[int] = mapped_column(Integer, default=0)
    nodes_remaining: Mapped[int] = mapped_column(Integer, default=0)
    nodes_failed: Mapped[int] = mapped_column(Integer, default=0)
    failure: Mapped[str] = mapped_column(Text, default="")
    deadline: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    # When a batch last counted nodes off it (started running, at first): a traversal that
    # moves has not lost its ready nodes' messages, however long its queue.
    progressed_at: Mapped[float | None] = mapped_column(Float, nullable=True)

    # The sweeper's running (and planning) traversals, however many ended ones there are.
    __table_args__ = (Index("ix_traversals_stack", "stack_id"),
                      Index("ix_traversals_state", "state"))


class NodeRow(Base):
    __tablename__ = "nodes"

    # No foreign key: only the planner writes node rows, holding their traversal's row.
    traversal_id: Mapped[str] = mapped_column(String(36))
    seq: Mapped[int] = mapped_column(Integer)
    record_id: Mapped[int | None] = mapped_column(BigId, nullable=True)
    name: Mapped[str] = mapped_column(String(255))
    phase: Mapped[str] = mapped_column(String(8))  # converge | cleanup
    pending: Mapped[int] = mapped_column(Integer)  # predecessors not done yet
    # WAITING READY PARKED DONE FAILED SKIPPED. PARKED: its step waits on something outside
    # its stack (a nested stack's end) and holds nothing: that event makes it READY again.
    state: Mapped[str] = mapped_column(String(8))
    # Woken while it was not parked (its step was running): the park that step records does
    # not hold, the node goes on at once.
    woken: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Parked with a deadline: woken then even if its event never comes (a wait condition's
    # timeout; a deployment's look at a report whose wake-up was lost).
    wake_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    successors: Mapped[list[Any]] = mapped_column(JSON, default=list)  # seqs
    updated_at: Mapped[float] = mapped_column(Float)

    # No index begins with the traversal (migration 0019): given a traversal's seqs, or its
    # records, or a state, every way in goes by those first. An index that began with the
    # traversal let PostgreSQL's planner go in by the traversal alone, whenever its figures
    # made a traversal look small (none yet, or figures taken before the traversal began),
    # and filter a batch's 200 nodes out of the whole plan: every batch then read the plan.
    __table_args__ = (PrimaryKeyConstraint("seq", "traversal_id", name="nodes_pkey"),
                      Index("ix_nodes_state", "state", "traversal_id"),
                      Index("ix_nodes_record", "record_id", "traversal_id"))


class EventRow(Base):
    __tablename__ = "events"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    stack_id: Mapped[str] = mapped_column(String(36))
    traversal_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    generation: Mapped[int] = mapped_column(Integer, default=0)
    resource_name: Mapped[str] = mapped_column(String(255))
    physical_resource_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    resource_type: Mapped[str] = mapped_column(String(255), default="")
    action: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float)

    # A stack's events in id order, both ways (paging, streams); those of one resource, and
    # those of one status (the failures), in id order too (``store/events.py``).
    __table_args__ = (Index("ix_events_stack", "stack_id", "id"),
                      Index("ix_events_stack_resource", "stack_id", "resource_name", "id"),
                      Index("ix_events_stack_status", "stack_id", "status", "id"))


class TestEntityRow(Base):
    """What OS::Heat::TestResource "creates": counted by tests to catch duplicates and leaks."""

    __tablename__ = "test_entities"
    __test__ = False

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128))  # the resource record it belongs to
    value: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float)
    deleted_at: Mapped[float | None] = mapped_column(Float, nullable=True)

    __table_args__ = (Index("ix_test_entities_owner", "owner"),)


class SubscriptionRow(Base):
    """A tenant's notification webhook (``convergence.services.webhooks``): which event types
    of which stacks (all the tenant's when ``stack_id`` is None) to POST to ``url``, signed with
    ``secret``. ``last_event_id``: the ``events`` id up to which deliveries were recorded."""

    __tablename__ = "subscriptions"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    url: Mapped[str] = mapped_column(Text)
    events: Mapped[list[Any]] = mapped_column(JSON, default=list)  # event type patterns
    stack_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    secret: Mapped[str] = mapped_column(Text)
    last_event_id: Mapped[int] = mapped_column(BigId, default=0)
    created_at: Mapped[float] = mapped_column(Float)

    __table_args__ = (Index("ix_subscriptions_tenant", "tenant"),)


class DeliveryRow(Base):
    """One notification to one subscription, until delivered or given up (at least once).

    ``event_id`` is the de-duplication key the receiver sees (``X-Event-Id``), the same on every
    attempt; ``next_attempt_at`` None: no attempt left."""

    __tablename__ = "deliveries"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    subscription_id: Mapped[str] = mapped_column(ForeignKey("subscriptions.id"))
    event_id: Mapped[str] = mapped_column(String(64))
    event_type: Mapped[str] = mapped_column(String(128))
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    delivered_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_error: Mapped[str] = mapped_column(Text, default="")

    __table_args__ = (
        UniqueConstraint("subscription_id", "event_id", name="uq_deliveries_subscription_event"),
        Index("ix_deliveries_due", "delivered_at", "next_attempt_at"),
    )


class WorkerRow(Base):
    """A process that runs steps: a Celery worker process, or an API process driving the
    in-process dispatcher. Upserted every ``heartbeat_seconds``; ``stopped_at`` set on a
    graceful shutdown."""

    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(255), primary_key=True)  # the worker id
    hostname: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))  # worker | api
    started_at: Mapped[float] = mapped_column(Float)
    heartbeat_at: Mapped[float] = mapped_column(Float)
    stopped_at: Mapped[float | None] = mapped_column(Float, nullable=True)

    __table_args__ = (Index("ix_workers_heartbeat", "heartbeat_at"),)


class SweepRow(Base):
    """A periodic job that one process at a time runs (``convergence.engine.sweeper``): a
    turn is taken with a compare-and-swap on ``held_until``/``finished_at``. Rows named
    ``stack:<id>`` are holds on stacks (``convergence.store.holds``)."""

    __tablename__ = "sweeps"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(255), nullable=True)
    held_until: Mapped[float | None] = mapped_column(Float, nullable=True)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    runs: Mapped[int] = mapped_column(Integer, default=0)


class OrphanRow(Base):
    """Something a step made after its lease was taken over: the step's result was refused
    (fenced off), so its record does not name it. Noted by the engine in the transaction that
    refused the result; removed from the cloud by the sweeper while it holds the record's
    lease, unless the record's new holder adopted it meanwhile
    (``convergence.engine.orphans``). No foreign key: the record may be gone by then."""

    __tablename__ = "orphans"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    record_id: Mapped[int] = mapped_column(BigId)
    stack_id: Mapped[str] = mapped_column(String(36))
    name: Mapped[str] = mapped_column(String(255))
    type: Mapped[str] = mapped_column(String(255))
    physical_id: Mapped[str] = mapped_column(String(255))
    noted_at: Mapped[float] = mapped_column(Float)
    attempts: Mapped[int] = mapped_column(Integer, default=0)


class SoftwareConfigRow(Base):
    """A software config (immutable): made through the API, or by a resource (``owner``: its
    record's owner key), or derived by a deployment from its config and input values."""

    __tablename__ = "software_configs"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(Text, default="")
    group: Mapped[str] = mapped_column(String(128), default="Heat::Ungrouped")
    config: Mapped[Any] = mapped_column(JSON, nullable=True)  # text, or a structure
    inputs: Mapped[list[Any]] = mapped_column(JSON, default=list)
    outputs: Mapped[list[Any]] = mapped_column(JSON, default=list)
    options: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    created_at: Mapped[float] = mapped_column(Float)

    __table_args__ = (Index("ix_software_configs_tenant", "tenant", "created_at"),
                      Index("ix_software_configs_owner", "owner"))


class SoftwareDeploymentRow(Base):
    """A config applied to a server, and what the server's agent reported of it. One a
    stack's resource made names the stack, the resource and its record's owner key."""

    __tablename__ = "software_deployments"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    config_id: Mapped[str] = mapped_column(String(36))
    server_id: Mapped[str] = mapped_column(String(255))
    action: Mapped[str] = mapped_column(String(16), default="INIT")
    status: Mapped[str] = mapped_column(String(16), default="COMPLETE")
    status_reason: Mapped[str] = mapped_column(Text, default="")
    input_values: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    output_values: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    stack_user_project_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    stack_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    resource_name: Mapped[str | None] = mapped_column(String(255), nullable=True)
    owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float | None] = mapped_column(Float, nullable=True)

    __table_args__ = (Index("ix_software_deployments_server", "tenant", "server_id"),
                      Index("ix_software_deployments_owner", "owner"))


class ServiceKeyRow(Base):
    """A key of the engine's own (``signing``: what signed URLs are signed with)."""

    __tablename__ = "service_keys"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)


class HandleSignalRow(Base):
    """A signal a wait condition handle received: one per (handle, signal id); a signal with
    an id already received replaces it (as Heat keeps them)."""

    __tablename__ = "handle_signals"

    handle_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    signal_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    stack_id: Mapped[str] = mapped_column(String(36))
    status: Mapped[str] = mapped_column(String(16))  # SUCCESS FAILURE
    reason: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[Any] = mapped_column(JSON, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
