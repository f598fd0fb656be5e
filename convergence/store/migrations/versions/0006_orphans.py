"""Orphans: what a step made after its lease was taken over, for the sweeper to remove.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-21

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models). Constraints are named as PostgreSQL would name them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Integer primary keys autoincrement on SQLite only as INTEGER; BIGINT elsewhere.
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "orphans",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("record_id", _BIG_ID, nullable=False),
        sa.Column("stack_id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("type", sa.String(255), nullable=False),
        sa.Column("physical_id", sa.String(255), nullable=False),
        sa.Column("noted_at", sa.Float(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="orphans_pkey"),
    )


def downgrade() -> None:
    op.drop_table("orphans")
