"""``convergence demo``: the example stack's whole life, on a database of its own."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from convergence.cli import cli
from convergence.cli.demo_cmd import summarize
from convergence.ports.views import EventView


@pytest.fixture(autouse=True)
def user_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Where the user's own stacks would be: the demo must not create or touch it."""
    path = tmp_path / "user" / "convergence.db"
    monkeypatch.setenv("CONVERGENCE_DATABASE_URL", f"sqlite:///{path}")
    monkeypatch.setenv("CONVERGENCE_DATA_DIR", str(tmp_path / "user"))
    monkeypatch.delenv("CONVERGENCE_BROKER_URL", raising=False)
    yield path
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == "convergence"]:
        root.removeHandler(handler)


def test_the_demo_creates_updates_breaks_repairs_and_deletes_a_cloud_stack(
        user_database: Path) -> None:
    result = CliRunner().invoke(cli, ["demo"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "(throwaway)" in out and "in a simulated cloud at http://127.0.0.1:" in out
    assert "Created (10): " in out
    assert "Stack app CREATE_COMPLETE" in out
    # The update: a new flavor replaces the app server, new metadata updates db in place.
    assert "Replaced (1): app" in out and "Updated (1): db" in out
    assert "Stack app UPDATE_COMPLETE" in out
    # db vanishes behind the engine's back: the check finds it, the converge makes it again.
    assert "Stack app CHECK_FAILED: Resource CHECK failed: db: server" in out
    assert "not found in the cloud" in out
    assert out.count("Stack app UPDATE_COMPLETE") == 2
    assert "Stack app DELETE_COMPLETE" in out
    assert "Left in the cloud: nothing of the stack" in out
    assert "[db]: DELETE_COMPLETE" in out  # the events are shown
    assert not user_database.exists()


def test_the_demo_can_use_a_given_database(tmp_path: Path, user_database: Path) -> None:
    url = f"sqlite:///{tmp_path / 'given.db'}"
    for _ in range(2):  # the stack of the first run was deleted: the name is free again
        result = CliRunner().invoke(cli, ["demo", "--database-url", url],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert "Stack app DELETE_COMPLETE" in result.output
    assert (tmp_path / "given.db").exists()
    assert not user_database.exists()


def test_the_demo_runs_as_a_command() -> None:
    out = subprocess.run([sys.executable, "-m", "convergence", "demo"], capture_output=True,
                         text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "Done: stack 'app' was created, updated, broken, checked, repaired and deleted" \
        in out.stdout
    assert out.stderr == ""  # logging stays quiet at the CLI's level


def _event(i: int, name: str, action: str, status: str,
           rtype: str = "OS::Heat::TestResource") -> EventView:
    return EventView(i, "s", 2, name, None, rtype, action, status, "", 0.0)


def test_summaries_tell_replacements_from_creations_and_deletions() -> None:
    events = [
        _event(1, "stack", "UPDATE", "IN_PROGRESS", "OS::Heat::Stack"),
        _event(2, "new", "CREATE", "COMPLETE"),
        _event(3, "node", "CREATE", "COMPLETE"),
        _event(4, "node", "DELETE", "COMPLETE"),
        _event(5, "gone", "DELETE", "COMPLETE"),
        _event(6, "changed", "UPDATE", "COMPLETE"),
        _event(7, "broken", "UPDATE", "FAILED"),
    ]
    assert summarize(events, {"new", "node", "changed", "broken", "same"}) == {
        "Created": ["new"], "Updated": ["changed"], "Replaced": ["node"],
        "Deleted": ["gone"], "Failed": ["broken"], "Unchanged": ["same"],
    }
