"""The sweeper's turn: a row per periodic job, taken by one process at a time.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models). Constraints are named as PostgreSQL would name them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("holder", sa.String(255), nullable=True),
        sa.Column("held_until", sa.Float(), nullable=True),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="sweeps_pkey"),
    )


def downgrade() -> None:
    op.drop_table("sweeps")
