"""``convergence stack list|show`` and ``output list|show``: looking at stacks and outputs.

Shaped like ``openstack stack list [--filter --sort --limit --marker --deleted]|show`` and
``openstack stack output list|show`` (python-heatclient), with ``-f table|json|yaml|value|csv``
and ``-c COLUMN`` with Heat's field names. Registered by ``convergence.cli.groups`` (``stack
list|show|outputs``, ``output list|show``); written once for both modes against
``convergence.cli.client.StackClient``. Looking at a stack never waits for work another live
process drives (embedded: work no live process is on any more is finished first, see
``convergence.cli.local``).

Remote ``stack list`` imports the HTTP client and these light modules only: no store, engine
or use case (``tests/cli/test_startup.py`` checks it).
"""

from __future__ import annotations

import click

from convergence.cli import output as out
from convergence.cli.common import report_errors
from convergence.cli.listing import parse_filters, parse_sorts, sort_rows
from convergence.cli.state import CliState, open_client, pass_state
from convergence.heat_fields import output_items

_STACK_SORT_KEYS = ("id", "stack_name", "stack_status", "creation_time", "updated_time")
_API_STACK_SORT_KEYS = ("stack_name", "stack_status", "creation_time", "updated_time")


@click.command("list")
@click.option("--filter", "--property", "filters", multiple=True, metavar="KEY=VALUE",
              help="Only the stacks whose KEY is VALUE (KEY: id, name, status, action; a "
                   "status matches COMPLETE or CREATE_COMPLETE); several values of a key: "
                   "any of them.")
@click.option("--sort", "sorts", multiple=True, metavar="KEY[:asc|desc]",
              help="Order by KEY (stack_name, stack_status, creation_time (the default), "
                   "updated_time, id); several keys: repeat, or separate with commas.")
@click.option("--limit", type=click.IntRange(min=0), help="At most this many stacks.")
@click.option("--marker", metavar="ID", help="Start after the stack of this id.")
@click.option("--deleted", is_flag=True, help="Include deleted stacks.")
@out.format_option
@pass_state
@report_errors
def list_(state: CliState, filters: tuple[str, ...], sorts: tuple[str, ...],
          limit: int | None, marker: str | None, deleted: bool, fmt: out.Format) -> None:
    """List the stacks of the project (each with its template's description: -c description,
    or -f json|yaml)."""
    from convergence.heat_fields import FILTER_KEYS, StackQuery

    order = parse_sorts(sorts, _STACK_SORT_KEYS)
    # The API pages in one direction; the rows are then sorted here too, key by key, as
    # heatclient sorts them.
    query = StackQuery(
        filters=parse_filters(filters, FILTER_KEYS),
        sort_keys=[k for k, _ in order if k in _API_STACK_SORT_KEYS] or ["creation_time"],
        descending=order[0][1] if order else False, marker=marker, limit=limit,
        include_deleted=deleted)
    rows = sort_rows(open_client(state).stack_rows(query), order)
    columns = out.STACK_COLUMNS + ((("deletion_time", "Deletion Time"),) if deleted else ())
    out.emit_list(rows, columns, fmt)


@click.command("show")
@click.argument("name")
@out.format_option
@pass_state
@report_errors
def show(state: CliState, name: str, fmt: out.Format) -> None:
    """Show stack NAME: its description, every parameter's value (defaults included, hidden
    ones masked, Heat's pseudo-parameters too) and its outputs."""
    client = open_client(state)
    out.emit_record(client.stack_detail(client.find_stack(name)), fmt)


@click.command("list")
@click.argument("name")
@out.format_option
@pass_state
@report_errors
def output_list(state: CliState, name: str, fmt: out.Format) -> None:
    """List the outputs of stack NAME."""
    items = output_items(open_client(state).find_stack(name))
    out.emit_list([{"output_key": i["output_key"], "description": i["description"]}
                   for i in items], out.OUTPUT_COLUMNS, fmt)


@click.command("show")
@click.argument("name")
@click.argument("key")
@out.format_option
@pass_state
@report_errors
def output_show(state: CliState, name: str, key: str, fmt: out.Format) -> None:
    """Show output KEY of stack NAME."""
    s = open_client(state).find_stack(name)
    for item in output_items(s):
        if item["output_key"] == key:
            out.emit_record(item, fmt)
            return
    raise click.ClickException(f"The Output ({key}) could not be found in stack {s.name}.")
