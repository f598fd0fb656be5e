"""``convergence resource list|show``, ``resource type list|show``, ``resource mark unhealthy``
and ``stack failures list``: a stack's resources, the engine's types, a resource's health, and
what failed in a stack.

Shaped like heatclient's ``openstack stack resource list [--filter --sort --limit --long]|
show``, ``openstack orchestration resource type list|show``, ``openstack stack resource mark
unhealthy`` and ``openstack stack failures list``, with their option names and columns.
Registered by ``convergence.cli.groups`` (on the ``resource`` group, as ``stack resources``,
and a ``stack resource`` group); written against ``convergence.cli.client.StackClient``, so
that each works in embedded and remote mode alike. The resource type commands read the plugin
registry only: in embedded mode they open no database.

``stack failures list`` is computed here, as heatclient computes it: the stack's resources in a
``*_FAILED`` state with their status reasons, walking into the nested stack of a failed
resource that has one (and showing the failed resources found there instead of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from convergence.cli import output as out
from convergence.cli.client import StackClient
from convergence.cli.common import report_errors
from convergence.cli.listing import (
    RESOURCE_FILTERS,
    RESOURCE_SORT_KEYS,
    ResourceListing,
    parse_filters,
    parse_sorts,
    sort_rows,
)
from convergence.cli.state import CliState, open_client, pass_state

if TYPE_CHECKING:
    from convergence.ports.views import StackView

TYPE_FILTERS = ("name", "version", "support_status")
TEMPLATE_TYPES = ("hot", "cfn")
REASON_LINES = 10  # the last lines of a status reason shown without --long (heatclient's)


# resource list|show --------------------------------------------------------------------------

@click.command("list")
@click.argument("name")
@click.option("--filter", "filters", multiple=True, metavar="KEY=VALUE",
              help="Only the resources whose KEY is VALUE (KEY: name, status, action, type, "
                   "id, physical_resource_id; a status matches FAILED or CREATE_FAILED); "
                   "several values of a key: any of them.")
@click.option("--sort", "sorts", multiple=True, metavar="KEY[:asc|desc]",
              help="Order by KEY (resource_name, resource_type, resource_status, "
                   "updated_time, physical_resource_id); several keys: repeat, or separate "
                   "with commas.")
@click.option("--limit", type=click.IntRange(min=0), help="At most this many resources.")
@click.option("--long", "long_", is_flag=True, help="Show each resource's stack too.")
@click.option("-n", "--nested-depth", type=click.IntRange(min=0), metavar="DEPTH",
              help="The resources of nested stacks this deep too (none here yet).")
@out.format_option
@pass_state
@report_errors
def resource_list(state: CliState, name: str, filters: tuple[str, ...], sorts: tuple[str, ...],
                  limit: int | None, long_: bool, nested_depth: int | None,
                  fmt: out.Format) -> None:
    """List the resources of stack NAME."""
    listing = ResourceListing(filters=parse_filters(filters, RESOURCE_FILTERS),
                              sorts=tuple(parse_sorts(sorts, RESOURCE_SORT_KEYS)),
                              limit=limit, nested_depth=nested_depth, with_detail=long_)
    client = open_client(state)
    s = client.find_stack(name)
    columns = list(out.RESOURCE_COLUMNS)
    if long_ or nested_depth:
        columns.append(("stack_name", "Stack Name"))
    out.emit_list(client.resource_rows(s, listing), columns, fmt)


@click.command("show")
@click.argument("name")
@click.argument("resource_name", metavar="RESOURCE")
@out.format_option
@pass_state
@report_errors
def resource_show(state: CliState, name: str, resource_name: str, fmt: out.Format) -> None:
    """Show RESOURCE of stack NAME."""
    client = open_client(state)
    out.emit_record(client.resource_detail(client.find_stack(name), resource_name), fmt)


# resource type -------------------------------------------------------------------------------

@click.group("type")
def resource_type() -> None:
    """Look at the resource types the engine offers."""


@resource_type.command("list")
@click.option("--filter", "filters", multiple=True, metavar="KEY=VALUE",
              help="Only the types whose KEY is VALUE (KEY: name, a name or a regular "
                   "expression searched in it; support_status; version).")
@click.option("--long", "long_", is_flag=True, help="Show each type's description too.")
@out.format_option
@pass_state
@report_errors
def type_list(state: CliState, filters: tuple[str, ...], long_: bool, fmt: out.Format) -> None:
    """List the resource types."""
    wanted = parse_filters(filters, TYPE_FILTERS)
    rows = open_client(state).resource_types(
        name=_one(wanted, "name"), support_status=_one(wanted, "support_status"),
        with_description=long_)
    columns = [("resource_type", "Resource Type")]
    if long_:
        columns.append(("description", "Description"))
    out.emit_list(sort_rows(rows, [("resource_type", False)]), columns, fmt)


def _one(filters: Mapping[str, tuple[str, ...]], key: str) -> str | None:
    values = filters.get(key) or ()
    if len(values) > 1:
        raise click.BadParameter(f"one value of {key}, not {len(values)}",
                                 param_hint="--filter")
    return values[0] if values else None


@resource_type.command("show")
@click.argument("type_name", metavar="TYPE")
@click.option("--template-type", metavar="hot|cfn",
              help="Show a template that exposes TYPE as a template resource instead.")
@click.option("--long", "long_", is_flag=True,
              help="Show the type with its description (it always has it here).")
@out.formats("yaml")
@pass_state
@report_errors
def type_show(state: CliState, type_name: str, template_type: str | None, long_: bool,
              fmt: out.Format) -> None:
    """Show resource type TYPE: its properties and attributes."""
    client = open_client(state)
    if template_type is None:
        out.emit_record(client.resource_type(type_name), fmt)
        return
    if long_:
        raise click.UsageError("--template-type and --long cannot be given together.")
    if template_type.lower() not in TEMPLATE_TYPES:
        raise click.BadParameter(f"{template_type!r} is not hot or cfn",
                                 param_hint="--template-type")
    out.emit_record(client.resource_type_template(type_name, template_type.lower()), fmt)


# resource mark unhealthy ---------------------------------------------------------------------

@click.command("unhealthy")
@click.argument("name")
@click.argument("resource_name", metavar="RESOURCE")
@click.argument("reason", default="")
@click.option("--reset", is_flag=True, help="Mark RESOURCE healthy again.")
@pass_state
@report_errors
def mark_unhealthy(state: CliState, name: str, resource_name: str, reason: str,
                   reset: bool) -> None:
    """Mark RESOURCE (a name or physical id) of stack NAME unhealthy: it becomes
    CHECK_FAILED, and the next update replaces it. With --reset, a CHECK_FAILED resource
    becomes CHECK_COMPLETE again."""
    client = open_client(state)
    s = client.find_stack(name)
    client.mark_resource(s, resource_name, unhealthy=not reset, reason=reason)


@click.group("mark")
def mark() -> None:
    """Set a resource's health."""


