"""The ``convergence`` command line. Thin: parses arguments, calls ``services``, prints.

Exit codes: 0 success, 1 the input was refused (errors printed with their paths), 2 usage error.
"""

from __future__ import annotations

import click

from convergence.cli.db_cmd import db
from convergence.cli.template_cmd import template
from convergence.cli.worker_cmd import worker


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="convergence")
def cli() -> None:
    """Convergence: drive a cloud until it matches a Heat (HOT) template."""


cli.add_command(template)
cli.add_command(db)
cli.add_command(worker)


def main() -> None:
    cli(prog_name="convergence")
