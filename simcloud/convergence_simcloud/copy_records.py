"""Cinder's snapshots and backups: the lazy state machine they share, which moves one through
its transient statuses (creating, restoring, deleting) as the clock goes, and the fault rules
that keep it creating, fail it or make it vanish.

Callers: ``convergence_simcloud.volume_snapshots`` (kind ``"snapshot"``) and
``volume_backups`` (kind ``"backup"``) start phases with :func:`start_phase` and read through
:func:`advance`; ``volume_quotas.usage`` counts :func:`live` backups against the ``backups``
and ``backup_gigabytes`` quotas. Every function here is called under the cloud's lock. The
phase is kept in the record's ``_sim`` (``phase``, ``phase_until``, ``after``; ``None``:
gone at the end), as for volumes (``convergence_simcloud.volume_records``).
"""

from __future__ import annotations

from convergence_simcloud import faults, volume_records
from convergence_simcloud.state import Record, SimCloud
from convergence_simcloud.volume_common import cinder_error

SERVICE = "volume"


def start_phase(cloud: SimCloud, kind: str, record: Record, phase: str, after: str | None,
                seconds: float) -> None:
    """Put ``record`` (of ``kind``) in the transient status ``phase`` for ``seconds``, then
    ``after`` (``None``: gone), and bring it up to the clock."""
    record["status"] = phase
    volume_records.sim(record).update(phase=phase, phase_until=cloud.now() + seconds,
                                      after=after)
    volume_records.touch(cloud, record)
    advance(cloud, kind, record)


def advance(cloud: SimCloud, kind: str, record: Record) -> Record | None:
    """Bring ``record`` (of ``kind``) up to the clock; None when it is gone. A delete that a
    ``delete_hangs`` rule caught (``_sim.hangs``) never ends; a failed backup says why in
    ``fail_reason``."""
    state = volume_records.sim(record)
    now = cloud.now()
    fate = faults.fate(cloud, SERVICE, kind, record, float(state.get("made_at", now)))
    if fate.vanish_at is not None and now >= fate.vanish_at:
        cloud.kind(kind).pop(record["id"], None)
        return None
    phase = state.get("phase")
    if phase is not None and record["status"] == phase and \
            not (phase == "creating" and fate.stays_building) and \
            not (phase == "deleting" and state.get("hangs")) and \
            now >= float(state.get("phase_until", now)):
        state.pop("phase", None)
        if state.get("after") is None:
            cloud.kind(kind).pop(record["id"], None)
            return None
        record["status"] = state["after"]
        volume_records.touch(cloud, record)
    if fate.error_at is not None and now >= fate.error_at and not state.get("errored"):
        state["errored"] = True
        if record["status"] in ("creating", "available"):
            state.pop("phase", None)
            record["status"] = "error"
            if kind == "backup":
                record["fail_reason"] = fate.message
    return record


def start_delete(cloud: SimCloud, kind: str, record: Record, what: str) -> None:
    """A delete (its status already checked): the delete fault rules (409, or 500 and
    ``error_deleting``; a hanging delete stays ``deleting``), then ``deleting`` for the
    delete phase of its size."""
    rule = faults.delete_rule(cloud, SERVICE, kind, record)
    if rule is not None and rule.effect == faults.DELETE_CONFLICT:
        raise cinder_error(409, rule.message or f"{what} {record['id']} is busy.")
    if rule is not None and rule.effect == faults.DELETE_ERROR:
        record["status"] = "error_deleting"
        raise cinder_error(500, rule.message or "The server has either erred or is incapable "
                                                "of performing the requested operation.")
    volume_records.sim(record)["hangs"] = rule is not None and \
        rule.effect == faults.DELETE_HANGS
    start_phase(cloud, kind, record, "deleting", None,
                cloud.options.volume_phase_seconds("delete", int(record["size"])))


def live(cloud: SimCloud, kind: str) -> list[Record]:
    """Every record of ``kind``, advanced to the clock (the gone ones removed)."""
    return [r for r in list(cloud.kind(kind).values()) if advance(cloud, kind, r) is not None]
