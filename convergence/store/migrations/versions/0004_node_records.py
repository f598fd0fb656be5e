"""Nodes by record: a superseded step hands its resource to the current traversal's node;
and no foreign key from nodes to their traversal.

The planner writes a traversal's node rows in the transaction that holds its traversal row,
and nothing else inserts them: the key's per-row check only cost time (a third of the insert
of a 10,000-resource plan on PostgreSQL) and locks.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_nodes_record", "nodes", ["traversal_id", "record_id"])
    with op.batch_alter_table("nodes") as batch:
        batch.drop_constraint("nodes_traversal_id_fkey", type_="foreignkey")


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.create_foreign_key("nodes_traversal_id_fkey", "traversals", ["traversal_id"],
                                 ["id"])
    op.drop_index("ix_nodes_record", table_name="nodes")
