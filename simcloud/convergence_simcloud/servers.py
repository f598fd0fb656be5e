"""Nova's servers in the simulated cloud: the stored record, its lazy state machine, and the
functions the other Nova modules call.

Callers: ``convergence_simcloud.server_routes`` (the ``/servers`` routes), ``server_boot``
(creation), ``server_actions`` (``POST /servers/{id}/action``) and ``server_meta`` (metadata
and tags) read servers
through :func:`visible_server` and move them with :func:`set_state` and :func:`start_task`;
``convergence_simcloud.server_interfaces`` and ``compute_volumes`` (the other Nova sub-routes)
call :func:`visible_server` (404 ``itemNotFound`` when the caller may not see
the server) and :func:`remove_server` (a delete's cleanup). Every function here is called
under the cloud's lock. A server advances from the clock when it is read (:func:`advance`):
BUILD becomes ACTIVE after ``cloud.options.server_build_seconds(flavor)``, a pending task (a
reboot, a rebuild, a resize, a stop or a start) ends when its time is up, and the fault rules
of ``convergence_simcloud.faults`` (kind ``"server"``, service ``"compute"``) keep it
building, put it in ERROR (a server that fails its build loses its ports, as Nova
deallocates its networking) or make it vanish.
"""

from __future__ import annotations

import datetime
from typing import Any

from convergence_simcloud import faults, server_bdm
from convergence_simcloud.compute import nova_error
from convergence_simcloud.context import Caller
from convergence_simcloud.network_ports import bind_port, ports_of_device, unbind_port
from convergence_simcloud.state import Record, SimCloud

KIND = "server"
SERVICE = "compute"
# power states (nova.compute.power_state)
NOSTATE, RUNNING, SHUTDOWN = 0, 1, 4
# Nova's status for (vm_state, task_state): nova.api.openstack.common._STATE_MAP
_STATUS: dict[str, dict[str | None, str]] = {
    "active": {None: "ACTIVE", "rebooting": "REBOOT", "reboot_pending": "REBOOT",
               "reboot_started": "REBOOT", "rebooting_hard": "HARD_REBOOT",
               "reboot_pending_hard": "HARD_REBOOT", "reboot_started_hard": "HARD_REBOOT",
               "updating_password": "PASSWORD", "rebuilding": "REBUILD",
               "rebuild_block_device_mapping": "REBUILD", "rebuild_spawning": "REBUILD",
               "migrating": "MIGRATING", "resize_prep": "RESIZE",
               "resize_migrating": "RESIZE", "resize_migrated": "RESIZE",
               "resize_finish": "RESIZE"},
    "building": {None: "BUILD"},
    "stopped": {None: "SHUTOFF", "resize_prep": "RESIZE", "resize_migrating": "RESIZE",
                "resize_migrated": "RESIZE", "resize_finish": "RESIZE",
                "rebuilding": "REBUILD", "rebuild_block_device_mapping": "REBUILD",
                "rebuild_spawning": "REBUILD"},
    "resized": {None: "VERIFY_RESIZE", "resize_reverting": "REVERT_RESIZE"},
    "paused": {None: "PAUSED", "migrating": "MIGRATING"},
    "suspended": {None: "SUSPENDED"},
    "rescued": {None: "RESCUE"},
    "shelved": {None: "SHELVED"},
    "shelved_offloaded": {None: "SHELVED_OFFLOADED"},
    "soft-delete": {None: "SOFT_DELETED"},
    "deleted": {None: "DELETED"},
    "error": {None: "ERROR", "rebuilding": "REBUILD", "rebuild_block_device_mapping": "REBUILD",
              "rebuild_spawning": "REBUILD"},
}


