"""The real-world template corpus, validated as a client would.

The corpus is a folder holding ``heat-templates/``, ``magnum/`` and ``tripleo/``: the one named by
``CONVERGENCE_CORPUS_DIR``, else ``../shared/templates`` next to this repository. A clone without
it can make one with ``tests/corpus/fetch.sh DIR`` (which says where each source comes from).

For each template (a YAML file with ``heat_template_version``) the files map is every file of
its source (heat-templates, magnum, tripleo) keyed by path relative to that source, the
template's location is its own key, and the environment files of that source that map a type
the template uses are merged in name order. Run as a program it prints the tally by outcome:

    python -m tests.corpus.corpus
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from convergence.cli.files import MAX_FILE_BYTES, rebase_registry
from convergence.plugins.registry import PluginRegistry
from convergence.template import (
    Problems,
    TemplateError,
    load_document,
    parse_environment,
    validate_stack,
)

DEFAULT_ROOT = Path(__file__).resolve().parents[2].parent / "shared" / "templates"
ROOT = Path(os.environ.get("CONVERGENCE_CORPUS_DIR") or DEFAULT_ROOT)
SOURCES = ("heat-templates", "magnum", "tripleo")
HONEST = frozenset({"resource-type", "file"})


@dataclass(frozen=True)
class Outcome:
    path: str
    kinds: frozenset[str]
    problems: tuple[str, ...]

    @property
    def valid(self) -> bool:
        return not self.kinds

    @property
    def honest(self) -> bool:
        return self.kinds <= HONEST


def _yaml_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def _peek(path: Path) -> object:
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return None


def templates_and_environments(source: Path) -> tuple[list[Path], list[Path]]:
    templates, environments = [], []
    for path in _yaml_files(source):
        data = _peek(path)
        if not isinstance(data, dict):
            continue
        if "heat_template_version" in data:
            templates.append(path)
        elif {"resource_registry", "parameter_defaults"} & set(data):
            environments.append(path)
    return templates, environments


def source_files(source: Path) -> dict[str, str]:
    """Every text file of a source, keyed by its path relative to it: the corpus validates
    each template against its whole source, not against what a client would send for it."""
    files: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(source):
        dirnames[:] = sorted(d for d in dirnames if d not in (".git", "__pycache__"))
        for filename in sorted(filenames):
            full = Path(dirpath) / filename
            try:
                if full.stat().st_size > MAX_FILE_BYTES:
                    continue
                files[full.relative_to(source).as_posix()] = full.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue  # binary or unreadable: not something a template can include
    return files


def validate_source(source: Path) -> list[Outcome]:
    catalog = PluginRegistry.from_entry_points()
    files = source_files(source)
    templates, env_paths = templates_and_environments(source)
    environments = []
    for path in env_paths:
        data = rebase_registry(load_document(path.read_bytes(), path.name), path, source)
        env = parse_environment(data, path.name, Problems())
        mapped = set((data.get("resource_registry") or {}).keys())
        environments.append((path, env, mapped))
    outcomes = []
    for path in templates:
        key = path.relative_to(source).as_posix()
        text = files.get(key, path.read_text())
        used = {line.split("type:", 1)[1].strip().strip("'\"") for line in text.splitlines()
                if line.strip().startswith("type:")}
        envs = [env for _, env, mapped in environments if mapped & used]
        try:
            validate_stack(text, catalog=catalog, files=files, location=key,
                           environments=envs)
        except TemplateError as exc:
            outcomes.append(Outcome(f"{source.name}/{key}", exc.kinds,
                                    tuple(str(p) for p in exc.problems)))
        else:
            outcomes.append(Outcome(f"{source.name}/{key}", frozenset(), ()))
    return outcomes


def corpus_available(root: Path = ROOT) -> bool:
    return all((root / source).is_dir() for source in SOURCES)


def missing_message(root: Path = ROOT) -> str:
    """Why the corpus cannot be read, and how to get it."""
    where = ("CONVERGENCE_CORPUS_DIR" if os.environ.get("CONVERGENCE_CORPUS_DIR")
             else "the default location")
    return (f"the template corpus is not at {root} ({where}; it needs "
            f"{', '.join(s + '/' for s in SOURCES)}): run `tests/corpus/fetch.sh DIR` and set "
            "CONVERGENCE_CORPUS_DIR=DIR")


def main() -> None:
    by_outcome: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    for name in SOURCES:
        for o in validate_source(ROOT / name):
            if o.valid:
                label = "valid"
            elif o.honest:
                label = "fails only with: " + " + ".join(sorted(o.kinds))
            else:
                label = "FAILS WITH OTHER ERRORS"
                if os.environ.get("VERBOSE"):
                    print(o.path, *o.problems, sep="\n  ")
            by_outcome[f"{name:15s} {label}"] += 1
            by_kind.update(p.split(" [", 1)[0] for p in o.kinds)
    print("templates by outcome:")
    for label, count in sorted(by_outcome.items()):
        print(f"  {count:4d}  {label}")
    print("templates with each kind of problem:")
    for kind, count in sorted(by_kind.items()):
        print(f"  {count:4d}  {kind}")


if __name__ == "__main__":
    main()
