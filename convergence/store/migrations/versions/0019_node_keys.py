"""Nodes keyed by seq, then traversal: no index of ``nodes`` begins with the traversal.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28

Every batch reads and writes its nodes by traversal and seqs (200 of them). With the key
``(traversal_id, seq)`` and the indexes ``(traversal_id, state)`` and ``(traversal_id,
record_id)``, PostgreSQL's planner could go in by the traversal alone and filter the seqs
out. It did so whenever its figures made the traversal look small: with no figures yet (a
database autovacuum has not analysed), or with figures taken before the traversal began
(then a traversal matches one row). Every batch then read the traversal's whole plan: a
100,000-resource update took 165 s after an ANALYZE, against 38 s once each batch read its
own nodes. Now the key is ``(seq, traversal_id)``, and the indexes are ``(state,
traversal_id)`` and ``(record_id, traversal_id)``. Given seqs, records or a state, the
planner has only that column to go in by. The rows are rewritten on SQLite (its primary key
is part of the table) and the key rebuilt in place on PostgreSQL.

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _rekey(key: list[str], state: list[str], record: list[str]) -> None:
    op.drop_index("ix_nodes_state", table_name="nodes")
    op.drop_index("ix_nodes_record", table_name="nodes")
    with op.batch_alter_table("nodes", recreate="auto") as batch:
        batch.drop_constraint("nodes_pkey", type_="primary")
        batch.create_primary_key("nodes_pkey", key)
    op.create_index("ix_nodes_state", "nodes", state)
    op.create_index("ix_nodes_record", "nodes", record)


def upgrade() -> None:
    _rekey(["seq", "traversal_id"], ["state", "traversal_id"], ["record_id", "traversal_id"])


def downgrade() -> None:
    _rekey(["traversal_id", "seq"], ["traversal_id", "state"], ["traversal_id", "record_id"])