def stamp(when: float) -> str:
    """Nova's timestamp: ``2017-02-14T19:23:59Z``."""
    moment = datetime.datetime.fromtimestamp(when, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def sim(server: Record) -> dict[str, Any]:
    found: dict[str, Any] = server.setdefault("_sim", {})
    return found


def status_of(vm_state: str, task_state: str | None) -> str:
    states = _STATUS.get(vm_state, {})
    return states.get(task_state) or states.get(None) or "UNKNOWN"


def set_state(cloud: SimCloud, server: Record, vm_state: str | None = None,
              task_state: str | None = None, power_state: int | None = None) -> None:
    """Set the server's ``OS-EXT-STS:*`` (``vm_state``/``power_state`` None: kept) and the
    status Nova derives from them."""
    if vm_state is not None:
        server["OS-EXT-STS:vm_state"] = vm_state
    server["OS-EXT-STS:task_state"] = task_state
    if power_state is not None:
        server["OS-EXT-STS:power_state"] = power_state
    server["status"] = status_of(server["OS-EXT-STS:vm_state"], task_state)
    server["updated"] = stamp(cloud.now())


def start_task(cloud: SimCloud, server: Record, task_state: str | None, seconds: float,
               then: dict[str, Any], vm_state: str | None = None) -> None:
    """Start a task: ``task_state`` now (and ``vm_state`` if given); after ``seconds`` the
    fields of ``then`` (``vm_state``, ``power_state``, ``flavor``, ``image``...) are set and
    the task state cleared."""
    set_state(cloud, server, vm_state, task_state)
    sim(server)["task"] = {"until": cloud.now() + seconds, "then": then}
    advance(cloud, server)


def _finish_task(cloud: SimCloud, server: Record) -> None:
    task = sim(server).pop("task")
    then = dict(task["then"])
    vm_state, power_state = then.pop("vm_state", None), then.pop("power_state", None)
    server.update(then)
    set_state(cloud, server, vm_state, None, power_state)
    server["updated"] = stamp(task["until"])
    if "host" not in then:
        return
    for port in ports_of_device(cloud, server["id"]):  # shelve offload / unshelve
        if then["host"] is None:
            port.update({"status": "DOWN", "binding:host_id": "",
                         "binding:vif_type": "unbound", "binding:vif_details": {}})
    if then["host"] is not None:
        bind_ports(cloud, server)


def _go_active(cloud: SimCloud, server: Record) -> None:
    state = sim(server)
    set_state(cloud, server, "active", None, RUNNING)
    server["updated"] = stamp(state["build_until"])
    server["OS-SRV-USG:launched_at"] = _usg_stamp(state["build_until"])
    bind_ports(cloud, server)


def _usg_stamp(when: float) -> str:
    """The ``OS-SRV-USG`` timestamps: ``2017-02-14T19:24:00.000000``."""
    moment = datetime.datetime.fromtimestamp(when, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")


def bind_ports(cloud: SimCloud, server: Record) -> None:
    """Bind the server's ports to its host (the ports go ``ACTIVE``)."""
    owner = f"compute:{server['availability_zone']}"
    for port in ports_of_device(cloud, server["id"]):
        if port.get("binding:vif_type") in (None, "unbound"):
            bind_port(cloud, port, server["id"], owner, server["host"])


def advance(cloud: SimCloud, server: Record) -> bool:
    """Bring the server up to the clock; False when it has vanished (it is then removed)."""
    state = sim(server)
    now = cloud.now()
    fate = faults.fate(cloud, SERVICE, KIND, server, state["made_at"])
    if fate.vanish_at is not None and now >= fate.vanish_at:
        remove_server(cloud, server)
        return False
    deleting_until = state.get("deleting_until")
    if deleting_until is not None and now >= deleting_until:
        remove_server(cloud, server)
        return False
    if server["OS-EXT-STS:task_state"] == "deleting":
        return True
    error_at = None if state.get("errored") else fate.error_at
    if server["OS-EXT-STS:vm_state"] == "building":
        built = state["build_until"]
        if not fate.stays_building and now >= built and (error_at is None or built < error_at):
            _go_active(cloud, server)  # (active, then error: the build ended first)
    task = state.get("task")
    if task is not None and now >= task["until"] and (error_at is None
                                                      or task["until"] < error_at):
        _finish_task(cloud, server)
    if error_at is not None and now >= error_at:
        state["errored"] = True
        state.pop("task", None)
        building = server["OS-EXT-STS:vm_state"] == "building"
        set_state(cloud, server, "error", None, NOSTATE if building else None)
        server["updated"] = stamp(error_at)
        if building:  # a failed build gives its networking back
            release_ports(cloud, server)
        server["fault"] = {"code": 500, "message": fate.message,
                           "created": stamp(error_at),
                           "details": "Traceback (most recent call last):\n  simulated"}
    return True


def advance_all(cloud: SimCloud) -> None:
    """Bring every server up to the clock: Neutron's port reads call it, so a port shows what
    its server's build, shelve or vanishing did to it. Under the lock."""
    for server in list(cloud.kind(KIND).values()):
        advance(cloud, server)


def check_state(server: Record, action: str, vm_states: tuple[str, ...],
                task_states: tuple[str | None, ...] = (None,)) -> None:
    """Nova's ``check_instance_state``: 409 when the server is in another state."""
    vm_state, task_state = server["OS-EXT-STS:vm_state"], server["OS-EXT-STS:task_state"]
    if vm_state not in vm_states:
        raise nova_error(409, f"Cannot '{action}' instance {server['id']} while it is in "
                              f"vm_state {vm_state}")
    if task_state not in task_states:
        raise nova_error(409, f"Cannot '{action}' instance {server['id']} while it is in "
                              f"task_state {task_state}")


def not_found(server_id: str) -> Exception:
    return nova_error(404, f"Instance {server_id} could not be found.")


def visible_server(cloud: SimCloud, who: Caller, server_id: str) -> Record:
    """The server ``server_id``, advanced to the clock, if ``who`` may see it (its project's,
    or any for an admin); else Nova's 404 ``itemNotFound``. Call under the lock."""
    server = cloud.kind(KIND).get(server_id)
    if server is None or not (who.is_admin or server["project_id"] == who.project_id):
        raise not_found(server_id)
    if not advance(cloud, server):
        raise not_found(server_id)
    return server


def remove_server(cloud: SimCloud, server: Record) -> None:
    """A deleted (or vanished) server's cleanup, and the server gone: its volumes detached
    (those mapped with ``delete_on_termination`` deleted), the ports Nova made deleted (their
    floating IPs disassociated), the ports it was given unbound, and it leaves its server
    groups. Call under the lock."""
    from convergence_simcloud import volume_records  # written beside this module

    server_id = server["id"]
    volume_records.detach_all(cloud, server_id)
    server_bdm.delete_on_termination(cloud, server)
    release_ports(cloud, server)
    for group in cloud.kind("server_group").values():
        members = group.get("members") or []
        if server_id in members:
            group["members"] = [m for m in members if m != server_id]
    cloud.kind(KIND).pop(server_id, None)


def release_ports(cloud: SimCloud, server: Record) -> None:
    """Nova's deallocation: the ports it made are deleted (their floating IPs disassociated),
    the ports it was given are unbound. Under the lock."""
    made = set(sim(server).get("nova_ports") or [])
    for port in ports_of_device(cloud, server["id"]):
        if port["id"] in made:
            _disassociate(cloud, port["id"])
            cloud.kind("port").pop(port["id"], None)
        else:
            unbind_port(cloud, port)
    sim(server)["nova_ports"] = []


def _disassociate(cloud: SimCloud, port_id: str) -> None:
    """Neutron frees the floating IPs of a deleted port."""
    for fip in cloud.kind("floatingip").values():
        if fip.get("port_id") == port_id:
            fip.update(port_id=None, fixed_ip_address=None, router_id=None, status="DOWN")
