"""Nodes by record: a superseded step hands its resource to the current traversal's node.

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


def downgrade() -> None:
    op.drop_index("ix_nodes_record", table_name="nodes")
