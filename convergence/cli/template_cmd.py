"""``convergence template ...``: validate templates as a client would send them.

In remote mode (``--url``) the template, files map and environments go to the API's
``POST /validate`` instead (``convergence.cli.remote``); its problems print the same way.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, cast

import click

from convergence import services
from convergence.admission import SizeLimits
from convergence.cli import output as out
from convergence.cli.files import key_for, parse_params, root_folder, sent_files
from convergence.cli.remote import RemoteClient, RemoteError
from convergence.cli.state import CliState, pass_state
from convergence.settings import load_settings
from convergence.template import TemplateError


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
    root = root_folder(file, env_files, files_dir)
    try:
        client = state.remote()
        # Embedded, the template is validated at its key; the API takes it without one.
        location = key_for(file, root) if client is None else None
        files, environments = sent_files(file, file.read_bytes(), env_files, root,
                                         location=location)
        if client is not None:
            result = _remote_validate(client, file, files, environments, params, fmt)
        else:
            result = services.validate_template(
                file.read_bytes(), files=files, location=location,
                environments=environments, parameters=parse_params(params) if params else None,
                sizes=SizeLimits.of(load_settings()),
            )
    except TemplateError as exc:
        if fmt in ("json", "yaml"):
            click.echo(out.dump({"errors": [
                {"path": p.path, "message": p.message, "kind": p.kind} for p in exc.problems
            ]}, cast(out.Format, fmt)))
        else:
            click.echo(f"{file}: invalid ({len(exc.problems)} "
                       f"error{'s' if len(exc.problems) != 1 else ''})", err=True)
            for p in exc.problems:
                click.echo(str(p))
        sys.exit(1)
    if fmt == "text":
        _print_text(file, result)
    else:
        out.emit_record(result, cast(out.Format, fmt))


def _remote_validate(client: RemoteClient, file: Path, files: dict[str, str],
                     environments: list[Any], params: tuple[str, ...],
                     fmt: str) -> dict[str, Any]:
    """Remote mode: the API's answer; a refusal printed like a local one (exit 1)."""
    try:
        result: dict[str, Any] = client.validate_template(
            file.read_text(encoding="utf-8"), files=files, environments=environments,
            parameters=parse_params(params) if params else None)
    except RemoteError as exc:
        if exc.type not in ("StackValidationFailed", "RequestLimitExceeded"):
            raise
        if fmt in ("json", "yaml"):
            click.echo(out.dump({"errors": [{"message": line} for line in exc.lines]},
                                cast(out.Format, fmt)))
        else:
            n = len(exc.lines)
            click.echo(f"{file}: invalid ({n} error{'s' if n != 1 else ''})", err=True)
            for line in exc.lines:
                click.echo(line)
        sys.exit(1)
    return result


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
