"""Every stored secret sealed again with the newest key: the end of a key rotation.

Callers: ``convergence db rotate-keys`` (``convergence.cli.db_cmd``), with the process's
sealer (``CONVERGENCE_ENCRYPTION_KEYS``: the new key first, the old ones after it) and the
secret fields of the installed resource types. A rotation: put a new key first in the
setting of every process and restart them (what they write is sealed with it, what was
sealed before still opens), run this, then drop the old keys from the setting.

It also seals the secrets it finds in clear, written before the store encrypted them: the
values of hidden parameters (a stored template's ``shown_parameters`` mask them), what the
resource types declare secret (a key pair's private key, a server's admin password, a random
string), webhook secrets and the engine's signing key. (A resource's value that took a
hidden parameter's is sealed when a step next writes its record.) Rows are read and written
a chunk at a time, each chunk a transaction of its own; a record is written only if no step
changed it meanwhile (its fencing token and update time unchanged), a subscription or key
only if its value is still the one read: the engines may run meanwhile. Run it again to
finish what it left (it says how many rows it sealed; a second run seals them again, with
the same key, harmlessly).

SQLite keeps a row's old bytes in its free pages and its write-ahead log: the file is then
compacted (``VACUUM``, the log emptied), so that no old value, in clear or under an old key,
stays in it. PostgreSQL keeps old row versions until its vacuum reuses their space; an
operator who must have them gone from the disk runs ``VACUUM FULL`` on ``templates``,
``resources``, ``subscriptions`` and ``service_keys``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Engine, String, Table, or_, select, update
from sqlalchemy import cast as sql_cast

from convergence.ports.views import RecordChange, SecretFields
from convergence.store import models as m
from convergence.store.records import sealed
from convergence.store.rows import CHUNK, T_RES, T_SUB, T_TEMPLATE, record_view
from convergence.store.sealed_templates import resealed_columns
from convergence.store.sealing import PREFIX, SEALED, Sealer

T_KEY = cast(Table, m.ServiceKeyRow.__table__)
HIDDEN = "******"  # how ``shown_parameters`` shows a hidden parameter's value


@dataclass
class Rekeyed:
    """How many rows of each kind were written again (sealed with the newest key)."""

    templates: int = 0
    records: int = 0
    subscriptions: int = 0
    keys: int = 0
    skipped: int = 0  # records a step changed meanwhile (sealed by that step's write)


def rekey(engine: Engine, sealer: Sealer, typed: Mapping[str, SecretFields]) -> Rekeyed:
    """Seal every stored secret with ``sealer``'s newest key (see the module's docstring).
    ``typed``: the secret fields of each resource type that has any."""
    done = Rekeyed()
    _templates(engine, sealer, done)
    _records(engine, sealer, typed, done)
    _subscriptions(engine, sealer, done)
    _keys(engine, sealer, done)
    if engine.dialect.name == "sqlite":
        _compact(engine)
    return done


def _compact(engine: Engine) -> None:
    """SQLite: the file rewritten without its free pages, the write-ahead log emptied."""
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        conn.exec_driver_sql("VACUUM")
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


def _templates(engine: Engine, sealer: Sealer, done: Rekeyed) -> None:
    after = ""
    while True:
        with engine.begin() as conn:
            rows = conn.execute(select(T_TEMPLATE.c.id, T_TEMPLATE.c.parameters,
                                       T_TEMPLATE.c.environments, T_TEMPLATE.c.files,
                                       T_TEMPLATE.c.shown_parameters)
                                .where(T_TEMPLATE.c.id > after).order_by(T_TEMPLATE.c.id)
                                .limit(CHUNK)).all()
            for row in rows:
                hidden = [k for k, v in (row.shown_parameters or {}).items() if v == HIDDEN]
                columns = resealed_columns(sealer, row, hidden)
                if columns:
                    conn.execute(update(T_TEMPLATE).where(T_TEMPLATE.c.id == row.id)
                                 .values(**columns))
                    done.templates += 1
        if len(rows) < CHUNK:
            return
        after = rows[-1].id


def _has_seal(column: Any) -> Any:
    return sql_cast(column, String).like(f"%{SEALED}%")


def _records(engine: Engine, sealer: Sealer, typed: Mapping[str, SecretFields],
             done: Rekeyed) -> None:
    candidates = or_(T_RES.c.type.in_(sorted(typed)), _has_seal(T_RES.c.properties),
                     _has_seal(T_RES.c.attributes), _has_seal(T_RES.c.operation),
                     T_RES.c.reference_id.like(f"{PREFIX}%"))
    after = 0
    while True:
        with engine.begin() as conn:
            rows = conn.execute(select(T_RES).where(T_RES.c.id > after, candidates)
                                .order_by(T_RES.c.id).limit(CHUNK)).all()
            for row in rows:
                secret = _fields(sealer, row, typed.get(row.type))
                if secret is None:
                    continue
                view = record_view(row, sealer)
                values = sealed(sealer, RecordChange(row.id, row.fencing_token, {
                    "properties": dict(view.properties), "attributes": dict(view.attributes),
                    "operation": view.operation, "reference_id": view.reference_id},
                    secret=secret))
                written = conn.execute(update(T_RES).where(
                    T_RES.c.id == row.id, T_RES.c.fencing_token == row.fencing_token,
                    T_RES.c.updated_at == row.updated_at).values(**values))
                if written.rowcount == 1:
                    done.records += 1
                else:
                    done.skipped += 1
        if len(rows) < CHUNK:
            return
        after = rows[-1].id


def _fields(sealer: Sealer, row: Any, typed: SecretFields | None) -> SecretFields | None:
    """What of a stored record to seal: what its type declares, and what it keeps sealed
    already (the names inside its seals)."""
    def sealed_names(obj: Any) -> frozenset[str]:
        if not isinstance(obj, Mapping) or SEALED not in obj:
            return frozenset()
        return frozenset(k for k in sealer.open_members(obj) if k not in obj)

    operation = row.operation if isinstance(row.operation, Mapping) else {}
    properties = sealed_names(row.properties) | sealed_names(operation.get("properties"))
    attributes = sealed_names(row.attributes)
    reference = bool(row.reference_id and str(row.reference_id).startswith(PREFIX))
    if typed is not None:
        properties |= typed.properties
        attributes |= typed.attributes
        reference = reference or typed.reference
    if not (properties or attributes or reference):
        return None
    return SecretFields(properties, attributes, reference=reference)


def _subscriptions(engine: Engine, sealer: Sealer, done: Rekeyed) -> None:
    with engine.begin() as conn:
        for row in conn.execute(select(T_SUB.c.id, T_SUB.c.secret)).all():
            written = conn.execute(update(T_SUB).where(
                T_SUB.c.id == row.id, T_SUB.c.secret == row.secret,
            ).values(secret=sealer.reseal(row.secret)))
            done.subscriptions += written.rowcount


def _keys(engine: Engine, sealer: Sealer, done: Rekeyed) -> None:
    with engine.begin() as conn:
        for row in conn.execute(select(T_KEY.c.name, T_KEY.c.value)).all():
            written = conn.execute(update(T_KEY).where(
                T_KEY.c.name == row.name, T_KEY.c.value == row.value,
            ).values(value=sealer.reseal(row.value)))
            done.keys += written.rowcount
