"""One live test entity per owner: OS::Heat::TestResource's create is idempotent by its key.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-21

A create repeated by the engine after a crash already adopts what the first one made; this
makes the backend refuse a second live entity for the same resource record even when the two
creates overlap (a worker frozen between its INSERT and its COMMIT while another worker took
the resource over), as a cloud API with client tokens does. Frozen: nothing here imports the
models.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LIVE = sa.text("deleted_at IS NULL")


def upgrade() -> None:
    op.create_index("ux_test_entities_live_owner", "test_entities", ["owner"], unique=True,
                    postgresql_where=LIVE, sqlite_where=LIVE)


def downgrade() -> None:
    op.drop_index("ux_test_entities_live_owner", table_name="test_entities")
