"""``convergence stack template show|environment show|file list``: what a stack was made from.

Shaped like heatclient's ``openstack stack template show``, ``stack environment show`` and
``stack file list``, YAML by default as there (``-f json|table|value|csv`` and ``-c`` as
everywhere). Registered on the ``stack`` group by ``convergence.cli.groups``; written against
``convergence.cli.client.StackClient``, so that each works in embedded and remote mode alike.
"""

from __future__ import annotations

import click

from convergence.cli import output as out
from convergence.cli.common import report_errors
from convergence.cli.state import CliState, open_client, pass_state

# The sections of the merged environment heatclient shows, in its order.
ENVIRONMENT_SECTIONS = ("parameters", "resource_registry", "parameter_defaults")


@click.group("template")
def stack_template() -> None:
    """Look at a stack's template."""


@stack_template.command("show")
@click.argument("name")
@out.formats("yaml")
@pass_state
@report_errors
def template_show(state: CliState, name: str, fmt: out.Format) -> None:
    """Show the template of stack NAME (the one it was last asked to be)."""
    client = open_client(state)
    out.emit_record(client.stack_template(client.find_stack(name)), fmt)


@click.group("environment")
def stack_environment() -> None:
    """Look at a stack's environment."""


@stack_environment.command("show")
@click.argument("name")
@out.formats("yaml")
@pass_state
@report_errors
def environment_show(state: CliState, name: str, fmt: out.Format) -> None:
    """Show the environment of stack NAME: its environments merged in order, its parameter
    values on top."""
    client = open_client(state)
    env = client.stack_environment(client.find_stack(name))
    out.emit_record({k: env[k] for k in ENVIRONMENT_SECTIONS if k in env}, fmt)


@click.group("file")
def stack_file() -> None:
    """Look at the files sent with a stack's template."""


@stack_file.command("list")
@click.argument("name")
@out.formats("yaml")
@pass_state
@report_errors
def file_list(state: CliState, name: str, fmt: out.Format) -> None:
    """Show the files map of stack NAME (each file's key and content)."""
    client = open_client(state)
    out.emit_record({"files": client.stack_files(client.find_stack(name))}, fmt)
