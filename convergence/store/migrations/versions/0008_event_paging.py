"""Event paging: a stack's events of one resource, and those of one status, in id order, as
``ix_events_stack`` serves all of a stack's: the resource-scoped event list and the
``resource_name`` filter, and the ``resource_status`` filter (the few failures among many
events), read a page without walking past the events they do not match.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models). On a large ``events`` table, PostgreSQL builds each index under a lock that holds
event writes back until it is built; the upgrade is a one-shot job run before the new release.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_events_stack_resource", "events", ["stack_id", "resource_name", "id"])
    op.create_index("ix_events_stack_status", "events", ["stack_id", "status", "id"])


def downgrade() -> None:
    op.drop_index("ix_events_stack_status", table_name="events")
    op.drop_index("ix_events_stack_resource", table_name="events")
