"""``convergence stack hook poll|clear`` in the embedded mode: a stack paused on a hook is
left paused when the command that made it ends; ``hook poll`` names the paused resource and
``hook clear`` lets it go on, running the rest of the work in its own process."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from convergence.cli import cli

TEMPLATE = """\
    heat_template_version: 2018-08-31
    resources:
      first: {type: OS::Heat::TestResource, properties: {value: one}}
      second: {type: OS::Heat::TestResource, depends_on: [first]}
    """

HOOKS = """\
    resource_registry:
      resources:
        first: {hooks: pre-create}
    """


def test_hook_poll_and_clear_embedded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVERGENCE_DATABASE_URL", f"sqlite:///{tmp_path / 'c.db'}")
    monkeypatch.delenv("CONVERGENCE_URL", raising=False)
    (tmp_path / "t.yaml").write_text(textwrap.dedent(TEMPLATE))
    (tmp_path / "hooks.yaml").write_text(textwrap.dedent(HOOKS))

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout

    created = run("stack", "create", "paused", "-t", str(tmp_path / "t.yaml"),
                  "-e", str(tmp_path / "hooks.yaml"))
    assert "CREATE_IN_PROGRESS" in created
    polled = json.loads(run("stack", "hook", "poll", "paused", "-f", "json"))
    assert [(p["resource_name"], p["hook_type"]) for p in polled] == [("first",
                                                                        "pre-create")]
    cleared = run("stack", "hook", "clear", "paused", "first")
    assert "first: pre-create cleared" in cleared
    assert "paused: CREATE_COMPLETE" in cleared
    assert json.loads(run("stack", "hook", "poll", "paused", "-f", "json")) == []
