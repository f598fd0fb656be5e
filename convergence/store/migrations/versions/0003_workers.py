"""Worker heartbeats: the workers table.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-05

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models). Constraints are named as PostgreSQL would name them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("id", sa.String(255), nullable=False),
        sa.Column("hostname", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("heartbeat_at", sa.Float(), nullable=False),
        sa.Column("stopped_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="workers_pkey"),
    )
    op.create_index("ix_workers_heartbeat", "workers", ["heartbeat_at"])


def downgrade() -> None:
    op.drop_table("workers")
