"""Cinder's volume delete in the simulated cloud: its checks (status, attachments, snapshots),
the delete fault rules, and the volume ``deleting`` until its delete phase is over.

Callers: ``convergence_simcloud.volume`` (``DELETE /volumes/{id}``) and ``volume_actions``
(``os-force_delete``) call :func:`start_delete` under the cloud's lock; the volume is removed
by ``volume_records.advance`` when its ``deleting`` phase ends.
"""

from __future__ import annotations

from convergence_simcloud import faults, volume_records
from convergence_simcloud.state import Record, SimCloud
from convergence_simcloud.volume_common import cinder_error

DELETABLE = ("available", "error", "error_restoring", "error_extending", "error_managing")
IN_USE_MESSAGE = ("Invalid volume: Volume status must be available or error or error_restoring "
                  "or error_extending or error_managing and must not be migrating, attached, "
                  "belong to a group, have snapshots, awaiting a transfer, or be disassociated "
                  "from snapshots after volume transfer.")
FORCE_MESSAGE = ("Invalid volume: Volume must not be migrating, attached, belong to a group, "
                 "have snapshots, awaiting a transfer, or be disassociated from snapshots "
                 "after volume transfer.")


def start_delete(cloud: SimCloud, volume: Record, *, force: bool, cascade: bool) -> None:
    """Cinder's checks of a delete (``force``: any status), the delete fault rules, then the
    volume ``deleting`` until the delete phase is over."""
    snapshots = [s for s in cloud.kind("snapshot").values() if s["volume_id"] == volume["id"]]
    if (not force and volume["status"] not in DELETABLE) or volume["attachments"] or \
            (snapshots and not cascade):
        raise cinder_error(400, IN_USE_MESSAGE if not force else FORCE_MESSAGE)
    rule = faults.delete_rule(cloud, "volume", "volume", volume)
    if rule is not None and rule.effect == faults.DELETE_CONFLICT:
        raise cinder_error(409, rule.message or f"Volume {volume['id']} is busy.")
    if rule is not None and rule.effect == faults.DELETE_ERROR:
        volume["status"] = "error_deleting"
        volume_records.touch(cloud, volume)
        cloud.changed()
        raise cinder_error(500, rule.message or "The server has either erred or is incapable "
                                                "of performing the requested operation.")
    for snapshot in snapshots:
        cloud.kind("snapshot").pop(snapshot["id"], None)
    volume_records.sim(volume)["hangs"] = rule is not None and \
        rule.effect == faults.DELETE_HANGS
    volume_records.start_phase(cloud, volume, "deleting", None,
                               cloud.options.volume_phase_seconds("delete",
                                                                  int(volume["size"])))
    cloud.changed()
