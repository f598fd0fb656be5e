"""``convergence --url ... stack|resource|event|output|template`` against a real API process.

The server is ``convergence api`` started as a subprocess on a free loopback port with a SQLite
file of its own (as in ``tests/api/test_openstacksdk.py``); the CLI runs in this process through
click's CliRunner, so it never opens the database: every command goes over HTTP. ``--wait`` and
``event list --follow`` read the SSE watch stream.
"""

from __future__ import annotations

import json
import logging
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from convergence.cli import cli
from tests.api_process import free_port, running_api

TEMPLATE = """\
    heat_template_version: 2018-08-31
    parameters:
      value: {type: string, default: one}
    resources:
      first:
        type: OS::Heat::TestResource
        properties: {value: {get_param: value}}
      second:
        type: OS::Heat::TestResource
        depends_on: [first]
    outputs:
      copied: {value: {get_attr: [first, output]}}
    """

FAILING = """\
    heat_template_version: 2018-08-31
    resources:
      bad:
        type: OS::Heat::TestResource
        properties: {fail: true}
    """

INVALID = """\
    heat_template_version: 2018-08-31
    resources:
      x:
        type: OS::Heat::TestResource
        depends_on: [missing]
    """


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_api(tmp_path_factory.mktemp("remote")) as url:
        yield url


