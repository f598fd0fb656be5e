"""Nova's server actions (``POST /servers/{id}/action``) in the simulated cloud: reset state,
reboot, rebuild, resize with confirm and revert, stop, start, lock and unlock.

Callers: ``convergence_simcloud.app`` includes :data:`router` under ``/compute/v2.1``. Each
action checks the server's ``vm_state`` and ``task_state`` as Nova's ``check_instance_state``
does (409 ``conflictingRequest`` "Cannot 'reboot' instance ... while it is in vm_state
stopped"), then starts a task through ``convergence_simcloud.servers.start_task``: the server
shows the task's status (REBOOT, HARD_REBOOT, REBUILD, RESIZE, REVERT_RESIZE) and reaches its
end state when the task's seconds (``Options.build_seconds``, the flavor's build seconds for a
rebuild or resize) are up, read lazily from the clock. ``os-resetState`` is for admins only
(403 otherwise) and sets ``active`` or ``error`` at once. The lesser actions (pause, suspend,
create image...) are ``convergence_simcloud.server_more_actions``'s.
"""

from __future__ import annotations

import secrets
from typing import Any

from fastapi import APIRouter, Request, Response

from convergence_simcloud import server_more_actions, server_views
from convergence_simcloud.compute import Microversion, nova_error
from convergence_simcloud.compute_quotas import answer, quota_of
from convergence_simcloud.context import Authenticated, Caller, CloudError, cloud_of
from convergence_simcloud.server_boot import (
    check_fits,
    check_metadata,
    flavor_of,
    image_of,
    invalid,
    keypair_of,
)
from convergence_simcloud.servers import (
    KIND,
    RUNNING,
    SHUTDOWN,
    check_state,
    set_state,
    sim,
    start_task,
    visible_server,
)
from convergence_simcloud.state import Record, SimCloud

router = APIRouter()
Version = tuple[int, int]


def _reset_state(cloud: SimCloud, who: Caller, server: Record, arg: Any) -> None:
    if not who.is_admin:
        raise nova_error(403, "Policy doesn't allow os_compute_api:os-admin-actions:"
                              "reset_state to be performed.")
    state = arg.get("state") if isinstance(arg, dict) else None
    if state not in ("active", "error"):
        raise invalid("state", state, f"'{state}' is not one of ['active', 'error']")
    sim(server).pop("task", None)
    set_state(cloud, server, state, None)


def _reboot(cloud: SimCloud, server: Record, arg: Any) -> None:
    kind = str((arg or {}).get("type", "")).upper() if isinstance(arg, dict) else ""
    if kind not in ("SOFT", "HARD"):
        raise invalid("type", kind, f"'{kind}' does not match '^(hard|HARD|soft|SOFT)$'")
    check_state(server, "reboot", ("active", "stopped", "paused", "suspended", "error"),
                (None, "rebooting", "reboot_pending", "reboot_started", "rebooting_hard",
                 "reboot_pending_hard", "reboot_started_hard"))
    if kind == "SOFT":
        check_state(server, "reboot", ("active",))
    start_task(cloud, server, "rebooting" if kind == "SOFT" else "rebooting_hard",
               cloud.options.build_seconds, {"vm_state": "active", "power_state": RUNNING})


REBUILD_KEYS = {"imageRef", "name", "adminPass", "metadata", "preserve_ephemeral",
                "accessIPv4", "accessIPv6", "OS-DCF:diskConfig", "personality"}


def _rebuild(cloud: SimCloud, who: Caller, server: Record, arg: Any,
             version: Version) -> str:
    if not isinstance(arg, dict) or "imageRef" not in arg:
        raise invalid("rebuild", arg, "'imageRef' is a required property")
    allowed = set(REBUILD_KEYS)
    allowed |= {"description"} if version >= (2, 19) else set()
    allowed |= {"key_name"} if version >= (2, 54) else set()
    allowed |= {"user_data"} if version >= (2, 57) else set()
    allowed -= {"personality"} if version >= (2, 57) else set()
    unexpected = sorted(set(arg) - allowed)
    if unexpected:
        raise invalid("rebuild", arg, f"Additional properties are not allowed "
                                      f"({', '.join(repr(k) for k in unexpected)} "
                                      f"{'was' if len(unexpected) == 1 else 'were'} "
                                      "unexpected)")
    check_state(server, "rebuild", ("active", "stopped", "error"))
    try:
        image = image_of(cloud, who, arg["imageRef"])
    except CloudError as error:
        if error.message != "Can not find requested image":
            raise
        raise nova_error(400, "Cannot find image for rebuild") from None
    check_fits(server["flavor"], image)
    if "key_name" in arg:
        keypair = keypair_of(cloud, who, arg["key_name"])
        server["key_name"] = None if keypair is None else keypair["name"]
    if "metadata" in arg:
        server["metadata"] = check_metadata(cloud, server["project_id"], arg["metadata"])
    for key in ("name", "description", "accessIPv4", "accessIPv6", "OS-DCF:diskConfig",
                "user_data"):
        if key in arg:
            server[key] = arg[key]
    stopped = server["OS-EXT-STS:vm_state"] == "stopped"
    start_task(cloud, server, "rebuilding",
               cloud.options.server_build_seconds(server["flavor"]),
               {"vm_state": "stopped" if stopped else "active",
                "power_state": SHUTDOWN if stopped else RUNNING,
                "image": {"id": image["id"]}})
    server.pop("fault", None)
    return str(arg.get("adminPass") or secrets.token_urlsafe(9))


