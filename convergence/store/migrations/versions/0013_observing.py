"""Converging with observed reality. Traversals: ``observe`` is true for a ``stack check``
(which only looks) and for an update asked to converge (``converge: true``), whose steps look
at the cloud before they decide. Stacks: ``observe`` is a stack's opt-in to the observer
(which looks at its resources now and then and repairs what it finds, by type policy) and
``observed_at`` when the observer last looked.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models). Traversals and stacks stored before did not observe (false).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("traversals") as batch:
        batch.add_column(sa.Column("observe", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
    with op.batch_alter_table("stacks") as batch:
        batch.add_column(sa.Column("observe", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
        batch.add_column(sa.Column("observed_at", sa.Float(), nullable=True))
    op.create_index("ix_stacks_observe", "stacks", ["observe", "observed_at"])


def downgrade() -> None:
    op.drop_index("ix_stacks_observe", table_name="stacks")
    with op.batch_alter_table("stacks") as batch:
        batch.drop_column("observed_at")
        batch.drop_column("observe")
    with op.batch_alter_table("traversals") as batch:
        batch.drop_column("observe")