@pytest.fixture
def remote(server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A tenant of its own per test; no database settings, so embedded mode would fail."""
    monkeypatch.setenv("CONVERGENCE_PROJECT_ID", tmp_path.name)
    monkeypatch.delenv("CONVERGENCE_URL", raising=False)
    monkeypatch.setenv("CONVERGENCE_DATABASE_URL", "sqlite:////nonexistent/dir/never.db")
    yield server
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == "convergence"]:
        root.removeHandler(handler)


def run(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--url", url, *args], catch_exceptions=False)


def as_json(result: Result) -> Any:
    return json.loads(result.stdout)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def test_stack_lifecycle_over_the_api(remote: str, tmp_path: Path) -> None:
    tpl = str(write(tmp_path, "t.yaml", TEMPLATE))

    created = run(remote, "stack", "create", "web", "-t", tpl, "--wait")
    assert created.exit_code == 0, created.output
    assert "web: CREATE_COMPLETE" in created.output  # progress from the stream
    assert "CREATE_COMPLETE" in created.stdout

    listed = run(remote, "stack", "list")
    assert listed.exit_code == 0, listed.output
    assert "web" in listed.stdout and "CREATE_COMPLETE" in listed.stdout
    rows = as_json(run(remote, "stack", "list", "-f", "json"))
    assert [r["stack_name"] for r in rows] == ["web"]

    shown = run(remote, "stack", "show", "web", "-f", "json")
    assert shown.exit_code == 0, shown.output
    stack = as_json(shown)
    assert stack["stack_status"] == "CREATE_COMPLETE"
    assert stack["generation"] == stack["observed_generation"] == 1
    assert stack["outputs"] == [{"output_key": "copied", "output_value": "one",
                                 "description": ""}]

    resources = as_json(run(remote, "stack", "resources", "web", "-f", "json"))
    assert {r["resource_name"]: r["resource_status"] for r in resources} == \
        {"first": "CREATE_COMPLETE", "second": "CREATE_COMPLETE"}
    assert all(r["physical_resource_id"] for r in resources)
    table = run(remote, "resource", "list", "web")
    assert table.exit_code == 0 and "Resource Status" in table.stdout
    first = as_json(run(remote, "resource", "show", "web", "first", "-f", "json"))
    assert first["resource_type"] == "OS::Heat::TestResource"
    assert first["required_by"] == ["second"]

    events = as_json(run(remote, "event", "list", "web", "-f", "json"))
    assert [e["resource_status"] for e in events if e["resource_name"] == "web"] == \
        ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]
    assert run(remote, "event", "list", "web").exit_code == 0
    # Paged, sorted and filtered by the API as the embedded mode does it.
    newest = as_json(run(remote, "event", "list", "web", "--sort", ":desc", "--limit", "1",
                         "-f", "json"))
    assert newest == events[-1:]
    after = as_json(run(remote, "event", "list", "web", "--marker", str(events[1]["id"]),
                        "--limit", "2", "-f", "json"))
    assert after == events[2:4]
    mine = as_json(run(remote, "event", "list", "web", "--resource", "first",
                       "--filter", "resource_status=COMPLETE", "-f", "json"))
    assert mine == [e for e in events if e["resource_name"] == "first"
                    and e["resource_status"].endswith("_COMPLETE")]
    unknown = run(remote, "event", "list", "web", "--marker", "999999")
    assert unknown.exit_code == 1 and "'marker'" in unknown.output

    out = as_json(run(remote, "output", "show", "web", "copied", "-f", "json"))
    assert out == {"output_key": "copied", "output_value": "one", "description": ""}
    keys = as_json(run(remote, "output", "list", "web", "-f", "json"))
    assert [k["output_key"] for k in keys] == ["copied"]

    updated = run(remote, "stack", "update", "web", "--existing", "-P", "value=two", "--wait",
                  "-f", "json")
    assert updated.exit_code == 0, updated.output
    assert as_json(updated)["stack_status"] == "UPDATE_COMPLETE"
    out = as_json(run(remote, "output", "show", "web", "copied", "-f", "json"))
    assert out["output_value"] == "two"
    stack = as_json(run(remote, "stack", "show", "web", "-f", "json"))
    assert stack["generation"] == stack["observed_generation"] == 2

    deleted = run(remote, "stack", "delete", "web", "--yes", "--wait")
    assert deleted.exit_code == 0, deleted.output
    assert "Stack web DELETE_COMPLETE" in deleted.stdout
    assert as_json(run(remote, "stack", "list", "-f", "json")) == []
    gone = run(remote, "stack", "show", "web")
    assert gone.exit_code == 1
    assert gone.output.strip() == "Error: The Stack (web) could not be found."


def test_follow_prints_the_events_of_the_running_request(remote: str, tmp_path: Path) -> None:
    tpl = str(write(tmp_path, "t.yaml", TEMPLATE))
    assert run(remote, "stack", "create", "app", "-t", tpl).exit_code == 0  # no wait
    followed = run(remote, "event", "list", "app", "--follow")
    assert followed.exit_code == 0, followed.output
    lines = followed.stdout.splitlines()
    assert "[app]: CREATE_IN_PROGRESS" in lines[0]
    assert "[app]: CREATE_COMPLETE" in lines[-1]
    assert any("[second]: CREATE_COMPLETE" in line for line in lines)
    as_lines = run(remote, "event", "list", "app", "--follow", "-f", "json")
    assert [json.loads(x)["resource_name"] for x in as_lines.stdout.splitlines()][-1] == "app"


def test_a_failed_request_exits_1(remote: str, tmp_path: Path) -> None:
    tpl = str(write(tmp_path, "bad.yaml", FAILING))
    result = run(remote, "stack", "create", "broken", "-t", tpl, "--wait", "--disable-rollback")
    assert result.exit_code == 1
    assert "Error: stack broken CREATE_FAILED" in result.output
    # Rolled back (the default): the create failed all the same.
    result = run(remote, "stack", "create", "undone", "-t", tpl, "--wait")
    assert result.exit_code == 1
    assert "Error: stack undone ROLLBACK_COMPLETE: the CREATE failed and was rolled back: " \
        "Resource CREATE failed: bad: Test Resource failed" in result.output


def test_api_errors_print_one_line_each(remote: str, tmp_path: Path) -> None:
    tpl = str(write(tmp_path, "t.yaml", TEMPLATE))
    missing = run(remote, "output", "show", "nope", "copied")
    assert missing.exit_code == 1
    assert missing.output.strip() == "Error: The Stack (nope) could not be found."

    assert run(remote, "stack", "create", "twice", "-t", tpl, "--wait").exit_code == 0
    again = run(remote, "stack", "create", "twice", "-t", tpl)
    assert again.exit_code == 1
    assert len(again.output.strip().splitlines()) == 1
    assert again.output.startswith("Error: ")

    no_output = run(remote, "output", "show", "twice", "nope")
    assert no_output.exit_code == 1
    assert "nope" in no_output.output

    invalid = str(write(tmp_path, "invalid.yaml", INVALID))
    refused = run(remote, "stack", "create", "invalid", "-t", invalid)
    assert refused.exit_code == 1
    lines = refused.output.strip().splitlines()
    assert lines and all(line.startswith("Error: ") for line in lines)
    assert "missing" in refused.output


def test_template_validate_and_token(remote: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    tpl = str(write(tmp_path, "t.yaml", TEMPLATE))
    valid = run(remote, "template", "validate", tpl, "--format", "json")
    assert valid.exit_code == 0, valid.output
    assert "value" in as_json(valid)["Parameters"]

    invalid = str(write(tmp_path, "invalid.yaml", INVALID))
    refused = run(remote, "template", "validate", invalid)
    assert refused.exit_code == 1
    assert "invalid (" in refused.output and "missing" in refused.output

    # CONVERGENCE_URL instead of --url; a token is sent (ignored by the noauth server).
    monkeypatch.setenv("CONVERGENCE_URL", remote)
    monkeypatch.setenv("CONVERGENCE_TOKEN", "secret")
    listed = CliRunner().invoke(cli, ["stack", "list", "-f", "json"], catch_exceptions=False)
    assert listed.exit_code == 0, listed.output
    assert as_json(listed) == []


def test_unreachable_api_is_one_error_line(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONVERGENCE_URL", raising=False)
    result = run(f"http://127.0.0.1:{free_port()}", "stack", "list")
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1
    assert result.output.startswith("Error: http://127.0.0.1:")


# TEMPLATE with one more resource, whose create takes ten minutes: an update to it stays in
# progress (no race with the cancel), and rolling it back deletes that resource at once.
SLOW_ADDITION = TEMPLATE.replace("""\
    outputs:""", """\
      slow:
        type: OS::Heat::TestResource
        depends_on: [first]
        properties: {action_wait_secs: {create: 600}}
    outputs:""")


def test_cancel_over_the_api(remote: str, tmp_path: Path) -> None:
    tpl = str(write(tmp_path, "t.yaml", TEMPLATE))
    slow = str(write(tmp_path, "slow.yaml", SLOW_ADDITION))
    assert run(remote, "stack", "create", "web", "-t", tpl, "--wait").exit_code == 0
    assert as_json(run(remote, "stack", "show", "web", "-f", "json"))["disable_rollback"] \
        is False

    updating = run(remote, "stack", "update", "web", "-t", slow, "-P", "value=two", "-f", "json")
    assert updating.exit_code == 0, updating.output
    assert as_json(updating)["stack_status"] == "UPDATE_IN_PROGRESS"
    cancelled = run(remote, "stack", "cancel", "web", "--wait", "-f", "json")
    assert cancelled.exit_code == 0, cancelled.output
    stack = as_json(cancelled)
    assert stack["stack_status"] == "ROLLBACK_COMPLETE", stack["stack_status_reason"]
    assert stack["generation"] == 3
    out = as_json(run(remote, "output", "show", "web", "copied", "-f", "json"))
    assert out["output_value"] == "one"
    resources = as_json(run(remote, "stack", "resources", "web", "-f", "json"))
    assert sorted(r["resource_name"] for r in resources) == ["first", "second"]

    nothing = run(remote, "stack", "cancel", "web")
    assert nothing.exit_code == 1
    assert nothing.output.strip() == ("Error: The Stack (web) is ROLLBACK_COMPLETE: only a "
                                      "create or an update in progress can be cancelled.")

    assert run(remote, "stack", "update", "web", "-t", slow).exit_code == 0
    stopped = run(remote, "stack", "cancel", "web", "--no-rollback", "--wait", "-f", "json")
    assert stopped.exit_code == 0, stopped.output
    stack = as_json(stopped)
    assert (stack["stack_status"], stack["stack_status_reason"]) == \
        ("UPDATE_FAILED", "Stack UPDATE cancelled")
    shown = as_json(run(remote, "stack", "show", "web", "-f", "json"))
    assert (shown["stack_status"], shown["generation"]) == ("UPDATE_FAILED", 5)


def test_update_sends_the_rollback_setting(remote: str, tmp_path: Path) -> None:
    tpl = str(write(tmp_path, "t.yaml", TEMPLATE))
    assert run(remote, "stack", "create", "web", "-t", tpl, "--disable-rollback",
               "--wait").exit_code == 0
    assert as_json(run(remote, "stack", "show", "web", "-f", "json"))["disable_rollback"] \
        is True
    assert run(remote, "stack", "update", "web", "--existing", "--wait").exit_code == 0
    assert as_json(run(remote, "stack", "show", "web", "-f", "json"))["disable_rollback"] \
        is True  # kept
    assert run(remote, "stack", "update", "web", "--existing", "--enable-rollback",
               "--wait").exit_code == 0
    assert as_json(run(remote, "stack", "show", "web", "-f", "json"))["disable_rollback"] \
        is False
