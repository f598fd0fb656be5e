"""What a client sends with a template: the ``files`` map, read from a folder on the client.

Like heatclient, the CLI sends the files a template may need; the engine never reads its own
disk. Files are keyed by their path relative to the folder (``fragments/x.sh``), so that a
nested template's relative references resolve against its own key. Environment files' template
mappings are rewritten the same way, relative to that folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

MAX_FILES = 5000
MAX_FILE_BYTES = 1024 * 1024
_SKIP_DIRS = {".git", "__pycache__", ".venv", "node_modules"}


def collect_files(root: Path) -> dict[str, str]:
    """Every text file under ``root``, keyed by its relative posix path."""
    files: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for filename in sorted(filenames):
            full = Path(dirpath) / filename
            try:
                if full.stat().st_size > MAX_FILE_BYTES:
                    continue
                text = full.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue  # binary or unreadable: not something a template can include
            files[full.relative_to(root).as_posix()] = text
            if len(files) >= MAX_FILES:
                return files
    return files


def key_for(path: Path, root: Path) -> str:
    """The files-map key of a file on disk (its path relative to the root when inside it)."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(root.resolve()).as_posix()
    except ValueError:
        return resolved.name


def rebase_registry(env: Any, env_path: Path, root: Path) -> Any:
    """Rewrite an environment's template mappings from env-relative to root-relative keys."""
    if not isinstance(env, dict) or not isinstance(env.get("resource_registry"), dict):
        return env
    base = env_path.resolve().parent

    def rebase(mapping: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in mapping.items():
            if isinstance(v, dict):
                out[k] = rebase(v)
            elif isinstance(v, str) and _is_local_template(v):
                out[k] = key_for(base / v, root)
            else:
                out[k] = v
        return out

    return {**env, "resource_registry": rebase(env["resource_registry"])}


def _is_local_template(value: str) -> bool:
    return value.endswith((".yaml", ".yml", ".template")) and "://" not in value


def parse_params(values: Sequence[str]) -> dict[str, str]:
    """``-P key=value`` options as a map (values stay strings: the template gives types)."""
    params: dict[str, str] = {}
    for item in values:
        if "=" not in item:
            raise click.UsageError(f"-P expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        params[key.strip()] = value
    return params
