"""Notification webhooks: the subscriptions and deliveries tables.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-28

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models). Constraints are named as PostgreSQL would name them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Integer primary keys autoincrement on SQLite only as INTEGER; BIGINT elsewhere.
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("stack_id", sa.String(36), nullable=True),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("last_event_id", _BIG_ID, nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="subscriptions_pkey"),
    )
    op.create_index("ix_subscriptions_tenant", "subscriptions", ["tenant"])

    op.create_table(
        "deliveries",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("subscription_id", sa.String(36), nullable=False),
        sa.Column("event_id", sa.String(64), nullable=False),
        sa.Column("event_type", sa.String(128), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.Float(), nullable=True),
        sa.Column("delivered_at", sa.Float(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="deliveries_pkey"),
        sa.ForeignKeyConstraint(["subscription_id"], ["subscriptions.id"],
                                name="deliveries_subscription_id_fkey"),
        sa.UniqueConstraint("subscription_id", "event_id",
                            name="uq_deliveries_subscription_event"),
    )
    op.create_index("ix_deliveries_due", "deliveries", ["delivered_at", "next_attempt_at"])


def downgrade() -> None:
    # Referencing table first; dropping a table drops its indexes.
    op.drop_table("deliveries")
    op.drop_table("subscriptions")
