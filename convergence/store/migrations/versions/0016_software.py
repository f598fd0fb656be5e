"""Software configuration: Heat's software configs and deployments, the key that signs the
URLs servers and wait conditions signal through, and a deadline on parked nodes.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27

``software_configs`` are immutable (a config, its group, inputs, outputs and options);
``software_deployments`` apply one to a server and hold what its agent reported (status,
output values); a deployment a stack's resource made names its stack, resource and owner
record, so that its agent's report wakes that resource. ``handle_signals``: the signals a
wait condition handle received (by the handle's id and the signal's). ``service_keys`` holds
the engine's signing key when no ``CONVERGENCE_SIGNING_KEY`` is set. ``nodes.wake_at``: when
a parked node is woken even if the event it waits on never comes (a wait condition's
timeout).

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "software_configs",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("group", sa.String(128), nullable=False),
        sa.Column("config", sa.JSON(), nullable=True),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("outputs", sa.JSON(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("owner", sa.String(128), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="software_configs_pkey"),
    )
    op.create_index("ix_software_configs_tenant", "software_configs", ["tenant", "created_at"])
    op.create_index("ix_software_configs_owner", "software_configs", ["owner"])
    op.create_table(
        "software_deployments",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("config_id", sa.String(36), nullable=False),
        sa.Column("server_id", sa.String(255), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=False),
        sa.Column("input_values", sa.JSON(), nullable=False),
        sa.Column("output_values", sa.JSON(), nullable=False),
        sa.Column("stack_user_project_id", sa.String(64), nullable=True),
        sa.Column("stack_id", sa.String(36), nullable=True),
        sa.Column("resource_name", sa.String(255), nullable=True),
        sa.Column("owner", sa.String(128), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="software_deployments_pkey"),
    )
    op.create_index("ix_software_deployments_server", "software_deployments",
                    ["tenant", "server_id"])
    op.create_index("ix_software_deployments_owner", "software_deployments", ["owner"])
    op.create_table(
        "service_keys",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="service_keys_pkey"),
    )
    op.create_table(
        "handle_signals",
        sa.Column("handle_id", sa.String(64), nullable=False),
        sa.Column("signal_id", sa.String(255), nullable=False),
        sa.Column("stack_id", sa.String(36), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("handle_id", "signal_id", name="handle_signals_pkey"),
    )
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("wake_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("wake_at")
    op.drop_table("handle_signals")
    op.drop_table("service_keys")
    op.drop_table("software_deployments")
    op.drop_table("software_configs")
