"""Nested stacks and parked nodes: a stack made by a resource of another names its parent
stack, the resource and the record (version) that owns it, its depth and its tree's top-level
stack; a node whose step
waits on something outside its stack (a nested stack's end) is ``PARKED`` and holds nothing,
and ``woken`` says the event it waits for came while its step was still running; a stored
desired state keeps what the autoscaler decided beside the user's input (``scaling``).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models). Stacks stored before are top-level stacks (depth 0).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("stacks") as batch:
        batch.add_column(sa.Column("parent_id", sa.String(36), nullable=True))
        batch.add_column(sa.Column("parent_resource", sa.String(255), nullable=True))
        batch.add_column(sa.Column("parent_record_id", BigId, nullable=True))
        batch.add_column(sa.Column("nested_depth", sa.Integer(), nullable=False,
                                   server_default=sa.text("0")))
        batch.add_column(sa.Column("root_id", sa.String(36), nullable=True))
    op.create_index("ix_stacks_parent", "stacks", ["parent_id"])
    op.create_index("ix_stacks_root", "stacks", ["root_id"])
    op.create_index("ix_stacks_parent_record", "stacks", ["parent_record_id"])
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("woken", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
    with op.batch_alter_table("templates") as batch:
        batch.add_column(sa.Column("scaling", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("templates") as batch:
        batch.drop_column("scaling")
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("woken")
    op.drop_index("ix_stacks_parent_record", table_name="stacks")
    op.drop_index("ix_stacks_root", table_name="stacks")
    op.drop_index("ix_stacks_parent", table_name="stacks")
    with op.batch_alter_table("stacks") as batch:
        batch.drop_column("root_id")
        batch.drop_column("nested_depth")
        batch.drop_column("parent_record_id")
        batch.drop_column("parent_resource")
        batch.drop_column("parent_id")
