"""``convergence services``: the processes running steps, with their heartbeat age and status.

Registered on the ``convergence`` group by ``convergence.cli``; written against
``convergence.cli.client``. Embedded, it reads the ``workers`` table of the configured database
(``convergence.services.operations.list_services``); with ``--url`` it asks the API
(``GET /v1/{tenant}/services``), which answers an admin only (Heat's ``service:index``: the
list names hosts and pids; a noauth API's caller is a member, not an admin). A worker is up
while its last heartbeat is younger than three ``heartbeat_seconds``.
"""

from __future__ import annotations

import click

from convergence.cli import output as out
from convergence.cli.state import CliState, open_client, pass_state

SERVICE_COLUMNS = (("id", "ID"), ("binary", "Binary"), ("hostname", "Host"), ("pid", "PID"),
                   ("status", "Status"), ("heartbeat_age", "Heartbeat Age (s)"),
                   ("created_at", "Started"), ("deleted_at", "Stopped"))


@click.command()
@click.option("-f", "--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="Output format: a table, or JSON in Heat's shape.")
@pass_state
def services(state: CliState, fmt: out.Format) -> None:
    """List the worker processes (and API processes stepping in-process) and their status.

    With --url, the API lists them for an admin's token only (Heat's service:index)."""
    out.emit_list(open_client(state).list_services(), SERVICE_COLUMNS, fmt)
