"""``convergence template ...``: validate templates as a client would send them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from convergence import services
from convergence.cli.files import collect_files, key_for, parse_params, rebase_registry
from convergence.template import TemplateError, load_document


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
              help="Folder whose files are sent as the files map (default: the template's).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def validate(file: Path, env_files: tuple[Path, ...], params: tuple[str, ...],
             files_dir: Path | None, fmt: str) -> None:
    """Validate FILE; print its description and parameters, or every error with its path."""
    root = files_dir or file.resolve().parent
    files = collect_files(root)
    try:
        environments = [rebase_registry(load_document(p.read_bytes(), p.name), p, root)
                        for p in env_files]
        result = services.validate_template(
            file.read_bytes(), files=files, location=key_for(file, root),
            environments=environments, parameters=parse_params(params) if params else None,
        )
    except TemplateError as exc:
        if fmt == "json":
            click.echo(json.dumps({"errors": [
                {"path": p.path, "message": p.message, "kind": p.kind} for p in exc.problems
            ]}, indent=2))
        else:
            click.echo(f"{file}: invalid ({len(exc.problems)} "
                       f"error{'s' if len(exc.problems) != 1 else ''})", err=True)
            for p in exc.problems:
                click.echo(str(p))
        sys.exit(1)
    if fmt == "json":
        click.echo(json.dumps(result, indent=2, default=str))
    else:
        _print_text(file, result)


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
