"""The ``convergence`` command line. Thin: parses arguments, calls a client, prints.

Callers: the ``convergence`` console script and ``python -m convergence`` call :func:`main`;
tests invoke :data:`cli` with click's runner. The root group names its commands as
``"module:attribute"`` (``convergence.cli.lazy.LazyGroup``): a command's module is imported
when it is run or listed, and the command modules import nothing heavy at module level, so
``convergence --help`` loads neither the store, the engine nor the HTTP client, and a remote
command (``--url`` / ``CONVERGENCE_URL``) never loads the store or the engine
(``tests/cli/test_startup.py``; timings in ``benchmarks/cli_startup.py``). The stack commands
speak to ``convergence.cli.client.StackClient``: embedded (``convergence.cli.local``, the use
cases of ``convergence.services``) or remote (``convergence.cli.remote``, the API over HTTP).

Exit codes: 0 success, 1 the input was refused (errors printed with their paths), 2 usage error.
"""

from __future__ import annotations

import os

import click

from convergence.cli.lazy import LazyGroup
from convergence.cli.state import DEFAULT_TENANT, CliState

_PKG = "convergence.cli"


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             lazy_subcommands={
                 "admin": f"{_PKG}.admin_cmd:admin", "api": f"{_PKG}.api_cmd:api",
                 "db": f"{_PKG}.db_cmd:db", "demo": f"{_PKG}.demo_cmd:demo",
                 "event": f"{_PKG}.groups:event", "output": f"{_PKG}.groups:output",
                 "resource": f"{_PKG}.groups:resource",
                 "services": f"{_PKG}.services_cmd:services",
                 "simcloud": f"{_PKG}.simcloud_cmd:simcloud",
                 "stack": f"{_PKG}.groups:stack", "template": f"{_PKG}.template_cmd:template",
                 "worker": f"{_PKG}.worker_cmd:worker",
             })
@click.version_option(package_name="convergence")
@click.option("--url", envvar="CONVERGENCE_URL", metavar="URL",
              help="Talk to the API at URL (e.g. http://127.0.0.1:8004) instead of running "
                   "embedded; the token is CONVERGENCE_TOKEN.")
@click.pass_context
def cli(ctx: click.Context, url: str | None) -> None:
    """Convergence: drive a cloud until it matches a Heat (HOT) template."""
    from convergence.logs import configure_logging

    configure_logging("console")
    # The project (tenant) the stack commands work in: read here only, then passed down.
    ctx.obj = CliState(tenant=os.environ.get("CONVERGENCE_PROJECT_ID") or DEFAULT_TENANT,
                       url=url or None, token=os.environ.get("CONVERGENCE_TOKEN") or None)


def main() -> None:
    cli(prog_name="convergence")
