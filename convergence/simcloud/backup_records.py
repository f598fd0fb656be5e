"""Cinder's backup records: the lazy state machine that moves a backup through creating,
restoring and deleting as the clock goes, and the fault rules that keep it creating, fail it
or make it vanish.

Callers: ``convergence.simcloud.volume_backups`` (the ``/backups`` routes) starts phases with
:func:`start_phase` and reads backups through :func:`advance`; ``volume_common.usage`` counts
:func:`live_backups` against the ``backups`` and ``backup_gigabytes`` quotas. Every function
here is called under the cloud's lock.
"""

from __future__ import annotations

from convergence.simcloud import faults, volume_records
from convergence.simcloud.state import Record, SimCloud

KIND = "backup"


def start_phase(cloud: SimCloud, backup: Record, phase: str, after: str | None,
           seconds: float) -> None:
    """Put ``backup`` in the transient status ``phase`` for ``seconds``, then ``after``
    (``None``: gone)."""
    backup["status"] = phase
    volume_records.sim(backup).update(phase=phase, phase_until=cloud.now() + seconds,
                                      after=after)
    volume_records.touch(cloud, backup)


def advance(cloud: SimCloud, backup: Record) -> Record | None:
    """Bring ``backup`` up to the clock; None when it is gone."""
    state = volume_records.sim(backup)
    now = cloud.now()
    fate = faults.fate(cloud, "volume", KIND, backup, float(state.get("made_at", now)))
    if fate.vanish_at is not None and now >= fate.vanish_at:
        cloud.kind(KIND).pop(backup["id"], None)
        return None
    phase = state.get("phase")
    if phase is not None and backup["status"] == phase and \
            not (phase == "creating" and fate.stays_building) and \
            now >= float(state.get("phase_until", now)):
        state.pop("phase", None)
        if state.get("after") is None:
            cloud.kind(KIND).pop(backup["id"], None)
            return None
        backup["status"] = state["after"]
        volume_records.touch(cloud, backup)
    if fate.error_at is not None and now >= fate.error_at and not state.get("errored"):
        state["errored"] = True
        if backup["status"] in ("creating", "available"):
            state.pop("phase", None)
            backup["status"] = "error"
            backup["fail_reason"] = fate.message
    return backup


def live_backups(cloud: SimCloud) -> list[Record]:
    """Every backup, advanced to the clock (the gone ones removed)."""
    return [b for b in list(cloud.kind(KIND).values()) if advance(cloud, b) is not None]
