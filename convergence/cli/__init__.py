"""The ``convergence`` command line. Thin: parses arguments, calls ``services``, prints.

Exit codes: 0 success, 1 the input was refused (errors printed with their paths), 2 usage error.
"""

from __future__ import annotations

import os

import click

from convergence.cli.admin_cmd import admin
from convergence.cli.api_cmd import api
from convergence.cli.db_cmd import db
from convergence.cli.demo_cmd import demo
from convergence.cli.resource_cmd import (
    failures,
    mark,
    mark_unhealthy,
    resource_type,
    stack_resource,
)
from convergence.cli.services_cmd import services
from convergence.cli.stack_cmd import event, resource, resource_list, resource_show, stack
from convergence.cli.stack_cmd import output as output_group  # not to hide cli.output
from convergence.cli.stack_info_cmd import stack_environment, stack_file, stack_template
from convergence.cli.state import DEFAULT_TENANT, CliState
from convergence.cli.template_cmd import template
from convergence.cli.worker_cmd import worker
from convergence.logs import configure_logging


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="convergence")
@click.option("--url", envvar="CONVERGENCE_URL", metavar="URL",
              help="Talk to the API at URL (e.g. http://127.0.0.1:8004) instead of running "
                   "embedded; the token is CONVERGENCE_TOKEN.")
@click.pass_context
def cli(ctx: click.Context, url: str | None) -> None:
    """Convergence: drive a cloud until it matches a Heat (HOT) template."""
    configure_logging("console")
    # The project (tenant) the stack commands work in: read here only, then passed down.
    ctx.obj = CliState(tenant=os.environ.get("CONVERGENCE_PROJECT_ID") or DEFAULT_TENANT,
                       url=url or None, token=os.environ.get("CONVERGENCE_TOKEN") or None)


cli.add_command(template)
cli.add_command(db)
cli.add_command(worker)
cli.add_command(stack)
cli.add_command(resource)
# heatclient's shapes: ``stack resource list|show|mark unhealthy``, ``stack template show``,
# ``stack environment show``, ``stack file list``, ``stack failures list``; ``resource type
# list|show`` and ``resource mark unhealthy`` (``mark-unhealthy`` too) beside ``resource list``.
resource.add_command(resource_type)
resource.add_command(mark)
resource.add_command(mark_unhealthy, "mark-unhealthy")
stack_resource.add_command(resource_list)
stack_resource.add_command(resource_show)
stack_resource.add_command(mark_unhealthy, "mark-unhealthy")
for group in (stack_resource, stack_template, stack_environment, stack_file, failures):
    stack.add_command(group)
cli.add_command(event)
cli.add_command(output_group)
cli.add_command(demo)
cli.add_command(api)
cli.add_command(services)
cli.add_command(admin)


def main() -> None:
    cli(prog_name="convergence")
