"""Templates carry their description: a stack list shows each stack's template description
(Heat's ``description``) by reading one short column, not every template body.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models). Templates stored before have no description (NULL): readers parse those from the
template text, as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("templates") as batch:
        batch.add_column(sa.Column("description", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("templates") as batch:
        batch.drop_column("description")
