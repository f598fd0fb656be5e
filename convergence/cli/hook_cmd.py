"""``convergence stack hook poll|clear``: the resources paused on a hook, and going on.

A resource whose environment sets a hook on it (``resource_registry.resources.<name>.hooks``)
pauses before that action; ``poll`` lists the paused ones (a nested stack's too, with
``--nested-depth``), ``clear`` lets them go on: ``RESOURCE`` is a name, or a path through
nested stacks (``group/0/server``); without a hook option, the hook it is paused on is
cleared. heatclient's ``openstack stack hook poll|clear`` take the same arguments.

Callers: the ``stack`` group (``convergence.cli.groups``) loads this module when used.
"""

from __future__ import annotations

import json

import click

from convergence.cli.client import Request
from convergence.cli.common import report_errors
from convergence.cli.listing import ResourceListing
from convergence.cli.state import CliState, open_client, pass_state

PAUSED = "paused until Hook "


def _paused_on(reason: str) -> str | None:
    """The hook a status reason says its resource is paused on."""
    if PAUSED not in reason:
        return None
    return reason.split(PAUSED, 1)[1].split(" ", 1)[0]


@click.group("hook")
def hook() -> None:
    """The resources paused on a hook, and letting them go on."""


@hook.command("poll")
@click.argument("name")
@click.option("--nested-depth", type=int, default=None,
              help="Look into nested stacks this many levels deep.")
@click.option("-f", "--format", "fmt", type=click.Choice(("text", "json")), default="text")
@pass_state
@report_errors
def poll(state: CliState, name: str, nested_depth: int | None, fmt: str) -> None:
    """List the resources of stack NAME paused on a hook."""
    client = open_client(state)
    s = client.find_stack(name)
    rows = client.resource_rows(s, ResourceListing(nested_depth=nested_depth))
    paused = [{"resource_name": r["resource_name"], "resource_type": r["resource_type"],
               "hook_type": _paused_on(str(r.get("resource_status_reason") or "")),
               "resource_status": r["resource_status"],
               "stack_name": r.get("stack_name") or s.name}
              for r in rows if _paused_on(str(r.get("resource_status_reason") or ""))]
    if fmt == "json":
        click.echo(json.dumps(paused, indent=2))
        return
    for p in paused:
        click.echo(f"{p['resource_name']}\t{p['hook_type']}\t{p['resource_status']}\t"
                   f"{p['stack_name']}")


@hook.command("clear")
@click.argument("name")
@click.argument("resources", nargs=-1, required=True)
@click.option("--pre-create", "hooks", flag_value="pre-create", multiple=True)
@click.option("--pre-update", "hooks", flag_value="pre-update", multiple=True)
@click.option("--pre-delete", "hooks", flag_value="pre-delete", multiple=True)
@click.option("--post-create", "hooks", flag_value="post-create", multiple=True)
@click.option("--post-update", "hooks", flag_value="post-update", multiple=True)
@click.option("--post-delete", "hooks", flag_value="post-delete", multiple=True)
@click.option("--wait", is_flag=True,
              help="Then follow the stack until its request ends (or pauses again).")
@pass_state
@report_errors
def clear(state: CliState, name: str, resources: tuple[str, ...],
          hooks: tuple[str, ...], wait: bool) -> None:
    """Let RESOURCES of stack NAME (names, or paths through nested stacks such as
    group/0/server) go on past their hook. Embedded, the work runs here until the stack's
    request ends or pauses again."""
    client = open_client(state)
    top = client.find_stack(name)
    for path in resources:
        *parents, resource = path.split("/")
        s = top
        for part in parents:
            found = client.nested_stack(s, part)
            if found is None:
                raise click.ClickException(f"{part} of stack {s.name} is no nested stack.")
            s = found
        wanted = list(hooks)
        if not wanted:
            reason = str(client.resource_detail(s, resource).get("resource_status_reason"))
            pending = _paused_on(reason)
            if pending is None:
                raise click.ClickException(f"{path} is paused on no hook.")
            wanted = [pending]
        for one in wanted:
            client.clear_hook(s, resource, one)
            click.echo(f"{path}: {one} cleared")
    if client.follows(wait):
        ended = client.follow(Request(top), None)
        click.echo(f"{ended.name}: {ended.stack_status}")
