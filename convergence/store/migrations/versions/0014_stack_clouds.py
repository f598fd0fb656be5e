"""A stack's cloud: ``cloud`` names the ``clouds.yaml`` entry its resources live in (null: the
engine's own cloud) and ``trust_id`` the Keystone trust its caller gave the engine (null: the
cloud's own credentials), so that work outliving the caller's token is done in the caller's
project; the index finds the trusts of deleted stacks still to be deleted.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models). Stacks stored before use the engine's own cloud (null).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("stacks") as batch:
        batch.add_column(sa.Column("cloud", sa.String(255), nullable=True))
        batch.add_column(sa.Column("trust_id", sa.String(64), nullable=True))
    op.create_index("ix_stacks_trust", "stacks", ["trust_id"])


def downgrade() -> None:
    op.drop_index("ix_stacks_trust", table_name="stacks")
    with op.batch_alter_table("stacks") as batch:
        batch.drop_column("trust_id")
        batch.drop_column("cloud")