mark.add_command(mark_unhealthy)


@click.group("resource")
def stack_resource() -> None:
    """Look at a stack's resources, and set their health."""


stack_resource.add_command(resource_list)
stack_resource.add_command(resource_show)
stack_resource.add_command(mark)
stack_resource.add_command(mark_unhealthy, "mark-unhealthy")


# stack failures list -------------------------------------------------------------------------

@click.group("failures")
def failures() -> None:
    """Look at what failed in a stack."""


@failures.command("list")
@click.argument("name")
@click.option("--long", "long_", is_flag=True,
              help="Show each status reason whole (else its last lines).")
@click.option("-f", "--format", "fmt", type=click.Choice(("text", "json", "yaml")),
              default="text", show_default=True,
              help="heatclient's text, or JSON/YAML keyed by each resource's path.")
@pass_state
@report_errors
def failures_list(state: CliState, name: str, long_: bool, fmt: str) -> None:
    """Show the failed resources of stack NAME with their status reasons (nothing when the
    stack is not FAILED). A resource is named by its path from the stack
    (``stack.resource``, ``stack.nested.resource``)."""
    client = open_client(state)
    found = failed_resources(client, client.find_stack(name))
    if fmt != "text":
        click.echo(out.dump({path: _failure_fields(row) for path, row in found.items()},
                            "json" if fmt == "json" else "yaml"))
        return
    for path, row in found.items():
        click.echo(_failure_text(path, row, long_))


def failed_resources(backend: StackClient, stack: StackView) -> dict[str, Mapping[str, Any]]:
    """The failed resources, by their dotted path from the stack, as heatclient finds them:
    none unless the stack is FAILED; a failed resource with a nested stack is replaced by the
    failed resources found inside it (itself when there are none)."""
    found: dict[str, Mapping[str, Any]] = {}
    if stack.status == "FAILED":
        _append_failed(backend, stack, [stack.name], found)
    return found


def _append_failed(backend: StackClient, stack: StackView, path: list[str],
                   found: dict[str, Mapping[str, Any]]) -> bool:
    """Add the stack's failed resources (recursively); whether any was found."""
    current: dict[str, Mapping[str, Any]] = {}
    for row in backend.resource_rows(stack, ResourceListing()):
        current[str(row.get("resource_name"))] = row  # the newest version of each name
    appended = False
    for resource_name, version in current.items():
        if not str(version.get("resource_status") or "").endswith("FAILED"):
            continue
        here = [*path, resource_name]
        child = backend.nested_stack(stack, resource_name)
        if child is None or not _append_failed(backend, child, here, found):
            found[".".join(here)] = version
        appended = True
    return appended


def _failure_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"resource_type": row.get("resource_type"),
            "physical_resource_id": row.get("physical_resource_id") or "",
            "status": row.get("resource_status"),
            "status_reason": row.get("resource_status_reason") or ""}


def _failure_text(path: str, row: Mapping[str, Any], long_: bool) -> str:
    """One failure as heatclient prints it (the reason's last lines unless ``long_``)."""
    fields = _failure_fields(row)
    lines = str(fields["status_reason"]).splitlines()
    if not long_ and len(lines) > REASON_LINES:
        lines = ["...", *lines[-REASON_LINES:]]
    reason = "\n".join(f"    {line}" for line in lines)
    return (f"{path}:\n"
            f"  resource_type: {fields['resource_type']}\n"
            f"  physical_resource_id: {fields['physical_resource_id']}\n"
            f"  status: {fields['status']}\n"
            f"  status_reason: |\n{reason}")
