"""Cinder's quotas in the simulated cloud: a project's limits, what it uses, and the 413
answers Cinder gives when a volume, a snapshot or more gigabytes would go over them.

Callers: ``convergence_simcloud.volume``, ``volume_snapshots``, ``volume_backups`` and
``volume_actions`` call :func:`enforce` before making or growing something;
``volume_types`` shows :func:`quota_limits` and :func:`usage` in ``os-quota-sets`` and
``limits``. Limits are the defaults (:data:`DEFAULT_QUOTA`) under the cloud-wide ones (kind
``"volume_quota"``, id ``"default"``) under the project's own (id: the project id); usage is
counted from the live volumes, snapshots and backups. Called under the cloud's lock.
"""

from __future__ import annotations

from convergence_simcloud import copy_records, volume_records
from convergence_simcloud.context import CloudError
from convergence_simcloud.state import SimCloud
from convergence_simcloud.volume_common import cinder_error

DEFAULT_QUOTA = {"volumes": 10, "gigabytes": 1000, "snapshots": 10, "backups": 10,
                 "backup_gigabytes": 1000, "groups": 10, "per_volume_gigabytes": -1}


def quota_limits(cloud: SimCloud, project_id: str) -> dict[str, int]:
    """The project's limits: the defaults (kind ``"volume_quota"`` id ``"default"``) under the
    project's own (id: the project id)."""
    table = cloud.kind("volume_quota")
    found = dict(DEFAULT_QUOTA)
    found.update({k: v for k, v in table.get("default", {}).items()
                  if k not in ("id", "project_id")})
    found.update({k: v for k, v in table.get(project_id, {}).items()
                  if k not in ("id", "project_id")})
    return found


def usage(cloud: SimCloud, project_id: str) -> dict[str, int]:
    """What the project uses now: volumes, gigabytes (volumes and snapshots), snapshots,
    backups and their gigabytes."""
    volumes = [v for v in volume_records.live_volumes(cloud) if v["project_id"] == project_id]
    snapshots = [s for s in cloud.kind("snapshot").values() if s["project_id"] == project_id]
    backups = [b for b in copy_records.live(cloud, "backup") if b["project_id"] == project_id]
    return {"volumes": len(volumes), "snapshots": len(snapshots),
            "gigabytes": sum(int(v["size"]) for v in volumes)
            + sum(int(s["size"]) for s in snapshots),
            "backups": len(backups), "backup_gigabytes": sum(int(b["size"]) for b in backups),
            "groups": 0, "per_volume_gigabytes": 0}


def enforce(cloud: SimCloud, project_id: str, count_kind: str | None, gigabytes: int) -> None:
    """413 as Cinder answers when one more ``count_kind`` ("volumes", "snapshots") or
    ``gigabytes`` more would go over the project's quota."""
    limits = quota_limits(cloud, project_id)
    used = usage(cloud, project_id)
    per_volume = limits["per_volume_gigabytes"]
    if count_kind == "volumes" and per_volume >= 0 and gigabytes > per_volume:
        raise cinder_error(413, f"VolumeSizeExceedsLimit: Requested volume size {gigabytes}G "
                                f"is larger than maximum allowed limit {per_volume}G.")
    if count_kind is not None and 0 <= limits[count_kind] < used[count_kind] + 1:
        raise over_count(count_kind, limits[count_kind])
    if gigabytes and 0 <= limits["gigabytes"] < used["gigabytes"] + gigabytes:
        raise cinder_error(413, "VolumeSizeExceedsAvailableQuota: Requested volume or snapshot "
                                f"exceeds allowed gigabytes quota. Requested {gigabytes}G, "
                                f"quota is {limits['gigabytes']}G and {used['gigabytes']}G "
                                "has been consumed.")


def over_count(count_kind: str, limit: int) -> CloudError:
    name = "VolumeLimitExceeded" if count_kind == "volumes" else "SnapshotLimitExceeded"
    return cinder_error(413, f"{name}: Maximum number of {count_kind} allowed ({limit}) "
                             f"exceeded for quota '{count_kind}'.")