def _resize(cloud: SimCloud, server: Record, arg: Any) -> None:
    if not isinstance(arg, dict) or "flavorRef" not in arg:
        raise invalid("resize", arg, "'flavorRef' is a required property")
    check_state(server, "resize", ("active", "stopped"))
    flavor = flavor_of(cloud, arg["flavorRef"])
    old = server["flavor"]
    if flavor["id"] == old["id"]:
        raise nova_error(400, "When resizing, instances must change flavor!")
    if flavor["disk"] < old["disk"]:
        raise nova_error(400, "Resize error: Unable to resize disk down.")
    limits = quota_of(cloud, server["project_id"])
    servers = [s for s in cloud.kind(KIND).values() if s["project_id"] == server["project_id"]]
    for key in ("cores", "ram"):
        field = "vcpus" if key == "cores" else "ram"
        delta = int(flavor[field]) - int(old[field])
        used = sum(int(s["flavor"][field]) for s in servers)
        allowed = limits.get(key, -1)
        if delta > 0 and 0 <= allowed < used + delta:
            raise nova_error(403, f"Quota exceeded for {key}: Requested {delta}, but already "
                                  f"used {used} of {allowed} {key}")
    state = sim(server)
    state["resize"] = {"old_flavor": old, "old_vm_state": server["OS-EXT-STS:vm_state"],
                       "old_power_state": server["OS-EXT-STS:power_state"]}
    start_task(cloud, server, "resize_prep", cloud.options.server_build_seconds(flavor),
               {"vm_state": "resized",
                "flavor": {k: v for k, v in flavor.items() if k != "project_id"}})
    state["flavor_id"] = flavor["id"]


def _confirm_resize(cloud: SimCloud, server: Record) -> None:
    check_state(server, "confirmResize", ("resized",))
    old = sim(server).pop("resize", None) or {}
    stopped = old.get("old_vm_state") == "stopped"
    set_state(cloud, server, "stopped" if stopped else "active", None,
              SHUTDOWN if stopped else RUNNING)


def _revert_resize(cloud: SimCloud, server: Record) -> None:
    check_state(server, "revertResize", ("resized",))
    old = sim(server).pop("resize", None) or {}
    flavor = old.get("old_flavor") or server["flavor"]
    stopped = old.get("old_vm_state") == "stopped"
    sim(server)["flavor_id"] = flavor["id"]
    start_task(cloud, server, "resize_reverting", cloud.options.build_seconds,
               {"vm_state": "stopped" if stopped else "active",
                "power_state": SHUTDOWN if stopped else RUNNING, "flavor": flavor})


def _stop(cloud: SimCloud, server: Record) -> None:
    check_state(server, "stop", ("active", "error"))
    start_task(cloud, server, "powering-off", cloud.options.build_seconds,
               {"vm_state": "stopped", "power_state": SHUTDOWN})


def _start(cloud: SimCloud, server: Record) -> None:
    check_state(server, "start", ("stopped",))
    start_task(cloud, server, "powering-on", cloud.options.build_seconds,
               {"vm_state": "active", "power_state": RUNNING})


def _lock(who: Caller, server: Record, locked: bool) -> None:
    if not locked and server.get("_sim", {}).get("locked_by") not in (None, who.user_id) \
            and not who.is_admin:
        raise nova_error(403, "Policy doesn't allow os_compute_api:os-lock-server:unlock:"
                              "unlock_override to be performed.")
    server["locked"] = locked
    sim(server)["locked_by"] = who.user_id if locked else None


ACTIONS = ("os-resetState", "reboot", "rebuild", "resize", "confirmResize", "revertResize",
           "os-stop", "os-start", "lock", "unlock")


@router.post("/servers/{server_id}/action")
async def server_action(server_id: str, request: Request, who: Authenticated,
                        version: Microversion) -> Response:
    try:
        payload = await request.json()
    except ValueError:
        raise nova_error(400, "Malformed request body") from None
    if not isinstance(payload, dict) or len(payload) != 1:
        raise nova_error(400, "Malformed request body")
    [(name, arg)] = payload.items()
    if name not in ACTIONS and name not in server_more_actions.ACTIONS:
        raise nova_error(400, f"There is no such action: {name}")
    cloud = cloud_of(request)
    with cloud.locked():
        server = visible_server(cloud, who, server_id)
        if server.get("locked") and name not in ("os-resetState", "lock", "unlock") \
                and not who.is_admin:
            raise nova_error(409, f"Instance {server_id} is locked")
        status, body = 202, None
        headers: dict[str, str] = {}
        if name in server_more_actions.ACTIONS:
            status, body, headers = server_more_actions.run(
                cloud, who, request, server, name, arg, version)
        elif name == "os-resetState":
            _reset_state(cloud, who, server, arg)
        elif name == "reboot":
            _reboot(cloud, server, arg)
        elif name == "rebuild":
            password = _rebuild(cloud, who, server, arg, version)
            shown = server_views.detail(cloud, request, server, version, who.is_admin,
                                        extended=False)
            body = {"server": {**shown, "adminPass": password}}
        elif name == "resize":
            _resize(cloud, server, arg)
        elif name == "confirmResize":
            _confirm_resize(cloud, server)
            status = 204
        elif name == "revertResize":
            _revert_resize(cloud, server)
        elif name == "os-stop":
            _stop(cloud, server)
        elif name == "os-start":
            _start(cloud, server)
        else:
            _lock(who, server, name == "lock")
    cloud.changed()
    answered = answer(status, version, body)
    answered.headers.update(headers)
    return answered

