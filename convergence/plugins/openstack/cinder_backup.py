"""A volume's ``deletion_policy: Snapshot``: a Cinder backup taken, waited for, then the volume
deleted while the backup is kept.

Callers: ``OS::Cinder::Volume`` (:mod:`convergence.plugins.openstack.cinder_volume`) calls
:func:`backing_up` from its ``snapshot_delete`` and again from ``poll`` while the pending
state's phase is :data:`PHASE`. As Heat does, the policy takes a *backup* rather than a Cinder
snapshot, because a snapshot cannot outlive its volume. The backup is named from the record
(:func:`backup_name`) and found again by that name and its volume, so a step interrupted after
Cinder made it does not make a second one; its id then rides in the pending state. A backup
that fails fails the delete and keeps the volume: nothing is deleted that the policy was meant
to keep.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from convergence.plugins.base import PluginContext, Progress, ResourceFailure
from convergence.plugins.openstack.errors import Absent, translated
from convergence.plugins.openstack.names import physical_name
from convergence.plugins.openstack.resource import BUILDING, FAILED, OpenStackResource

PHASE = "backup"  # the pending state's phase while the backup is taken
SUFFIX = "-backup"


def backup_name(ctx: PluginContext) -> str:
    """The name of the backup the record's volume is kept in."""
    return physical_name(ctx, 255 - len(SUFFIX)) + SUFFIX


def find_backup(conn: Any, ctx: PluginContext, volume_id: str) -> Any | None:
    """The backup an earlier attempt of this step took (a failed one is not reused)."""
    name = backup_name(ctx)
    for backup in conn.block_storage.backups(volume_id=volume_id, name=name):
        if backup.volume_id == volume_id and backup.name == name and \
                backup.status not in ("error", "deleting"):
            return backup
    return None


def backing_up(volumes: OpenStackResource, ctx: PluginContext, conn: Any, physical_id: str,
               props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
    """One step of the Snapshot policy for volume ``physical_id``: take the backup, wait for
    it, then delete the volume through ``volumes`` (the volume type)."""
    try:
        with translated(f"reading volume {physical_id}"):
            volume = volumes.fetch(conn, physical_id)
    except Absent:
        return Progress.finished(physical_id)  # gone already: nothing left to keep or delete
    backup_id = state.get("backup_id")
    try:
        with translated(f"backing up volume {physical_id}"):
            backup = conn.block_storage.get_backup(backup_id) if backup_id \
                else find_backup(conn, ctx, physical_id)
            if backup is None:
                phase = volumes.state(volume).phase
                if phase == FAILED:
                    # A volume in error holds nothing Cinder can back up; Heat deletes a
                    # failed volume without a backup too.
                    return volumes.delete(ctx, physical_id, props)
                if phase == BUILDING:
                    return Progress.pending(volumes.poll_delay, {"phase": PHASE}, physical_id)
                ctx.check_lease()
                backup = conn.block_storage.create_backup(
                    volume_id=physical_id, name=backup_name(ctx),
                    description=f"volume {physical_id} of {ctx.stack_name}/"
                                f"{ctx.resource_name}, kept by its deletion_policy Snapshot")
    except Absent:
        raise ResourceFailure(f"backup {backup_id} of volume {physical_id} vanished before it "
                              "was available; the volume is kept") from None
    waiting = Progress.pending(volumes.poll_delay, {"phase": PHASE, "backup_id": str(backup.id)},
                               physical_id)
    status = str(backup.status or "").lower()
    if status == "error":
        raise ResourceFailure(f"backup {backup.id} of volume {physical_id} failed: "
                              f"{backup.fail_reason or 'no reason given'}; the volume is kept")
    if status != "available" or volumes.state(volume).phase == BUILDING:
        return waiting  # the backup, or the volume still backing-up, is not done
    return volumes.delete(ctx, physical_id, props)
