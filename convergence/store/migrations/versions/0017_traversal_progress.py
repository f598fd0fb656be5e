"""What the sweeper reads, indexed for stacks of a million resources; when a traversal last
counted a node off, the sweeper's measure of a traversal that moves.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27

``traversals.progressed_at`` is set whenever a batch counts finished nodes off its
traversal (the same UPDATE that decrements its counters, so it costs nothing more). The
sweeper re-offers a ready node as lost only when its traversal has not progressed for a
lease's length: a queue of a million ready nodes waiting their turn behind busy workers is
not lost work, and scanning it every sweep made a big traversal's cost grow with its size.
``ix_resources_lease`` (partial: only records under a lease or a poll watch) finds expired
leases without reading every record; ``ix_traversals_state`` finds the running traversals,
whose nodes the sweeper then reads by ``ix_nodes_state``, without reading every plan's nodes.

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("traversals") as batch:
        batch.add_column(sa.Column("progressed_at", sa.Float(), nullable=True))
    op.create_index("ix_traversals_state", "traversals", ["state"])
    op.create_index("ix_resources_lease", "resources", ["lease_expires"],
                    sqlite_where=sa.text("lease_expires IS NOT NULL"),
                    postgresql_where=sa.text("lease_expires IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("ix_resources_lease", table_name="resources")
    op.drop_index("ix_traversals_state", table_name="traversals")
    with op.batch_alter_table("traversals") as batch:
        batch.drop_column("progressed_at")
