"""The boot request of ``OS::Nova::Server``, built from the template's properties as Heat builds it.

Callers: ``convergence.plugins.openstack.nova_server`` calls :func:`boot_request` to make a
server (and :func:`server_name`, :func:`metadata`, :func:`user_data` and :func:`image_id`
when it updates one); ``nova_server_update`` reuses :func:`metadata` and :func:`user_data`
for a rebuild. The names in the template (flavor, image, networks) are resolved to ids here,
as Heat's translation rules resolve them.

What differs from Heat, and why:

- ``user_data`` in the ``HEAT_CFNTOOLS`` and ``SOFTWARE_CONFIG`` formats is a cloud-init
  multipart as Heat's is, holding the user data (as ``text/plain``, which cloud-init runs when
  it starts with ``#!`` and reads as cloud-config when it starts with ``#cloud-config``) and,
  for ``HEAT_CFNTOOLS``, its ``cfn-userdata`` copy for heat-cfntools; Heat's own in-instance
  parts (its boothook, part handler and the CFN metadata server's address) are left out: this
  engine serves no CFN API. The boundary is fixed, so the same properties give the same bytes.
- ``SOFTWARE_CONFIG`` adds a part of its own, ``os-collect-config.json``: the signed URL
  the server's agent polls for its software deployments (``agent_config``), whatever the
  ``software_config_transport`` (but Zaqar's, refused).
- ``block_device_mapping`` (Nova's legacy form) is sent in the form Nova turns it into,
  ``block_device_mapping_v2``: a mapping on ``vda`` boots.
- ``reservation_id`` is accepted and not sent: Nova's API takes none (it makes its own).
- ``personality`` is refused where Nova's API is at 2.57 or later, which refuses it, with the
  message Heat gives; before, it is sent.
"""

from __future__ import annotations

import base64
import email
import email.message
import json
from collections.abc import Mapping
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from typing import Any

from openstack import utils as sdk_utils

from convergence.plugins.base import PluginContext, ResourceFailure
from convergence.plugins.openstack.lookups import cached
from convergence.plugins.openstack.names import physical_name
from convergence.plugins.openstack.nova_server_networks import boot_networks
from convergence.plugins.openstack.nova_server_schema import HEAT_CFNTOOLS, RAW, SOFTWARE_CONFIG
from convergence.plugins.openstack.nova_server_tags import server_tags

BOUNDARY = "===============convergence-user-data=="
AGENT_PART = "os-collect-config.json"  # the agent's configuration, in SOFTWARE_CONFIG user data


def server_name(ctx: PluginContext, props: Mapping[str, Any]) -> str:
    """The template's name, else the record's physical name, Heat's shape (``names``)."""
    if props.get("name"):
        return str(props["name"])
    return physical_name(ctx)


def metadata(props: Mapping[str, Any]) -> dict[str, str]:
    """The metadata as Nova takes it: values that are not strings as JSON (Heat's
    ``meta_serialize``)."""
    return {str(k): v if isinstance(v, str) else json.dumps(v)
            for k, v in (props.get("metadata") or {}).items()}


def _part(content: str, filename: str, subtype: str) -> MIMEText:
    try:
        content.encode("us-ascii")
        charset = "us-ascii"
    except UnicodeEncodeError:
        charset = "utf-8"
    part = MIMEText(content, _subtype=subtype or "plain", _charset=charset)
    part.add_header("Content-Disposition", "attachment", filename=filename)
    return part


def _multipart(parts: list[tuple[str, str, str]]) -> str:
    whole = MIMEMultipart(boundary=BOUNDARY)
    for content, filename, subtype in parts:
        whole.attach(_part(content, filename, subtype))
    return whole.as_string()


def user_data_text(props: Mapping[str, Any], agent: str | None = None) -> str | None:
    """The user data in the property's format (None: none); ``agent``: the configuration of
    the server's software configuration agent (``SOFTWARE_CONFIG``), a part of its own."""
    content = str(props.get("user_data") or "")
    form = props.get("user_data_format") or HEAT_CFNTOOLS
    extra = [(agent, AGENT_PART, "json")] if agent and form == SOFTWARE_CONFIG else []
    if not content:
        return _multipart(extra) if extra else None
    if form == RAW:
        return content
    if form == HEAT_CFNTOOLS:
        return _multipart([(content, "cfn-userdata", "x-cfninitdata"),
                           (content, "user-data", "plain")])
    message = email.message_from_string(content)
    if message.is_multipart():
        parts = [p for p in message.get_payload() if isinstance(p, email.message.Message)]
        return _multipart([(str(p.get_payload()), p.get_filename() or "",
                            p.get_content_subtype()) for p in parts] + extra)
    return _multipart([(content, "user-data", "plain"), *extra])


def user_data(props: Mapping[str, Any], agent: str | None = None) -> str | None:
    """The user data as Nova takes it (base64)."""
    text = user_data_text(props, agent)
    return None if text is None else base64.b64encode(text.encode()).decode()


def agent_config(ctx: PluginContext, props: Mapping[str, Any]) -> str | None:
    """What the agent of a ``SOFTWARE_CONFIG`` server is told: poll the signed URL of its
    deployments' metadata (os-collect-config's ``request`` collector, Heat's POLL_TEMP_URL:
    every ``software_config_transport`` but Zaqar's is served this way)."""
    if props.get("user_data_format") != SOFTWARE_CONFIG:
        return None
    if props.get("software_config_transport") == "ZAQAR_MESSAGE":
        raise ResourceFailure("software_config_transport ZAQAR_MESSAGE is not supported: "
                              "this engine has no Zaqar; use POLL_TEMP_URL")
    backend = ctx.backends.get("software")
    if backend is None:
        return None
    url = backend.signed_url(ctx, "metadata")
    return json.dumps({"os-collect-config": {"collectors": ["request"],
                                             "request": {"metadata_url": url}}})


