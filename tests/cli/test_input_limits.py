"""The embedded CLI refuses what the API refuses: stack names Heat would refuse, and
templates, files and environments over the size limits (``CONVERGENCE_MAX_TEMPLATE_BYTES``,
``CONVERGENCE_MAX_REQUEST_BYTES``), before anything is stored.

Every test runs the real command line (click's CliRunner) on a SQLite file of its own and
checks the store's rows afterwards.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import create_engine, text

from convergence.cli import cli

TEMPLATE = """\
heat_template_version: 2018-08-31
description: {description}
resources:
  a:
    type: OS::Heat::None
"""
TABLES = ("templates", "stacks", "traversals", "events")


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("CONVERGENCE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CONVERGENCE_DATABASE_URL", url)
    for name in ("CONVERGENCE_BROKER_URL", "CONVERGENCE_PROJECT_ID", "CONVERGENCE_URL",
                 "CONVERGENCE_MAX_TEMPLATE_BYTES", "CONVERGENCE_MAX_REQUEST_BYTES"):
        monkeypatch.delenv(name, raising=False)
    yield url
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == "convergence"]:
        root.removeHandler(handler)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def rows(url: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            if not conn.execute(text("SELECT count(*) FROM sqlite_master WHERE name = 'stacks'"
                                     )).scalar_one():
                return dict.fromkeys(TABLES, 0)  # no command opened the database yet
            return {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one())
                    for t in TABLES}
    finally:
        engine.dispose()


def template(folder: Path, name: str = "t.yaml", description_bytes: int = 10) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(TEMPLATE.format(description="d" * description_bytes))
    return path


# Stack names -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["my stack", "a/b", "../x", "1abc", "x" * 300, "stäck"])
def test_a_name_heat_refuses_is_refused(db_url: str, tmp_path: Path, name: str) -> None:
    result = run("stack", "create", name, "-t", str(template(tmp_path / "tpl")))
    assert result.exit_code == 1, result.output
    assert f"Invalid stack name {name} must contain only alphanumeric" in result.output
    assert rows(db_url)["stacks"] == 0
    assert rows(db_url)["templates"] == 0


def test_a_name_heat_accepts_is_created(db_url: str, tmp_path: Path) -> None:
    result = run("stack", "create", "web.tier-1_b", "-t", str(template(tmp_path / "tpl")))
    assert result.exit_code == 0, result.output
    assert rows(db_url)["stacks"] == 1


# Sizes -------------------------------------------------------------------------------------

def test_an_oversized_template_is_refused_and_nothing_stored(db_url: str,
                                                             tmp_path: Path) -> None:
    big = template(tmp_path / "big", description_bytes=1024 * 1024 + 1)
    result = run("stack", "create", "s", "-t", str(big))
    assert result.exit_code == 1, result.output
    assert "template: the document is" in result.output
    assert "over the limit of 1048576 bytes" in result.output
    assert rows(db_url) == dict.fromkeys(TABLES, 0)


def test_an_update_to_an_oversized_template_changes_nothing(db_url: str,
                                                            tmp_path: Path) -> None:
    assert run("stack", "create", "s", "-t", str(template(tmp_path / "small"))).exit_code == 0
    before = rows(db_url)
    big = template(tmp_path / "big", description_bytes=1024 * 1024 + 1)
    result = run("stack", "update", "s", "-t", str(big))
    assert result.exit_code == 1, result.output
    assert "over the limit of 1048576 bytes" in result.output
    assert rows(db_url) == before
    shown = run("stack", "show", "s", "-f", "json")
    assert '"generation": 1' in shown.output


def test_the_limits_are_the_settings(db_url: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "tpl"
    tpl = template(folder, description_bytes=20 * 1024)
    monkeypatch.setenv("CONVERGENCE_MAX_TEMPLATE_BYTES", str(16 * 1024))
    result = run("stack", "create", "s", "-t", str(tpl))
    assert result.exit_code == 1, result.output
    assert "over the limit of 16384 bytes" in result.output
    result = run("template", "validate", str(tpl))
    assert result.exit_code == 1, result.output
    assert "over the limit of 16384 bytes" in result.output
    assert rows(db_url)["stacks"] == 0

    # Each file of the files map (what the template references) is held to the same limit.
    monkeypatch.setenv("CONVERGENCE_MAX_TEMPLATE_BYTES", str(32 * 1024))
    (folder / "notes.txt").write_text("n" * 40 * 1024)
    with tpl.open("a") as f:
        f.write("outputs:\n  notes: {value: {get_file: notes.txt}}\n")
    result = run("stack", "create", "s", "-t", str(tpl))
    assert result.exit_code == 1, result.output
    assert "files.notes.txt: the document is 40960 bytes" in result.output
    assert rows(db_url)["stacks"] == 0

    # And everything together to the request limit: 20 + 2 x 30 KiB.
    (folder / "notes.txt").write_text("n" * 30 * 1024)
    (folder / "more.txt").write_text("m" * 30 * 1024)
    with tpl.open("a") as f:
        f.write("  more: {value: {get_file: more.txt}}\n")
    monkeypatch.setenv("CONVERGENCE_MAX_REQUEST_BYTES", str(64 * 1024))
    result = run("stack", "create", "s", "-t", str(tpl))
    assert result.exit_code == 1, result.output
    assert "together, over the limit of 65536 bytes" in result.output
    assert rows(db_url)["stacks"] == 0

    # Raised, they let it through.
    monkeypatch.setenv("CONVERGENCE_MAX_REQUEST_BYTES", str(256 * 1024))
    assert run("stack", "create", "s", "-t", str(tpl)).exit_code == 0
    assert rows(db_url)["stacks"] == 1
