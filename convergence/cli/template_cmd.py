"""``convergence template validate``: validate a template as a client would send it.

Registered on the ``convergence`` group by ``convergence.cli``; written once for both modes
against ``convergence.cli.client.StackClient``: embedded, the template is validated here at its
key (``convergence.services.templates.validate_template``); remote (``--url``), the template,
files map and environments go to the API's ``POST /validate``. Either way only the files the
template and environments reference are sent, and a refusal prints the same way (exit 1).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, cast

import click

from convergence.cli import output as out
from convergence.cli.client import Refused
from convergence.cli.state import CliState, open_client, pass_state


@click.group()
def template() -> None:
    """Work with HOT templates."""


@template.command("validate")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-e", "--environment", "env_files", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An environment file; several are merged in order.")
@click.option("-P", "--parameter", "params", multiple=True, metavar="KEY=VALUE",
              help="A parameter value; with any -P, missing required values are errors.")
@click.option("--files-dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Folder the files map's keys are relative to (default: the template's). "
                   "Only the files the template and environments reference are sent.")
@click.option("-f", "--format", "fmt", type=click.Choice(["text", *out.FORMATS]),
              default="text", show_default=True,
              help="Text, or Heat's answer as JSON, YAML, a table, its values or CSV.")
@out.column_option
@pass_state
def validate(state: CliState, file: Path, env_files: tuple[Path, ...], params: tuple[str, ...],
             files_dir: Path | None, fmt: str) -> None:
    """Validate FILE; print its description and parameters, or every error with its path."""
    from convergence.cli.files import root_folder

    root = root_folder(file, env_files, files_dir)
    try:
        result = open_client(state).validate(file, root=root, env_files=env_files,
                                             params=params)
    except Refused as exc:
        if fmt in ("json", "yaml"):
            click.echo(out.dump({"errors": exc.errors}, cast(out.Format, fmt)))
        else:
            n = len(exc.lines)
            click.echo(f"{file}: invalid ({n} error{'s' if n != 1 else ''})", err=True)
            for line in exc.lines:
                click.echo(line)
        sys.exit(1)
    if fmt == "text":
        _print_text(file, result)
    else:
        out.emit_record(result, cast(out.Format, fmt))


_CONSTRAINT_KEYS = ("MinLength", "MaxLength", "MinValue", "MaxValue", "Modulo", "AllowedValues",
                    "AllowedPattern", "CustomConstraint")


def _print_text(file: Path, result: dict[str, Any]) -> None:
    click.echo(f"{file}: valid")
    if result.get("Description"):
        click.echo(f"Description: {result['Description'].strip()}")
    params = result.get("Parameters", {})
    click.echo(f"Parameters ({len(params)}):")
    for name, p in params.items():
        default = "(required)" if "Default" not in p else json.dumps(p["Default"])
        if p.get("NoEcho") == "true" and "Default" in p:
            default = "******"
        line = f"  {name}  {p['Type']}  default={default}"
        constraints = [f"{k}={json.dumps(p[k])}" for k in _CONSTRAINT_KEYS if k in p]
        if constraints:
            line += "  " + " ".join(constraints)
        click.echo(line)
    click.echo(f"Resources: {result['ResourceCount']}")
