"""OS::Heat::TestResource's table, ``test_entities``, in a migration of its own.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03

The backend of a plugin (``convergence.plugins.heat.test_backend``, through
``convergence.store.entity_tables``), apart from the engine's tables. Until this revision the
initial one (0001) made it, so a database made before has it already, with the entities its
tests and soaks count: it is kept as it is. A database made since gets it here.

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "test_entities"


def upgrade() -> None:
    # IF NOT EXISTS, so that the same statements serve a database made before, whose table
    # 0001 made (rows and all), and one made since; and ``--sql`` scripts too.
    op.create_table(
        TABLE,
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("deleted_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="test_entities_pkey"),
        if_not_exists=True,
    )
    op.create_index("ix_test_entities_owner", TABLE, ["owner"], if_not_exists=True)


def downgrade() -> None:
    op.drop_table(TABLE)  # its index with it
