"""Records and their deletion policy: each record keeps the policy of the definition a step
last acted for, so that its cleanup honours Retain without resolving a template that may no
longer validate; and a record id is never given twice, on SQLite too.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models). Existing records get no policy: their cleanup reads it from the template they
were converged to, as before.

SQLite gave a new row the id of the newest row deleted (its ``INTEGER PRIMARY KEY`` without
``AUTOINCREMENT``): a record made after a retained one was let go of could get its id, hence
its owner key, and adopt the retained resource as its own, then delete it with itself. The
table is rebuilt with ``AUTOINCREMENT`` (ids already given are kept; the next one is above
every id ever used from now on). PostgreSQL's sequences never reuse an id: there the column
is simply added.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def upgrade() -> None:
    column = sa.Column("deletion_policy", sa.String(16), nullable=True)
    if not _sqlite():
        op.add_column("resources", column)
        return
    with op.batch_alter_table("resources", recreate="always",
                              table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(column)


def downgrade() -> None:
    if not _sqlite():
        op.drop_column("resources", "deletion_policy")
        return
    with op.batch_alter_table("resources", recreate="always") as batch:
        batch.drop_column("deletion_policy")
