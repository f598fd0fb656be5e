"""The in-place update of ``OS::Nova::Server``: what changes at once, and the tasks that take time.

Callers: ``convergence.plugins.openstack.nova_server`` calls :func:`apply_now` and
:func:`plan` when an update starts, then :func:`drive` on that call and on each poll until no
task is left. What updates in place is Heat's (``handle_update``): metadata, tags, the name and
the admin password change at once; ``networks`` detaches and attaches interfaces, a flavor
change resizes (then confirms the resize), an image change rebuilds (keeping the ephemeral disk
for ``REBUILD_PRESERVE_EPHEMERAL``), and a ``user_data`` change with the ``REBUILD`` policy
rebuilds with the new user data; in that order, one task at a time.

Planning looks at the server as it is, not at the old properties only: a resize already
waiting for its confirmation is confirmed rather than asked again, an image the server already
runs is not rebuilt onto. A task is a small JSON dict (kept by the engine in the operation's
state between polls): its ``op``, its ``stage`` and what it needs that the properties, which
come back with every poll, do not say. Nothing here sleeps: a task that must wait answers so,
and the engine polls again after the delay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from convergence.plugins.base import PluginContext, ResourceFailure
from convergence.plugins.openstack.nova_server_boot import (
    flavor_of,
    image_id,
    metadata,
    server_name,
    user_data,
)
from convergence.plugins.openstack.nova_server_networks import (
    associate,
    attach_target,
    entries,
    interfaces,
    plan_networks,
)
from convergence.plugins.openstack.nova_server_schema import (
    REBUILD,
    REBUILD_PRESERVE_EPHEMERAL,
)
from convergence.plugins.openstack.nova_server_tags import server_tags

DETACH, ATTACH, RESIZE, REBUILDING = "detach", "attach", "resize", "rebuild"
START = "start"
SETTLED = ("ACTIVE", "SHUTOFF")  # the states a server rests in after a task
RESIZE_START_LIMIT = 120.0  # seconds a resize may take to show before it counts as refused
TASK_DELAYS = {DETACH: 1.0, ATTACH: 1.0, RESIZE: 2.0, REBUILDING: 2.0}


def image_of(server: Any) -> str | None:
    """The id of the image a server runs (None: it boots from a volume)."""
    found = getattr(server, "image", None)
    return str(found.id) if found is not None and getattr(found, "id", None) else None


def has_flavor(server: Any, flavor: Any) -> bool:
    """Whether ``server`` runs ``flavor`` (Nova 2.47+ shows a flavor by its name only)."""
    shown = server.flavor
    if shown is None:
        return False
    if getattr(shown, "id", None) and shown.id == flavor.id:
        return True
    return bool((getattr(shown, "original_name", None) or shown.name) == flavor.name)


def apply_now(conn: Any, ctx: PluginContext, server: Any, old: Mapping[str, Any],
              new: Mapping[str, Any]) -> None:
    """The changes Nova makes at once: metadata, tags, name and admin password."""
    wanted = metadata(new)
    if dict(server.metadata or {}) != wanted:
        server.replace_metadata(conn.compute, metadata=wanted)
    tags = server_tags(ctx, new)
    if set(server.tags or []) != set(tags):
        server.set_tags(conn.compute, tags)
    name = server_name(ctx, new)
    if server.name != name:
        conn.compute.update_server(server.id, name=name)
    image_changes = new.get("image") != old.get("image")
    if new.get("admin_pass") and new.get("admin_pass") != old.get("admin_pass") \
            and not image_changes:
        conn.compute.change_server_password(server, new["admin_pass"])


def plan(conn: Any, ctx: PluginContext, server: Any, old: Mapping[str, Any],
         new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tasks that bring ``server`` from ``old`` to ``new``, in Heat's order."""
    tasks: list[dict[str, Any]] = []
    if entries(old) != entries(new):
        wiring = plan_networks(conn, ctx, str(server.id), old, new)
        tasks += [{"op": DETACH, "stage": START, "port": port, "owned": owned}
                  for port, owned in wiring.detach]
        tasks += [{"op": ATTACH, "stage": START, "index": index} for index in wiring.attach]
    flavor = flavor_of(conn, str(new["flavor"]))
    if not has_flavor(server, flavor) or server.status == "VERIFY_RESIZE":
        tasks.append({"op": RESIZE, "stage": START, "flavor": str(flavor.id)})
    rebuild_data = new.get("user_data_update_policy") == REBUILD and \
        new.get("user_data") != old.get("user_data")
    image = image_id(conn, str(new["image"])) if new.get("image") else image_of(server)
    if image is not None and (image != image_of(server) or rebuild_data):
        tasks.append({"op": REBUILDING, "stage": START, "image": image,
                      "user_data": rebuild_data,
                      "preserve": new.get("image_update_policy") == REBUILD_PRESERVE_EPHEMERAL})
    return tasks


