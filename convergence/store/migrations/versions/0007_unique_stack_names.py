"""A live stack's name is unique in its tenant: a unique index on (tenant, name) of the stacks
not deleted, so that two creates racing on one name end with one stack and one refusal.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models). A database that already holds two live stacks of one name in a tenant (what the
race left before this index) cannot take it: the upgrade stops and names them, for an operator
to delete all but one, rather than rename or drop a stack behind its owner's back.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LIVE = sa.text("deleted_at IS NULL")


def upgrade() -> None:
    duplicates = op.get_bind().execute(sa.text(
        "SELECT tenant, name, COUNT(*) FROM stacks WHERE deleted_at IS NULL "
        "GROUP BY tenant, name HAVING COUNT(*) > 1 ORDER BY tenant, name")).fetchall()
    if duplicates:
        listed = "; ".join(f"tenant {t!r}: {n!r} ({c} stacks)" for t, n, c in duplicates[:20])
        raise RuntimeError(
            "live stacks share a name in their tenant, so names cannot be made unique: "
            f"{listed}. Delete all but one of each (by id), then upgrade again.")
    op.create_index("ix_stacks_tenant_live_name", "stacks", ["tenant", "name"], unique=True,
                    sqlite_where=_LIVE, postgresql_where=_LIVE)


def downgrade() -> None:
    op.drop_index("ix_stacks_tenant_live_name", table_name="stacks")
