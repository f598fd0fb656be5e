"""``convergence event list`` (and ``stack events``): a stack's events, a page or as they happen.

Shaped like ``openstack stack event list`` (python-heatclient): the whole list, a page of it
(``--resource``, ``--filter``, ``--limit``, ``--marker``, ``--sort``, paged where the events
are, by the database or the API, which pages the same way), ``--nested-depth``, or
``--follow``: the events printed as they happen until the stack's current request ends (a line
an event, a JSON object a line, or a YAML document each). Registered by
``convergence.cli.groups``; written once for both modes against
``convergence.cli.client.StackClient`` (embedded ``--follow`` runs the request's work here,
remote ``--follow`` reads the API's events watch stream).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from convergence.cli import output as out
from convergence.cli.common import report_errors
from convergence.cli.listing import EVENT_FILTERS, EventListing
from convergence.cli.state import CliState, open_client, pass_state

if TYPE_CHECKING:
    from convergence.ports.views import EventView, StackView


@click.command("list")
@click.argument("name")
@click.option("--resource", help="Only the events of this resource.")
@click.option("--filter", "filters", multiple=True, metavar="KEY=VALUE",
              help="Only the events whose KEY is VALUE (KEY: resource_name, resource_action, "
                   "resource_status, resource_type, physical_resource_id); several values of "
                   "a key: any of them.")
@click.option("--limit", type=click.IntRange(min=0), help="At most this many events.")
@click.option("--marker", type=int, help="Start after this event id, in the chosen order.")
@click.option("--sort", "sorts", multiple=True, metavar="KEY[:asc|desc]",
              help="Order by event_time (the default) or resource_type; ':desc' for the "
                   "newest first.")
@click.option("--nested-depth", type=click.IntRange(min=0), metavar="DEPTH",
              help="The events of nested stacks this deep too (none here yet); not with "
                   "--resource.")
@click.option("--follow", is_flag=True,
              help="Print events as they happen, until the stack's current request ends.")
@out.format_option
@pass_state
@report_errors
def event_list(state: CliState, name: str, resource: str | None, filters: tuple[str, ...],
               limit: int | None, marker: int | None, sorts: tuple[str, ...],
               nested_depth: int | None, follow: bool, fmt: out.Format) -> None:
    """List the events of stack NAME (stack-level ones carry the stack's name and id)."""
    paged = bool(resource or filters or sorts) or limit is not None or marker is not None
    if follow and paged:
        raise click.UsageError("--follow prints every event: it takes no --resource, "
                               "--filter, --limit, --marker or --sort.")
    if follow and fmt in ("value", "csv"):
        raise click.UsageError("--follow prints a log: -f table (a line an event), json or "
                               "yaml.")
    if resource and nested_depth is not None:
        raise click.UsageError("--nested-depth cannot be given with --resource.")
    listing = event_listing(resource, filters, limit, marker, sorts, nested_depth)
    client = open_client(state)
    if follow:
        client.follow_events(name, listing, lambda e: _echo_event(e, fmt))
        return
    s = client.find_stack(name)
    _emit_events(client.event_page(s, listing), s, nested_depth is not None, fmt)


def event_listing(resource: str | None, filters: Sequence[str], limit: int | None,
                  marker: int | None, sorts: Sequence[str],
                  nested_depth: int | None) -> EventListing:
    """The page ``event list`` asks for (Heat's filters, sort keys and direction)."""
    from convergence.ports.pages import EVENT_SORT_KEYS

    wanted: dict[str, list[str]] = {key: [] for key in EVENT_FILTERS}
    for item in filters:
        key, sep, value = item.partition("=")
        if not sep or key not in wanted:
            raise click.BadParameter(f"{item!r}: KEY=VALUE, KEY one of "
                                     f"{', '.join(EVENT_FILTERS)}", param_hint="--filter")
        wanted[key].append(value)
    if resource:
        wanted["resource_name"] = [resource]
    keys, directions = [], set()
    for item in sorts:
        key, _, direction = item.partition(":")
        key = key or "event_time"
        if key not in EVENT_SORT_KEYS or direction not in ("", "asc", "desc"):
            raise click.BadParameter(f"{item!r}: KEY[:asc|desc], KEY one of "
                                     f"{', '.join(EVENT_SORT_KEYS)}", param_hint="--sort")
        keys.append(key)
        directions.add(direction or "asc")
    if len(directions) > 1:  # Heat's list has one direction for all its keys
        raise click.BadParameter("one direction for every key", param_hint="--sort")
    return EventListing(filters={k: tuple(v) for k, v in wanted.items() if v},
                        sort_keys=tuple(keys), descending=directions == {"desc"},
                        limit=limit, marker=marker, nested_depth=nested_depth)


def _emit_events(events: Sequence[EventView], s: StackView, nested: bool,
                 fmt: out.Format) -> None:
    """The event list; with ``--nested-depth``, each event's stack too (as heatclient shows
    it: events of nested stacks would name theirs)."""
    if not nested:
        out.emit_list([out.event_fields(e) for e in events], out.EVENT_COLUMNS, fmt)
        return
    out.emit_list([{**out.event_fields(e), "stack_name": s.name} for e in events],
                  (*out.EVENT_COLUMNS, ("stack_name", "Stack Name")), fmt)


def _echo_event(e: EventView, fmt: out.Format) -> None:
    """One event of ``--follow``: a log line, a JSON object per line, or a YAML document."""
    if fmt == "table":
        click.echo(out.event_line(e))
    elif fmt == "json":
        click.echo(json.dumps(out.event_fields(e), default=str))
    else:
        click.echo("---\n" + out.dump(out.event_fields(e), fmt))