def drive(conn: Any, ctx: PluginContext, server_id: str, props: Mapping[str, Any],
          tasks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], float]:
    """Advance the tasks as far as they go now: those left (the first one under way) and how
    long until it is worth looking again."""
    left = [dict(t) for t in tasks]
    while left:
        task = left[0]
        if not STEPS[task["op"]](conn, ctx, server_id, props, task):
            return left, TASK_DELAYS[task["op"]]
        left.pop(0)
    return [], 0.0


def _failed(server: Any, doing: str) -> ResourceFailure:
    fault = getattr(server, "fault", None) or {}
    reason = fault.get("message") if isinstance(fault, dict) else None
    return ResourceFailure(f"{doing} failed, status '{server.status}'"
                           + (f": {reason}" if reason else ""))


def _resize(conn: Any, ctx: PluginContext, server_id: str, props: Mapping[str, Any],
            task: dict[str, Any]) -> bool:
    server = conn.compute.get_server(server_id)
    status, doing = server.status, f"Resizing to '{props['flavor']}'"
    resizing = "resize" in str(server.task_state or "")
    if status == "ERROR":
        raise _failed(server, doing)
    if status == "VERIFY_RESIZE" and task["stage"] != "confirming":
        ctx.check_lease()
        conn.compute.confirm_server_resize(server)
        task["stage"] = "confirming"
        return False
    flavor = conn.compute.get_flavor(task["flavor"])
    if task["stage"] == START:
        if status == "RESIZE" or resizing:
            task["stage"] = "resizing"
            return False
        if status in SETTLED and has_flavor(server, flavor):
            return True
        ctx.check_lease()
        conn.compute.resize_server(server, task["flavor"])
        task.update(stage="resizing", asked=ctx.now())
        return False
    if status in SETTLED and not resizing and has_flavor(server, flavor):
        return True  # confirmed (by us, or by Nova's own resize_confirm_window)
    if status in ("RESIZE", "VERIFY_RESIZE") or resizing:
        return False
    if task["stage"] == "resizing" and ctx.now() - float(task.get("asked", 0.0)) \
            < RESIZE_START_LIMIT:
        return False  # Nova has not started it yet
    raise _failed(server, doing if task["stage"] == "resizing"
                  else f"Confirming the resize of server {server_id}")


def _rebuild(conn: Any, ctx: PluginContext, server_id: str, props: Mapping[str, Any],
             task: dict[str, Any]) -> bool:
    server = conn.compute.get_server(server_id)
    status = server.status
    if task["stage"] == START:
        if status in SETTLED and image_of(server) == task["image"] and not task["user_data"]:
            return True  # rebuilt already (by an attempt whose answer was lost)
        if status != "REBUILD":
            if status not in (*SETTLED, "ERROR"):
                return False  # a task of someone else's under way: Nova would refuse
            arguments: dict[str, Any] = {"preserve_ephemeral": bool(task["preserve"]),
                                         "metadata": metadata(props)}
            if props.get("admin_pass"):
                arguments["admin_password"] = props["admin_pass"]
            if task["user_data"]:
                arguments["user_data"] = user_data(props)
            ctx.check_lease()
            conn.compute.rebuild_server(server, task["image"], **arguments)
        task["stage"] = "rebuilding"
        return False
    if status == "REBUILD":
        return False
    if status == "ERROR":
        raise _failed(server, f"Rebuilding server {server_id}")
    return True


def _detach(conn: Any, ctx: PluginContext, server_id: str, props: Mapping[str, Any],
            task: dict[str, Any]) -> bool:
    attached = {i.port for i in interfaces(conn, server_id)}
    if task["port"] in attached:
        if task["stage"] == START:
            ctx.check_lease()
            conn.compute.delete_server_interface(task["port"], server=server_id,
                                                 ignore_missing=True)
            task["stage"] = "detaching"
        return False
    if task["owned"]:  # a port the server made goes with its interface, as Heat's does
        ctx.check_lease()
        conn.network.delete_port(task["port"], ignore_missing=True)
    return True


def _attach(conn: Any, ctx: PluginContext, server_id: str, props: Mapping[str, Any],
            task: dict[str, Any]) -> bool:
    attached = {i.port for i in interfaces(conn, server_id)}
    if task["stage"] == START:
        target = attach_target(conn, ctx, props, task["index"])
        if target.get("port_id") not in attached:
            ctx.check_lease()
            made = conn.compute.create_server_interface(server_id, **target)
            target["port_id"] = str(made.port_id)
        task.update(stage="attaching", port=target["port_id"])
        attached = {i.port for i in interfaces(conn, server_id)}
    if task["port"] not in attached:
        return False
    entry = entries(props)[task["index"]] if task["index"] is not None else {}
    if entry.get("floating_ip"):
        ctx.check_lease()
        associate(conn, entry["floating_ip"], task["port"], entry.get("fixed_ip"))
    return True


Step = Callable[[Any, PluginContext, str, Mapping[str, Any], dict[str, Any]], bool]
STEPS: dict[str, Step] = {DETACH: _detach, ATTACH: _attach, RESIZE: _resize,
                          REBUILDING: _rebuild}
