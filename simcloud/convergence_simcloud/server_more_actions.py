"""Nova's lesser server actions in the simulated cloud: pause and unpause, suspend and resume,
shelve (offloaded at once), shelve offload and unshelve, change password, console output,
create image (a server snapshot in Glance) and adding or removing a security group.

Callers: ``convergence_simcloud.server_actions`` (the ``POST /servers/{id}/action`` route)
hands the actions named in :data:`ACTIONS` to :func:`run` under the cloud's lock, after it
found the server and checked its lock. Each action checks the server's state as Nova does
(409 ``conflictingRequest`` otherwise, through ``servers.check_state``); pausing and
suspending are immediate, ``createImage`` stores an active, private snapshot image (kind
``"image"``) owned by the server's project and answers its id (2.45+: in the body; before,
in ``Location``).
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from fastapi import Request

from convergence_simcloud.compute import nova_error
from convergence_simcloud.context import Caller
from convergence_simcloud.network_ports import ports_of_device
from convergence_simcloud.servers import (
    RUNNING,
    SHUTDOWN,
    check_state,
    set_state,
    sim,
    start_task,
)
from convergence_simcloud.state import Record, SimCloud

PAUSED, SUSPENDED = 3, 7  # nova.compute.power_state
ACTIONS = ("pause", "unpause", "suspend", "resume", "changePassword", "os-getConsoleOutput",
           "createImage", "addSecurityGroup", "removeSecurityGroup", "shelve",
           "shelveOffload", "unshelve")
Version = tuple[int, int]


def _glance_stamp(when: float) -> str:
    return datetime.datetime.fromtimestamp(when, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _snapshot(cloud: SimCloud, server: Record, arg: Any) -> Record:
    if not isinstance(arg, dict) or not isinstance(arg.get("name"), str) or not arg["name"]:
        raise nova_error(400, "Invalid input for field/attribute createImage. "
                              f"Value: {arg}. 'name' is a required property")
    base = cloud.kind("image").get((server.get("image") or {}).get("id", "")) or {}
    now = _glance_stamp(cloud.now())
    image: Record = {
        **{k: v for k, v in base.items() if k not in ("tags",)},
        "id": str(uuid.uuid4()), "name": arg["name"], "status": "active",
        "visibility": "private", "protected": False, "os_hidden": False,
        "owner": server["project_id"], "project_id": server["project_id"],
        "min_disk": server["flavor"]["disk"], "min_ram": base.get("min_ram", 0),
        "disk_format": base.get("disk_format", "qcow2"),
        "container_format": base.get("container_format", "bare"),
        "size": base.get("size", 0), "virtual_size": None, "tags": [],
        "created_at": now, "updated_at": now, "image_type": "snapshot",
        "instance_uuid": server["id"], "user_id": server["user_id"],
        "base_image_ref": base.get("id", ""),
        **{str(k): str(v) for k, v in (arg.get("metadata") or {}).items()}}
    cloud.kind("image")[image["id"]] = image
    return image


def _group(cloud: SimCloud, server: Record, arg: Any) -> Record:
    name = arg.get("name") if isinstance(arg, dict) else None
    if not name:
        raise nova_error(400, "Security group name cannot be empty")
    group = next((g for g in cloud.kind("security_group").values()
                  if g["project_id"] == server["project_id"] and name in (g["name"], g["id"])),
                 None)
    if group is None:
        raise nova_error(404, f"Security group {name} not found for project "
                              f"{server['project_id']}.")
    return group


def _set_group(cloud: SimCloud, server: Record, arg: Any, add: bool) -> None:
    group = _group(cloud, server, arg)
    ports = ports_of_device(cloud, server["id"])
    if not ports:
        raise nova_error(400, "Network requires port_security_enabled and subnet associated "
                              "in order to apply security groups.")
    if not add and not any(group["id"] in p.get("security_groups", []) for p in ports):
        raise nova_error(400, f"Security group {group['name']} not associated with the "
                              "instance")
    for port in ports:
        groups = [g for g in port.get("security_groups", []) if g != group["id"]]
        port["security_groups"] = [*groups, group["id"]] if add else groups


def _shelving(cloud: SimCloud, server: Record, name: str) -> None:
    """Shelve (offloaded at once: Nova's ``shelved_offload_time`` 0), offload, unshelve."""
    seconds = cloud.options.build_seconds
    if name == "shelve":
        check_state(server, "shelve", ("active", "stopped", "paused", "suspended"))
        start_task(cloud, server, "shelving", seconds,
                   {"vm_state": "shelved_offloaded", "power_state": SHUTDOWN, "host": None})
    elif name == "shelveOffload":
        check_state(server, "shelveOffload", ("shelved",))
        start_task(cloud, server, "shelving_offloading", seconds,
                   {"vm_state": "shelved_offloaded", "host": None})
    else:
        check_state(server, "unshelve", ("shelved", "shelved_offloaded"))
        start_task(cloud, server, "unshelving", seconds,
                   {"vm_state": "active", "power_state": RUNNING,
                    "host": f"compute-{server['availability_zone']}"})


def run(cloud: SimCloud, who: Caller, request: Request, server: Record, name: str, arg: Any,
        version: Version) -> tuple[int, Any, dict[str, str]]:
    """Do the action ``name``: its status, body (None: empty) and extra headers."""
    if name == "pause":
        check_state(server, "pause", ("active",))
        set_state(cloud, server, "paused", None, PAUSED)
    elif name == "unpause":
        check_state(server, "unpause", ("paused",))
        set_state(cloud, server, "active", None, RUNNING)
    elif name == "suspend":
        check_state(server, "suspend", ("active",))
        set_state(cloud, server, "suspended", None, SUSPENDED)
    elif name == "resume":
        check_state(server, "resume", ("suspended",))
        set_state(cloud, server, "active", None, RUNNING)
    elif name in ("shelve", "shelveOffload", "unshelve"):
        _shelving(cloud, server, name)
    elif name == "changePassword":
        password = arg.get("adminPass") if isinstance(arg, dict) else None
        if not isinstance(password, str):
            raise nova_error(400, "Invalid input for field/attribute changePassword. "
                                  f"Value: {arg}. 'adminPass' is a required property")
        check_state(server, "changePassword", ("active",))
        sim(server)["password"] = password
    elif name == "os-getConsoleOutput":
        check_state(server, "getConsoleOutput", ("active", "stopped", "error", "paused",
                                                 "suspended", "resized"),
                    (None, "rebooting", "rebooting_hard", "powering-off", "powering-on"))
        lines = [f"[    0.000000] Booting {server['name']} ({server['id']})",
                 "cloud-init: simulated boot finished", f"login as '{server['hostname']}'"]
        length = arg.get("length") if isinstance(arg, dict) else None
        if length is not None and int(length) >= 0:
            lines = lines[-int(length):] if int(length) else []
        return 200, {"output": "\n".join(lines) + "\n"}, {}
    elif name == "createImage":
        check_state(server, "createImage", ("active", "stopped", "paused", "suspended"))
        image = _snapshot(cloud, server, arg)
        if version >= (2, 45):
            return 202, {"image_id": image["id"]}, {}
        base = str(request.base_url).rstrip("/")
        return 202, None, {"Location": f"{base}/image/v2/images/{image['id']}"}
    else:
        _set_group(cloud, server, arg, name == "addSecurityGroup")
    return 202, None, {}
