"""Nova's block device mappings (``block_device_mapping_v2``) for a new server in the simulated
cloud: booting from a volume, or from an image copied to a new volume, and extra volumes.

Callers: ``convergence_simcloud.server_boot`` calls :func:`parse` while it checks a create
request (400 with Nova's "Block Device Mapping is Invalid" messages for a missing, busy or
badly described volume) and :func:`attach` once the server is stored: each mapping with
``destination_type: volume`` attaches a Cinder volume (an existing one, or one made from an
image or blank with ``volume_size``) through ``convergence_simcloud.volume_records``;
``convergence_simcloud.servers.remove_server`` calls :func:`delete_on_termination` so that the
volumes mapped with ``delete_on_termination`` go with the server, and ``server_views`` reads
:func:`deletes_with` for ``os-extended-volumes:volumes_attached``.
"""

from __future__ import annotations

from typing import Any

from convergence_simcloud.compute import nova_error
from convergence_simcloud.context import Caller
from convergence_simcloud.state import Record, SimCloud

INVALID = "Block Device Mapping is Invalid: "


def _bad(message: str) -> Exception:
    return nova_error(400, INVALID + message)


def parse(cloud: SimCloud, who: Caller, mappings: Any) -> tuple[list[dict[str, Any]],
                                                                 str | None]:
    """The checked mappings, and the image a local root disk boots from (None: none)."""
    from convergence_simcloud import volume_records  # Cinder's records, beside this module

    if not isinstance(mappings, list):
        raise nova_error(400, "Invalid input for field/attribute block_device_mapping_v2. "
                              f"Value: {mappings}. It must be a list.")
    found, image = [], None
    for entry in mappings:
        if not isinstance(entry, dict):
            raise _bad("each mapping is an object.")
        source = entry.get("source_type", "volume" if entry.get("uuid") else "blank")
        destination = entry.get("destination_type", "volume" if source == "volume"
                                else "local")
        boot = str(entry.get("boot_index", "")) not in ("", "None", "-1")
        if destination == "local":
            if source == "image" and boot:
                image = str(entry.get("uuid") or "")
            continue
        if source in ("image", "blank") and int(entry.get("volume_size") or 0) <= 0:
            raise _bad("Images with destination_type 'volume' need to have a non-zero size "
                       "specified" if source == "image" else
                       "Blank volumes (source: 'blank', dest: 'volume') need to have non-zero "
                       "size")
        if source == "volume":
            volume = cloud.kind("volume").get(str(entry.get("uuid")))
            if volume is not None:
                volume = volume_records.advance(cloud, volume)
            if volume is None or not (who.is_admin or volume["project_id"] == who.project_id):
                raise _bad(f"failed to get volume {entry.get('uuid')}.")
            if volume["status"] != "available":
                raise nova_error(400, f"Invalid volume: volume '{volume['id']}' status must be "
                                      f"'available'. Currently in '{volume['status']}'")
        elif source == "image":
            if entry.get("uuid") not in cloud.kind("image"):
                raise nova_error(400, "Can not find requested image")
        elif source != "blank":
            raise _bad(f"source_type {source} is not supported here.")
        found.append({"source": source, "uuid": entry.get("uuid"), "boot": boot,
                      "size": int(entry.get("volume_size") or 0),
                      "delete": bool(entry.get("delete_on_termination", False))})
    return found, image


def attach(cloud: SimCloud, server: Record, mappings: list[dict[str, Any]]) -> None:
    """Attach the mapped volumes to the new ``server`` (making those it asks for)."""
    from convergence_simcloud import volume_records

    kept: list[dict[str, Any]] = []
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    if not any(m["boot"] for m in mappings):
        next(letters)  # vda is the local root disk
    for mapping in sorted(mappings, key=lambda m: not m["boot"]):
        if mapping["source"] == "volume":
            volume = cloud.kind("volume")[str(mapping["uuid"])]
        else:
            image = cloud.kind("image").get(str(mapping["uuid"])) or {}
            meta = ({k: str(image[k]) for k in ("disk_format", "container_format",
                                                 "min_disk", "min_ram") if k in image}
                    | {"image_id": str(image["id"]), "image_name": str(image["name"])}
                    if image else None)
            volume = volume_records.new_volume(
                cloud, server["project_id"], server["user_id"], mapping["size"],
                name="", availability_zone=server["availability_zone"],
                bootable=bool(image), image_metadata=meta)
        volume_records.start_attach(cloud, volume, server["id"], f"/dev/vd{next(letters)}")
        kept.append({"volume_id": volume["id"], "delete": mapping["delete"]})
    server["_sim"]["volumes"] = kept


def deletes_with(server: Record, volume_id: str) -> bool:
    return any(v["volume_id"] == volume_id and v["delete"]
               for v in server.get("_sim", {}).get("volumes", []))


def delete_on_termination(cloud: SimCloud, server: Record) -> None:
    """Delete the volumes mapped with ``delete_on_termination`` (after the detach)."""
    from convergence_simcloud import volume_records

    for mapping in server.get("_sim", {}).get("volumes", []):
        volume = cloud.kind("volume").get(mapping["volume_id"])
        if mapping["delete"] and volume is not None and not volume["attachments"]:
            volume_records.start_phase(cloud, volume, "deleting", None,
                                       cloud.options.volume_phase_seconds(
                                           "delete", int(volume["size"])))