def image_id(conn: Any, ref: str) -> str:
    return str(cached(conn, ("image", ref),
                      lambda: conn.image.find_image(ref, ignore_missing=False)).id)


def flavor_of(conn: Any, ref: str) -> Any:
    return cached(conn, ("flavor", ref),
                  lambda: conn.compute.find_flavor(ref, ignore_missing=False))


def _legacy(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """One ``block_device_mapping`` entry in the form Nova converts it to."""
    device = str(mapping["device_name"])
    entry: dict[str, Any] = {
        "device_name": device, "destination_type": "volume",
        "source_type": "snapshot" if mapping.get("snapshot_id") else "volume",
        "uuid": mapping.get("snapshot_id") or mapping.get("volume_id"),
        "boot_index": 0 if device.rsplit("/", 1)[-1] == "vda" else -1,
        "delete_on_termination": bool(mapping.get("delete_on_termination"))}
    if mapping.get("volume_size"):
        entry["volume_size"] = mapping["volume_size"]
    return entry


_V2_KEPT = ("device_type", "disk_bus", "boot_index", "volume_size", "delete_on_termination",
            "volume_type")


def _v2(conn: Any, mapping: Mapping[str, Any]) -> dict[str, Any] | None:
    """One ``block_device_mapping_v2`` entry as Heat sends it."""
    image = mapping.get("image") or mapping.get("image_id")
    entry: dict[str, Any] | None = None
    if mapping.get("volume_id"):
        entry = {"uuid": mapping["volume_id"], "source_type": "volume"}
    elif mapping.get("snapshot_id"):
        entry = {"uuid": mapping["snapshot_id"], "source_type": "snapshot"}
    elif image:
        entry = {"uuid": image_id(conn, str(image)), "source_type": "image"}
    if entry is not None:
        entry.update(destination_type="volume", boot_index=0, delete_on_termination=False)
    elif mapping.get("swap_size"):
        entry = {"source_type": "blank", "destination_type": "local", "boot_index": -1,
                 "delete_on_termination": True, "guest_format": "swap",
                 "volume_size": mapping["swap_size"]}
    elif mapping.get("ephemeral_size") or mapping.get("ephemeral_format"):
        entry = {"source_type": "blank", "destination_type": "local", "boot_index": -1,
                 "delete_on_termination": True}
        if mapping.get("ephemeral_size"):
            entry["volume_size"] = mapping["ephemeral_size"]
        if mapping.get("ephemeral_format"):
            entry["guest_format"] = mapping["ephemeral_format"]
    if entry is None:
        return None
    if mapping.get("device_name"):
        entry["device_name"] = mapping["device_name"]
    entry.update({k: mapping[k] for k in _V2_KEPT if mapping.get(k) is not None})
    return entry


def block_devices(conn: Any, props: Mapping[str, Any]) -> list[dict[str, Any]]:
    legacy = props.get("block_device_mapping") or []
    current = props.get("block_device_mapping_v2") or []
    if legacy and current:
        raise ResourceFailure("block_device_mapping and block_device_mapping_v2 cannot both "
                              "be given")
    found = [_legacy(m) for m in legacy]
    for mapping in current:
        entry = _v2(conn, mapping)
        if entry is not None:
            found.append(entry)
    return found


def personality(conn: Any, props: Mapping[str, Any]) -> list[dict[str, str]]:
    files = props.get("personality") or {}
    if not files:
        return []
    if sdk_utils.supports_microversion(conn.compute, "2.57"):
        raise ResourceFailure("personality is not supported with nova api microversion 2.57 "
                              "and above: use user_data or metadata instead")
    return [{"path": str(path), "contents": base64.b64encode(str(text).encode()).decode()}
            for path, text in files.items()]


def boot_request(conn: Any, ctx: PluginContext, props: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of ``conn.compute.create_server`` for ``props``. The ports the server
    makes are made (or found again) and floating IPs associated on the way."""
    devices = block_devices(conn, props)
    if not props.get("image") and not any(str(d.get("boot_index")) == "0" for d in devices):
        raise ResourceFailure("Neither image nor bootable volume is specified for instance "
                              f"{ctx.resource_name}")
    body: dict[str, Any] = {
        "name": server_name(ctx, props),
        "flavor_id": str(flavor_of(conn, str(props["flavor"])).id),
        "tags": server_tags(ctx, props), "metadata": metadata(props)}
    if props.get("image"):
        body["image_id"] = image_id(conn, str(props["image"]))
    if devices:
        body["block_device_mapping"] = devices
    files = personality(conn, props)
    if files:
        body["personality"] = files
    for key, field in (("key_name", "key_name"), ("availability_zone", "availability_zone"),
                       ("admin_pass", "admin_password"), ("diskConfig", "disk_config"),
                       ("scheduler_hints", "scheduler_hints")):
        if props.get(key):
            body[field] = props[key]
    if props.get("config_drive") is not None:
        body["config_drive"] = bool(props["config_drive"])
    if props.get("security_groups"):
        body["security_groups"] = [{"name": g} for g in props["security_groups"]]
    data = user_data(props, agent_config(ctx, props))
    if data is not None:
        body["user_data"] = data
    body["networks"] = boot_networks(conn, ctx, props)
    return body
