"""Templates carry their parameters as a stack show gives them, and on SQLite their text is
their last column, so that a stack list or show reads what it needs of a template, whatever its
size, without the text.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28

``templates.shown_parameters``: every parameter's value (hidden ones masked), written with the
template, so that a stack show no longer builds the template's definition (a minute and
gigabytes of memory for a template of 1,000,000 resources). Templates stored before have none
(NULL): a show builds their definition, as before.

On SQLite the table is rebuilt with ``text`` last. SQLite keeps a row's columns in order, and a
big text spills into a chain of overflow pages that must be walked to reach any column after
it: ``description`` (migration 0010 appended it) cost a stack list and a stack show 60 MB of
page reads for a 1,000,000-resource template. Before the text, it is on the row's first page.
PostgreSQL keeps a big text out of line (TOAST), wherever the column is: only the column is
added there.

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The columns in their order, the text last.
ORDER = ("id", "files", "environments", "parameters", "created_at", "description", "scaling",
         "shown_parameters", "text")


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def upgrade() -> None:
    sqlite = _sqlite()
    with op.batch_alter_table("templates", recreate="always" if sqlite else "auto",
                              partial_reordering=[ORDER] if sqlite else None) as batch:
        batch.add_column(sa.Column("shown_parameters", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("templates") as batch:
        batch.drop_column("shown_parameters")
