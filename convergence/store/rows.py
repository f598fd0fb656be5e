"""The tables as SQLAlchemy Core sees them, and the rows turned into the ports' plain values.

Callers: every aggregate module of the store (``stacks``, ``traversals``, ``nodes``,
``records``, ``events``, ``resource_pages``, ``webhooks``, ``workers``, ``orphans``, ``sweeps``,
``holds``), which ``transactions`` composes into the concrete ``Tx``, and ``dialect``. Nothing
here leaves ``convergence.store``: the engine sees the views of :mod:`convergence.ports.views`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast

from sqlalchemy import ColumnElement, Connection, Table, literal, null
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.visitors import InternalTraversal

from convergence.ports.views import (
    DeliveryView,
    EventView,
    NodeView,
    RecordView,
    StackView,
    SubscriptionView,
    TraversalView,
    WorkerView,
)
from convergence.store import models as m
from convergence.store.sealing import PREFIX, SEALED, Sealer, opened

T_STACK = cast(Table, m.StackRow.__table__)
T_TEMPLATE = cast(Table, m.TemplateRow.__table__)
T_RES = cast(Table, m.ResourceRow.__table__)
T_TRAV = cast(Table, m.TraversalRow.__table__)
T_NODE = cast(Table, m.NodeRow.__table__)
T_EVENT = cast(Table, m.EventRow.__table__)
T_SUB = cast(Table, m.SubscriptionRow.__table__)
T_DELIVERY = cast(Table, m.DeliveryRow.__table__)
T_WORKER = cast(Table, m.WorkerRow.__table__)
T_ORPHAN = cast(Table, m.OrphanRow.__table__)
T_SWEEP = cast(Table, m.SweepRow.__table__)
T_REQUIREMENTS = cast(Table, m.RequirementRow.__table__)

# A stack's columns with null in place of its outputs: what a big group's nested stack keeps
# there lists every member, and most readers (every batch, the engine) want the rest.
STACK_WITHOUT_OUTPUTS = tuple(null().label(c.name) if c.name == "outputs" else c
                              for c in T_STACK.c)

CHUNK = 500  # IN-lists are split so no statement grows without bound


class TxPart:
    """What every aggregate's part of a transaction works with: its connection, the time
    the transaction stamps its writes with, and what its secrets are sealed with
    (``transactions.Tx`` sets them)."""

    conn: Connection
    now: float
    sealer: Sealer


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


class Row:
    """Attribute access to a slice of a joined row, by the columns of one table."""

    def __init__(self, table: Table, values: Sequence[Any]) -> None:
        self.__dict__.update(zip(table.c.keys(), values, strict=True))


class Unestimated(ColumnElement[Any]):
    """A bound value that PostgreSQL reads as a subquery's result (see :func:`keyed`);
    elsewhere, the value itself."""

    inherit_cache = True
    _traverse_internals = [("value", InternalTraversal.dp_clauseelement)]

    def __init__(self, value: ColumnElement[Any]) -> None:
        self.value = value
        self.type = value.type


@compiles(Unestimated)
def _as_value(element: Unestimated, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.value, **kw))


@compiles(Unestimated, "postgresql")
def _as_subquery(element: Unestimated, compiler: Any, **kw: Any) -> str:
    return f"(SELECT {compiler.process(element.value, **kw)})"


def keyed(column: Any, value: Any) -> ColumnElement[bool]:
    """``column = value`` for a key whose rows are new (a traversal's nodes, a stack's
    records), written so that PostgreSQL's planner estimates it as an average key.

    Given the value itself, the planner looks it up in its statistics. A traversal (or a
    stack) begun since the last ANALYZE is not there, so it is taken to match one row, and
    any index that begins with the key looks as cheap as one that also takes the rest of the
    look-up (a batch's 200 seqs or names): the planner goes in by the key alone and filters
    the rest out of every row of the key. Given a subquery's result, which it cannot look
    up, it takes the key to match an average share of the rows. SQLite keeps no statistics:
    it is given the value. (Without statistics at all, PostgreSQL takes a key to match 0.5 %
    of the rows either way: nodes keep no index that begins with the traversal, migration
    0019.)"""
    param = value if isinstance(value, ColumnElement) else literal(value, column.type)
    return cast(ColumnElement[bool], column == Unestimated(param))


def node_state() -> ColumnElement[str]:
    """A node's state as a filter beside a look-up by key (seqs, records): the same value,
    in a form no index serves. SQLite keeps no statistics, and given ``state IN (...)`` it
    went in by ``ix_nodes_state`` (every node of the traversal in that state) rather than by
    the primary key's 200 seqs: each batch read the whole waiting plan, and a traversal's
    cost grew with the square of its size. PostgreSQL, given the traversal by :func:`keyed`,
    picks the key either way."""
    return m.NodeRow.__table__.c.state.concat("")


def stack_view(row: Any, sealer: Sealer) -> StackView:
    """A stack, its secret outputs opened (read with its outputs: ``stack(outputs=True)``)."""
    return StackView(
        id=row.id, name=row.name, tenant=row.tenant, generation=row.generation,
        observed_generation=row.observed_generation, traversal_id=row.traversal_id,
        template_id=row.template_id, rollback_template_id=row.rollback_template_id,
        action=row.action, status=row.status, status_reason=row.status_reason,
        outputs=opened(sealer, row.outputs or {}), timeout_mins=row.timeout_mins,
        disable_rollback=row.disable_rollback, created_at=row.created_at,
        updated_at=row.updated_at, deleted_at=row.deleted_at, observe=bool(row.observe),
        cloud=row.cloud, trust_id=row.trust_id, parent_id=row.parent_id,
        parent_resource=row.parent_resource, parent_record_id=row.parent_record_id,
        nested_depth=row.nested_depth or 0, root_id=row.root_id,
    )


def traversal_view(row: Any) -> TraversalView:
    return TraversalView(
        id=row.id, stack_id=row.stack_id, generation=row.generation, action=row.action,
        template_id=row.template_id, state=row.state, nodes_total=row.nodes_total,
        nodes_remaining=row.nodes_remaining, nodes_failed=row.nodes_failed,
        failure=row.failure, deadline=row.deadline, observe=bool(row.observe),
    )


def record_view(row: Any, sealer: Sealer) -> RecordView:
    """A record, its secrets opened (a record with none pays three look-ups)."""
    properties, attributes, reference = row.properties or {}, row.attributes or {}, \
        row.reference_id
    operation = row.operation
    if SEALED in properties:
        properties = sealer.open_members(properties)
    if SEALED in attributes:
        attributes = sealer.open_members(attributes)
    if reference is not None and reference.startswith(PREFIX):
        reference = sealer.open(reference)
    if operation is not None and SEALED in (operation.get("properties") or ()):
        operation = {**operation, "properties": opened(sealer, operation["properties"])}
    return RecordView(
        id=row.id, stack_id=row.stack_id, name=row.name, type=row.type,
        physical_id=row.physical_id, action=row.action, status=row.status,
        status_reason=row.status_reason, template_id=row.template_id,
        generation=row.generation, requires=tuple(row.requires or ()), replaces=row.replaces,
        replaced_by=row.replaced_by, properties=properties,
        attributes=attributes, reference_id=reference,
        operation=operation, fencing_token=row.fencing_token, lease_owner=row.lease_owner,
        created_at=row.created_at, updated_at=row.updated_at,
        deletion_policy=row.deletion_policy,
    )


def node_view(row: Any) -> NodeView:
    return NodeView(
        traversal_id=row.traversal_id, seq=row.seq, record_id=row.record_id, name=row.name,
        phase=row.phase, pending=row.pending, state=row.state,
        successors=tuple(row.successors or ()), updated_at=row.updated_at,
    )


def event_view(row: Any) -> EventView:
    return EventView(
        id=row.id, stack_id=row.stack_id, generation=row.generation,
        resource_name=row.resource_name, physical_resource_id=row.physical_resource_id,
        resource_type=row.resource_type, action=row.action, status=row.status,
        reason=row.reason, created_at=row.created_at,
    )


def subscription_view(row: Any, sealer: Sealer) -> SubscriptionView:
    """A subscription, its secret opened."""
    return SubscriptionView(
        id=row.id, tenant=row.tenant, url=row.url, events=tuple(row.events or ()),
        stack_id=row.stack_id, secret=sealer.open(row.secret),
        last_event_id=int(row.last_event_id), created_at=row.created_at)


def delivery_view(row: Any) -> DeliveryView:
    return DeliveryView(
        id=row.id, subscription_id=row.subscription_id, event_id=row.event_id,
        event_type=row.event_type, body=row.body or {}, attempts=row.attempts,
        next_attempt_at=row.next_attempt_at, delivered_at=row.delivered_at,
        last_error=row.last_error or "")


def worker_view(row: Any) -> WorkerView:
    return WorkerView(
        id=row.id, hostname=row.hostname, pid=row.pid, kind=row.kind,
        started_at=row.started_at, heartbeat_at=row.heartbeat_at, stopped_at=row.stopped_at)
