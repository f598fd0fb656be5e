"""Resource paging: a stack's resources of one status, and of one type, in name order, as
``ix_resources_stack_name`` serves all of a stack's, so that the resource list's ``status`` and
``type`` filters (the few failures among many resources, a rare type) read a page without
walking past the rest, and its order by type is read, not sorted; its ``physical_resource_id``
filter, an index look-up; and the records whose ``requires`` holds a record's id (a listing's
``required_by``) found through an index rather than by reading every record of the stack: on
PostgreSQL a GIN index on ``requires`` as ``jsonb``; on SQLite, which cannot index the elements
of a JSON list, the table ``resource_requirements`` (each record's ``requires`` as rows), kept
by triggers on ``resources`` and filled here from the records there are.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02

Written from ``store/models.py`` as it was at this revision, and frozen (nothing here imports
the models). On PostgreSQL ``resource_requirements`` is made too (the schema is one), and stays
empty. A later migration that rebuilds ``resources`` on SQLite drops its triggers with the old
table: it must make them again (:data:`SQLITE_TRIGGERS`, copied, as migrations are frozen). On
a large ``resources`` table, PostgreSQL builds each index under a lock that holds record writes
back until it is built; the upgrade is a one-shot job run before the new release.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

_ROWS_OF_NEW = ("INSERT INTO resource_requirements (record_id, required_id) "
                "SELECT DISTINCT NEW.id, value FROM json_each(NEW.requires);")
_ROWS_OF_OLD = "DELETE FROM resource_requirements WHERE record_id = OLD.id;"

# A record's rows follow its ``requires``: made with it, remade when the list changes (an
# update that writes the same list leaves them), gone with it.
SQLITE_TRIGGERS = {
    "resources_requirements_insert":
        f"AFTER INSERT ON resources BEGIN {_ROWS_OF_NEW} END",
    "resources_requirements_update":
        "AFTER UPDATE OF requires ON resources WHEN OLD.requires IS NOT NEW.requires "
        f"BEGIN {_ROWS_OF_OLD} {_ROWS_OF_NEW} END",
    "resources_requirements_delete":
        f"AFTER DELETE ON resources BEGIN {_ROWS_OF_OLD} END",
}


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def upgrade() -> None:
    op.create_index("ix_resources_stack_status", "resources", ["stack_id", "status", "name"])
    op.create_index("ix_resources_stack_type", "resources", ["stack_id", "type", "name"])
    op.create_index("ix_resources_stack_physical", "resources", ["stack_id", "physical_id"])
    op.create_table(
        "resource_requirements",
        sa.Column("record_id", BigId, nullable=False),
        sa.Column("required_id", BigId, nullable=False),
        sa.PrimaryKeyConstraint("record_id", "required_id"),
    )
    op.create_index("ix_resource_requirements_required", "resource_requirements",
                    ["required_id"])
    if not _sqlite():
        # No pending list: a look-up would scan every entry written since the last vacuum.
        op.execute("CREATE INDEX ix_resources_requires ON resources "
                   "USING gin (CAST(requires AS JSONB) jsonb_path_ops) WITH (fastupdate = off)")
        return
    op.execute("INSERT INTO resource_requirements (record_id, required_id) "
               "SELECT DISTINCT resources.id, value FROM resources, json_each(resources.requires)")
    for name, body in SQLITE_TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {body}")


def downgrade() -> None:
    if _sqlite():
        for name in SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    else:
        op.drop_index("ix_resources_requires", table_name="resources")
    op.drop_index("ix_resource_requirements_required", table_name="resource_requirements")
    op.drop_table("resource_requirements")
    op.drop_index("ix_resources_stack_physical", table_name="resources")
    op.drop_index("ix_resources_stack_type", table_name="resources")
    op.drop_index("ix_resources_stack_status", table_name="resources")
