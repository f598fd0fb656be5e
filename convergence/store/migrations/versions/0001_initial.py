"""The initial schema: templates, stacks, resources, traversals, nodes, events.

Revision ID: 0001
Revises:
Create Date: 2026-11-21

Written from ``store/models.py`` as it was at this revision, and frozen: later model changes
belong in new revisions, so nothing here imports the models. Constraints carry the names
PostgreSQL would give them anyway, so that later migrations can refer to them by name on
SQLite too (batch mode cannot drop an unnamed constraint).

OS::Heat::TestResource's table, ``test_entities``, was made here too until it got a migration
of its own (0012), which makes it if a database does not have it yet: a database made before
has it from here, with its rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Integer primary keys autoincrement on SQLite only as INTEGER; BIGINT elsewhere.
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "templates",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("environments", sa.JSON(), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="templates_pkey"),
    )

    op.create_table(
        "stacks",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("observed_generation", sa.Integer(), nullable=False),
        sa.Column("traversal_id", sa.String(36), nullable=True),
        sa.Column("template_id", sa.String(64), nullable=True),
        sa.Column("rollback_template_id", sa.String(64), nullable=True),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=False),
        sa.Column("outputs", sa.JSON(), nullable=False),
        sa.Column("timeout_mins", sa.Integer(), nullable=True),
        sa.Column("disable_rollback", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("deleted_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="stacks_pkey"),
        sa.ForeignKeyConstraint(["template_id"], ["templates.id"],
                                name="stacks_template_id_fkey"),
        sa.ForeignKeyConstraint(["rollback_template_id"], ["templates.id"],
                                name="stacks_rollback_template_id_fkey"),
    )
    op.create_index("ix_stacks_tenant_name", "stacks", ["tenant", "name"])

    op.create_table(
        "resources",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("stack_id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("type", sa.String(255), nullable=False),
        sa.Column("physical_id", sa.String(255), nullable=True),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=False),
        sa.Column("template_id", sa.String(64), nullable=True),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("requires", sa.JSON(), nullable=False),
        sa.Column("replaces", _BIG_ID, nullable=True),
        sa.Column("replaced_by", _BIG_ID, nullable=True),
        sa.Column("properties", sa.JSON(), nullable=False),
        sa.Column("attributes", sa.JSON(), nullable=False),
        sa.Column("reference_id", sa.Text(), nullable=True),
        sa.Column("operation", sa.JSON(), nullable=True),
        sa.Column("lease_owner", sa.String(128), nullable=True),
        sa.Column("lease_expires", sa.Float(), nullable=True),
        sa.Column("fencing_token", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="resources_pkey"),
        sa.ForeignKeyConstraint(["stack_id"], ["stacks.id"], name="resources_stack_id_fkey"),
    )
    op.create_index("ix_resources_stack_name", "resources", ["stack_id", "name"])

    op.create_table(
        "traversals",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("stack_id", sa.String(36), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("template_id", sa.String(64), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("nodes_total", sa.Integer(), nullable=False),
        sa.Column("nodes_remaining", sa.Integer(), nullable=False),
        sa.Column("nodes_failed", sa.Integer(), nullable=False),
        sa.Column("failure", sa.Text(), nullable=False),
        sa.Column("deadline", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="traversals_pkey"),
        sa.ForeignKeyConstraint(["stack_id"], ["stacks.id"], name="traversals_stack_id_fkey"),
    )
    op.create_index("ix_traversals_stack", "traversals", ["stack_id"])

    op.create_table(
        "nodes",
        sa.Column("traversal_id", sa.String(36), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("record_id", _BIG_ID, nullable=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("phase", sa.String(8), nullable=False),
        sa.Column("pending", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(8), nullable=False),
        sa.Column("successors", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("traversal_id", "seq", name="nodes_pkey"),
        sa.ForeignKeyConstraint(["traversal_id"], ["traversals.id"],
                                name="nodes_traversal_id_fkey"),
    )
    op.create_index("ix_nodes_state", "nodes", ["traversal_id", "state"])

    op.create_table(
        "events",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("stack_id", sa.String(36), nullable=False),
        sa.Column("traversal_id", sa.String(36), nullable=True),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("resource_name", sa.String(255), nullable=False),
        sa.Column("physical_resource_id", sa.String(255), nullable=True),
        sa.Column("resource_type", sa.String(255), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="events_pkey"),
    )
    op.create_index("ix_events_stack", "events", ["stack_id", "id"])


def downgrade() -> None:
    # Referencing tables first; dropping a table drops its indexes.
    for table in ("events", "nodes", "traversals", "resources", "stacks", "templates"):
        op.drop_table(table)
    # A database made before ``test_entities`` had a migration of its own (0012, which drops
    # it on the way down) has it from here: it goes with the rest.
    op.execute("DROP TABLE IF EXISTS test_entities")
