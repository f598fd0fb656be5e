"""On SQLite a stack's outputs are its last column, so that reading a stack's other columns
costs the same whatever its outputs weigh.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28

SQLite keeps a row's columns in order, and a big value spills into a chain of overflow pages
that must be walked to reach any column after it (as migration 0018 found for a template's
text). A group's nested stack keeps its member lists in ``outputs``: tens of megabytes for a
group of 1,000,000, before ``disable_rollback``, ``created_at``, ``parent_id`` and the rest.
Every batch reads its stack first, so each one walked them (py-spy of the delete of such a
group: 60 % of the run in that read). The table is rebuilt with ``outputs`` last, its indexes
as they were (the partial unique one on live names with its predicate). PostgreSQL keeps a big value
out of line (TOAST), wherever the column is: nothing changes there.

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The columns in their order, the outputs last.
ORDER = ("id", "name", "tenant", "generation", "observed_generation", "traversal_id",
         "template_id", "rollback_template_id", "action", "status", "status_reason",
         "timeout_mins", "disable_rollback", "created_at", "updated_at", "deleted_at",
         "observe", "observed_at", "cloud", "trust_id", "parent_id", "parent_resource",
         "parent_record_id", "nested_depth", "root_id", "outputs")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table("stacks", recreate="always", partial_reordering=[ORDER]):
        pass


def downgrade() -> None:
    """The column order is SQLite's storage only: nothing to undo."""
