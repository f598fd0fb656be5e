"""``convergence stack|resource|event|output ...`` on the embedded default: output and exit codes.

Every test runs the real command line (click's CliRunner) against a SQLite file of its own,
named through ``CONVERGENCE_DATABASE_URL``; nothing asserts on timing.
"""

from __future__ import annotations

import json
import logging
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from convergence.cli import cli, local, progress
from convergence.cli.state import DEFAULT_TENANT
from convergence.ports.clock import ManualClock
from convergence.runtime import Runtime, open_runtime
from convergence.services import queries, running, stacks
from convergence.settings import Settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WEB = ["-t", str(EXAMPLES / "web-stack.yaml"), "-e", str(EXAMPLES / "web-stack-env.yaml")]

FAILING = """\
    heat_template_version: 2018-08-31
    resources:
      good:
        type: OS::Heat::TestResource
      bad:
        type: OS::Heat::TestResource
        depends_on: [good]
        properties:
          fail: true
    """

SMALL = """\
    heat_template_version: 2018-08-31
    resources:
      first:
        type: OS::Heat::TestResource
        properties: {value: one}
      second:
        type: OS::Heat::TestResource
        properties: {value: {get_attr: [first, output]}}
      third:
        type: OS::Heat::TestResource
        depends_on: [second]
    outputs:
      copied: {value: {get_attr: [second, output]}}
    """


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("CONVERGENCE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CONVERGENCE_DATABASE_URL", url)
    monkeypatch.delenv("CONVERGENCE_BROKER_URL", raising=False)
    monkeypatch.delenv("CONVERGENCE_PROJECT_ID", raising=False)
    yield url
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == "convergence"]:
        root.removeHandler(handler)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def as_json(result: Result) -> Any:
    return json.loads(result.stdout)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def runtime(url: str) -> Runtime:
    # One hop per work item, so that a test can stop a traversal after a given number.
    return open_runtime(Settings(database_url=url, inline_seconds=0.0))


def by_name(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["resource_name"]: r for r in rows}


# create, show, resources, outputs -------------------------------------------------------------

def test_create_with_wait_then_show_resources_and_outputs(db_url: str) -> None:
    created = run("stack", "create", "web", *WEB, "--wait")
    assert created.exit_code == 0, created.output
    assert "web: CREATE_COMPLETE  5/5 resources done" in created.output  # plain progress

    shown = run("stack", "show", "web", "-f", "json")
    assert shown.exit_code == 0
    stack = as_json(shown)
    assert stack["stack_name"] == "web"
    assert stack["stack_status"] == "CREATE_COMPLETE"
    assert stack["stack_status_reason"] == "Stack CREATE completed successfully"
    assert stack["generation"] == 1 and stack["observed_generation"] == 1
    assert {o["output_key"]: o["output_value"] for o in stack["outputs"]}["front_end"] == \
        "frontend for web-demo-m1.small (2 nodes)"

    resources = by_name(as_json(run("stack", "resources", "web", "-f", "json")))
    assert set(resources) == {"db_password", "app_config", "web_node", "front_end", "monitor"}
    assert {r["resource_status"] for r in resources.values()} == {"CREATE_COMPLETE"}
    assert resources["web_node"]["resource_type"] == "OS::Heat::TestResource"  # via registry
    assert all(r["physical_resource_id"] for r in resources.values())
    # The alias, as a table.
    table = run("resource", "list", "web")
    assert table.exit_code == 0
    assert "front_end" in table.output and "Resource Status" in table.output

    node = as_json(run("resource", "show", "web", "web_node", "-f", "json"))
    assert node["resource_name"] == "web_node" and node["required_by"] == ["front_end"]

    listed = as_json(run("output", "list", "web", "-f", "json"))
    assert {o["output_key"] for o in listed} == {"front_end", "database_url", "monitor"}
    value = as_json(run("output", "show", "web", "front_end", "-f", "json"))
    assert value == {"output_key": "front_end", "description": "What the front end serves.",
                     "output_value": "frontend for web-demo-m1.small (2 nodes)"}

    stacks = as_json(run("stack", "list", "-f", "json"))
    assert [(s["stack_name"], s["stack_status"]) for s in stacks] == [("web", "CREATE_COMPLETE")]


def test_create_without_wait_still_runs_to_the_end_in_embedded_mode(db_url: str,
                                                                    tmp_path: Path) -> None:
    t = write(tmp_path, "small.yaml", SMALL)
    created = run("stack", "create", "small", "-t", str(t), "-f", "json", "--timeout", "5",
                  "--enable-rollback")
    assert created.exit_code == 0, created.output
    assert as_json(created)["stack_status"] == "CREATE_COMPLETE"
    assert "resources done" not in created.output  # no progress without --wait
    shown = as_json(run("stack", "show", "small", "-f", "json"))
    assert shown["timeout_mins"] == 5 and shown["disable_rollback"] is False


def test_wait_shows_what_is_in_progress(db_url: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "REFRESH_SECONDS", 0.0)  # look at every step
    monkeypatch.setattr(progress, "PLAIN_SECONDS", 0.0)  # and print every change
    t = write(tmp_path, "slow.yaml", """\
        heat_template_version: 2018-08-31
        resources:
          quick: {type: OS::Heat::TestResource}
          slow:
            type: OS::Heat::TestResource
            depends_on: [quick]
            properties: {wait_secs: 0.2}
        """)
    result = run("stack", "create", "slow", "-t", str(t), "--wait")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "slow: CREATE_IN_PROGRESS  1/2 resources done; in progress: slow" in lines
    assert "slow: CREATE_COMPLETE  2/2 resources done" in lines


def test_yaml_format_parses(db_url: str, tmp_path: Path) -> None:
    t = write(tmp_path, "small.yaml", SMALL)
    assert run("stack", "create", "small", "-t", str(t)).exit_code == 0
    stack = yaml.safe_load(run("stack", "show", "small", "-f", "yaml").stdout)
    assert stack["stack_status"] == "CREATE_COMPLETE"
    assert stack["outputs"] == [{"output_key": "copied", "output_value": "one",
                                 "description": ""}]
    rows = yaml.safe_load(run("stack", "resources", "small", "-f", "yaml").stdout)
    assert sorted(r["resource_name"] for r in rows) == ["first", "second", "third"]
    events = yaml.safe_load(run("event", "list", "small", "-f", "yaml").stdout)
    assert events[-1]["resource_status"] == "CREATE_COMPLETE"


# update ---------------------------------------------------------------------------------------

def test_update_existing_with_a_parameter_changes_a_value(db_url: str) -> None:
    assert run("stack", "create", "web", *WEB, "--wait").exit_code == 0
    updated = run("stack", "update", "web", "--existing", "-P", "node_count=7", "--wait",
                  "-f", "json")
    assert updated.exit_code == 0, updated.output
    stack = json.loads(updated.stdout)  # progress went to stderr: stdout is pure JSON
    assert stack["stack_status"] == "UPDATE_COMPLETE"
    assert stack["generation"] == 2 and stack["observed_generation"] == 2
    value = as_json(run("output", "show", "web", "front_end", "-f", "json"))
    assert value["output_value"] == "frontend for web-demo-m1.small (7 nodes)"
    # The other values were kept from the stack's current environment and parameters.
    again = run("stack", "update", "web", "--existing", "-P", "flavor=m1.large")
    assert again.exit_code == 0
    value = as_json(run("output", "show", "web", "front_end", "-f", "json"))
    assert value["output_value"] == "frontend for web-demo-m1.large (7 nodes)"


def test_check_reports_and_update_converge_repairs(db_url: str, tmp_path: Path) -> None:
    template = write(tmp_path, "small.yaml", SMALL)
    assert run("stack", "create", "small", "-t", str(template)).exit_code == 0
    assert run("stack", "check", "small").exit_code == 0
    resources = as_json(run("stack", "resources", "small", "-f", "json"))
    assert {r["resource_status"] for r in resources} == {"CHECK_COMPLETE"}
    # Behind the engine's back: the second resource's entity is deleted.
    rt = runtime(db_url)
    entities = rt.registry.backends["test_entities"]
    gone = by_name(resources)["second"]["physical_resource_id"]
    entities.delete(gone)
    checked = run("stack", "check", "small", "-f", "json")
    assert checked.exit_code == 1
    assert json.loads(checked.stdout)["stack_status"] == "CHECK_FAILED"
    failed = by_name(as_json(run("stack", "resources", "small", "-f", "json")))["second"]
    assert failed["resource_status"] == "CHECK_FAILED"
    assert "not found" in failed["resource_status_reason"]
    repaired = run("stack", "update", "small", "--existing", "--converge", "-f", "json")
    assert repaired.exit_code == 0, repaired.output
    assert json.loads(repaired.stdout)["stack_status"] == "UPDATE_COMPLETE"
    again = by_name(as_json(run("stack", "resources", "small", "-f", "json")))["second"]
    assert again["physical_resource_id"] not in (gone, "")
    assert entities.get(again["physical_resource_id"]) == "one"
    rt.store.engine.dispose()


def test_update_needs_a_template_or_existing(db_url: str) -> None:
    result = run("stack", "update", "web")
    assert result.exit_code == 2
    assert "a template is needed" in result.output


# rollback settings and cancel ----------------------------------------------------------------

def test_rollback_is_the_default_and_updates_keep_or_change_it(db_url: str,
                                                               tmp_path: Path) -> None:
    t = write(tmp_path, "small.yaml", SMALL)
    assert run("stack", "create", "small", "-t", str(t)).exit_code == 0
    assert as_json(run("stack", "show", "small", "-f", "json"))["disable_rollback"] is False
    assert run("stack", "create", "kept", "-t", str(t), "--disable-rollback").exit_code == 0
    assert as_json(run("stack", "show", "kept", "-f", "json"))["disable_rollback"] is True
    both = run("stack", "create", "x", "-t", str(t), "--enable-rollback", "--disable-rollback")
    assert both.exit_code == 2 and "contradict" in both.output

    assert run("stack", "update", "small", "--existing", "--disable-rollback").exit_code == 0
    assert as_json(run("stack", "show", "small", "-f", "json"))["disable_rollback"] is True
    assert run("stack", "update", "small", "--existing").exit_code == 0  # neither: kept
    assert as_json(run("stack", "show", "small", "-f", "json"))["disable_rollback"] is True
    assert run("stack", "update", "small", "--existing", "--enable-rollback").exit_code == 0
    assert as_json(run("stack", "show", "small", "-f", "json"))["disable_rollback"] is False


SLOW_UPDATE = SMALL.replace("properties: {value: one}",
                            "properties: {value: two, action_wait_secs: {update: 600}}")


@pytest.fixture
def clock(db_url: str, monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    """One manual clock for the test's runtime and the command's: waits jump ahead."""
    import convergence.runtime as runtime_module

    shared = ManualClock()
    real = runtime_module.open_runtime
    monkeypatch.setattr(runtime_module, "open_runtime",
                        lambda settings, **kw: real(settings, clock=shared, **kw))
    return shared


def update_left_in_progress(db_url: str, tmp_path: Path, clock: ManualClock) -> None:
    """Stack "small" created, then an update under way on ``first`` (value one -> two, ten
    minutes) when the process running it stopped."""
    rt = open_runtime(Settings(database_url=db_url, inline_seconds=0.0), clock=clock)
    try:
        created = stacks.create_stack(rt, "default", "small", textwrap.dedent(SMALL))
        running.wait_for_stack(rt, "default", created.id)
        stacks.update_stack(rt, "default", "small", textwrap.dedent(SLOW_UPDATE))
        assert rt.inprocess is not None

        def first_updating() -> bool:
            rows = queries.list_resources(rt, "default", "small")
            return any((r.name, r.action, r.status) == ("first", "UPDATE", "IN_PROGRESS")
                       for r in rows)

        assert rt.inprocess.run(until=first_updating)
    finally:
        rt.store.engine.dispose()


def test_cancel_rolls_the_update_back(db_url: str, tmp_path: Path, clock: ManualClock) -> None:
    update_left_in_progress(db_url, tmp_path, clock)
    result = run("stack", "cancel", "small", "--wait", "-f", "json")
    assert result.exit_code == 0, result.output
    stack = json.loads(result.stdout)  # progress went to stderr
    assert stack["stack_status"] == "ROLLBACK_COMPLETE"
    assert stack["generation"] == stack["observed_generation"] == 3
    value = as_json(run("output", "show", "small", "copied", "-f", "json"))
    assert value["output_value"] == "one"
    rows = by_name(as_json(run("stack", "resources", "small", "-f", "json")))
    assert {r["resource_status"].split("_", 1)[1] for r in rows.values()} == {"COMPLETE"}
    again = run("stack", "cancel", "small")
    assert again.exit_code == 1
    assert again.output.strip() == ("Error: The Stack (small) is ROLLBACK_COMPLETE: only a "
                                    "create or an update in progress can be cancelled.")


def test_cancel_without_rollback_leaves_the_update_failed(db_url: str, tmp_path: Path,
                                                          clock: ManualClock) -> None:
    update_left_in_progress(db_url, tmp_path, clock)
    result = run("stack", "cancel", "small", "--no-rollback", "--wait", "-f", "json")
    assert result.exit_code == 0, result.output  # the FAILED is what was asked for
    stack = json.loads(result.stdout)
    assert (stack["stack_status"], stack["stack_status_reason"]) == \
        ("UPDATE_FAILED", "Stack UPDATE cancelled")
    shown = as_json(run("stack", "show", "small", "-f", "json"))
    assert (shown["stack_status"], shown["generation"]) == ("UPDATE_FAILED", 3)
    rows = by_name(as_json(run("stack", "resources", "small", "-f", "json")))
    assert not any(r["resource_status"].endswith("IN_PROGRESS") for r in rows.values())


def test_cancel_refuses_what_it_cannot_cancel_and_stops_a_create(db_url: str,
                                                                 tmp_path: Path) -> None:
    t = write(tmp_path, "small.yaml", SMALL)
    assert run("stack", "create", "small", "-t", str(t)).exit_code == 0
    result = run("stack", "cancel", "small", "--no-rollback")
    assert result.exit_code == 1
    assert result.output.strip() == ("Error: The Stack (small) is CREATE_COMPLETE: only a "
                                     "create or an update in progress can be cancelled.")
    assert run("stack", "cancel", "nope").output.strip() == \
        "Error: The Stack (nope) could not be found."
    # A create left in progress, stopped where it is.
    rt = runtime(db_url)
    stacks.create_stack(rt, "default", "other", t.read_text())
    rt.store.engine.dispose()
    stopped = run("stack", "cancel", "other", "--no-rollback", "-f", "json")
    assert stopped.exit_code == 0, stopped.output
    assert as_json(stopped)["stack_status"] == "CREATE_FAILED"


# failures and errors --------------------------------------------------------------------------

def test_a_failing_resource_fails_the_stack_with_its_reason(db_url: str,
                                                            tmp_path: Path) -> None:
    t = write(tmp_path, "failing.yaml", FAILING)
    result = run("stack", "create", "f", "-t", str(t), "--wait", "--disable-rollback")
    assert result.exit_code == 1
    assert "CREATE_FAILED" in result.output
    assert "Resource CREATE failed: bad: Test Resource failed" in result.output
    resources = by_name(as_json(run("stack", "resources", "f", "-f", "json")))
    assert resources["bad"]["resource_status"] == "CREATE_FAILED"
    assert resources["bad"]["resource_status_reason"] == "Test Resource failed"
    assert resources["good"]["resource_status"] == "CREATE_COMPLETE"


def test_a_failed_create_rolled_back_exits_1_with_the_cause(db_url: str,
                                                            tmp_path: Path) -> None:
    t = write(tmp_path, "failing.yaml", FAILING)
    result = run("stack", "create", "f", "-t", str(t), "--wait")
    assert result.exit_code == 1
    assert "Error: stack f ROLLBACK_COMPLETE: the CREATE failed and was rolled back: " \
        "Resource CREATE failed: bad: Test Resource failed" in result.stderr
    assert as_json(run("stack", "resources", "f", "-f", "json")) == []  # all undone


def test_invalid_templates_get_every_problem_with_its_path(db_url: str, tmp_path: Path) -> None:
    t = write(tmp_path, "bad.yaml", """\
        heat_template_version: 2018-08-31
        resources:
          a:
            type: OS::Heat::TestResource
            properties:
              value: {get_param: missing}
          b: {type: OS::Trove::Instance}
        """)
    result = run("stack", "create", "bad", "-t", str(t))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "Error: the input was refused (2 errors):",
        "resources.a.properties.value.get_param: get_param: parameter 'missing' is not defined",
        "resources.b.type: resource type 'OS::Trove::Instance' is not available",
    ]
    assert as_json(run("stack", "list", "-f", "json")) == []  # nothing was stored


def test_not_found_and_conflict_are_one_line_and_exit_1(db_url: str, tmp_path: Path) -> None:
    for args in (["stack", "show", "nope"], ["stack", "resources", "nope"],
                 ["stack", "delete", "nope", "-y"], ["event", "list", "nope"],
                 ["output", "list", "nope"],
                 ["stack", "update", "nope", "--existing", "-P", "a=b"]):
        result = run(*args)
        assert result.exit_code == 1, args
        assert result.output.strip() == "Error: The Stack (nope) could not be found.", args
    t = write(tmp_path, "small.yaml", SMALL)
    assert run("stack", "create", "small", "-t", str(t)).exit_code == 0
    again = run("stack", "create", "small", "-t", str(t))
    assert again.exit_code == 1
    assert again.output.strip() == "Error: The Stack (small) already exists."
    missing = run("resource", "show", "small", "nothing")
    assert missing.exit_code == 1 and "The Resource (nothing) could not be found" in missing.output
    key = run("output", "show", "small", "nothing")
    assert key.exit_code == 1 and "The Output (nothing) could not be found" in key.output


def test_usage_errors_exit_2(db_url: str, tmp_path: Path) -> None:
    t = write(tmp_path, "small.yaml", SMALL)
    assert run("stack", "create", "x", "-t", str(t), "-P", "novalue").exit_code == 2
    assert run("stack", "create", "x").exit_code == 2  # no template
    assert run("stack", "show", "x", "-f", "xml").exit_code == 2


# events and delete ----------------------------------------------------------------------------

def test_event_list_has_the_stack_level_events(db_url: str, tmp_path: Path) -> None:
    t = write(tmp_path, "small.yaml", SMALL)
    stack = as_json(run("stack", "create", "small", "-t", str(t), "-f", "json"))
    events = as_json(run("event", "list", "small", "-f", "json"))
    stack_level = [e for e in events if e["resource_name"] == "small"]
    assert [e["resource_status"] for e in stack_level] == ["CREATE_IN_PROGRESS",
                                                           "CREATE_COMPLETE"]
    assert all(e["physical_resource_id"] == stack["id"] for e in stack_level)
    assert {e["resource_name"] for e in events} == {"small", "first", "second", "third"}
    followed = run("event", "list", "small", "--follow")
    assert followed.exit_code == 0
    assert "[small]: CREATE_COMPLETE  Stack CREATE completed successfully" in followed.output


def test_event_list_pages_sorts_and_filters(db_url: str, tmp_path: Path) -> None:
    t = write(tmp_path, "small.yaml", SMALL)
    assert run("stack", "create", "small", "-t", str(t)).exit_code == 0

    def listed(*options: str) -> list[dict[str, Any]]:
        result = run("event", "list", "small", "-f", "json", *options)
        assert result.exit_code == 0, result.output
        return list(as_json(result))

    every = listed()
    assert [e["id"] for e in listed("--limit", "2")] == [e["id"] for e in every[:2]]
    assert listed("--marker", str(every[2]["id"])) == every[3:]
    assert listed("--sort", "event_time:desc", "--limit", "1") == every[-1:]
    assert listed("--resource", "first") == [e for e in every if e["resource_name"] == "first"]
    assert listed("--filter", "resource_status=CREATE_COMPLETE",
                  "--filter", "resource_name=second") == [
        e for e in every if (e["resource_name"], e["resource_status"]) == (
            "second", "CREATE_COMPLETE")]
    assert run("event", "list", "small", "--filter", "nope=1").exit_code == 2
    assert run("event", "list", "small", "--sort", "event_time:up").exit_code == 2
    assert run("event", "list", "small", "--limit", "-1").exit_code == 2
    assert run("event", "list", "small", "--follow", "--limit", "1").exit_code == 2
    unknown = run("event", "list", "small", "--marker", "999999")
    assert unknown.exit_code == 1 and "'marker'" in unknown.output


def test_delete_removes_the_stack(db_url: str, tmp_path: Path) -> None:
    t = write(tmp_path, "small.yaml", SMALL)
    assert run("stack", "create", "small", "-t", str(t)).exit_code == 0
    deleted = run("stack", "delete", "small", "--wait", "-y")
    assert deleted.exit_code == 0, deleted.output
    assert "Stack small DELETE_COMPLETE" in deleted.output
    assert as_json(run("stack", "list", "-f", "json")) == []
    assert run("stack", "show", "small").exit_code == 1
    # The name is free again.
    assert run("stack", "create", "small", "-t", str(t)).exit_code == 0


def test_the_tenant_comes_from_convergence_project_id(db_url: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    t = write(tmp_path, "small.yaml", SMALL)
    assert run("stack", "create", "small", "-t", str(t)).exit_code == 0
    monkeypatch.setenv("CONVERGENCE_PROJECT_ID", "other")
    assert as_json(run("stack", "list", "-f", "json")) == []
    assert run("stack", "show", "small").exit_code == 1
    rt = runtime(db_url)
    try:
        assert queries.get_stack(rt, "default", "small").stack_status == "CREATE_COMPLETE"
    finally:
        rt.store.engine.dispose()


# resuming interrupted work ------------------------------------------------------------------

def test_a_stack_left_in_progress_is_resumed_by_the_next_command(db_url: str) -> None:
    # Another process accepted the request and stopped before running any of it.
    rt = runtime(db_url)
    text = (EXAMPLES / "web-stack.yaml").read_text()
    env = yaml.safe_load((EXAMPLES / "web-stack-env.yaml").read_text())
    stacks.create_stack(rt, "default", "web", text, environments=[env])
    assert queries.get_stack(rt, "default", "web").stack_status == "CREATE_IN_PROGRESS"
    rt.store.engine.dispose()

    shown = run("stack", "show", "web", "-f", "json")
    assert shown.exit_code == 0
    assert "Resuming the interrupted CREATE of stack web" in shown.stderr
    stack = json.loads(shown.stdout)
    assert stack["stack_status"] == "CREATE_COMPLETE"
    assert stack["observed_generation"] == 1


def test_a_traversal_stopped_halfway_is_finished_by_the_next_command(db_url: str,
                                                                     tmp_path: Path) -> None:
    t = write(tmp_path, "small.yaml", SMALL)
    rt = runtime(db_url)
    stacks.create_stack(rt, "default", "small", t.read_text())
    assert rt.inprocess is not None
    rt.inprocess.run(max_items=2)  # planned, one batch done, then the process "died"
    rows = queries.list_resources(rt, "default", "small")
    assert any(r.status == "COMPLETE" and r.action == "CREATE" for r in rows)
    assert any(r.action == "INIT" for r in rows)
    rt.store.engine.dispose()

    resources = run("stack", "resources", "small", "-f", "json")
    assert resources.exit_code == 0
    assert {r["resource_status"] for r in json.loads(resources.stdout)} == {"CREATE_COMPLETE"}


def test_work_leased_by_a_stopped_process_is_taken_over_when_the_lease_lapses(
        db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "RESUME_SECONDS", 0.05)
    t = write(tmp_path, "small.yaml", SMALL)
    rt = runtime(db_url)
    stacks.create_stack(rt, "default", "small", t.read_text())
    assert rt.inprocess is not None
    rt.inprocess.run(max_items=1)  # planned
    first = [r.id for r in queries.list_resources(rt, "default", "small") if r.name == "first"]
    with rt.store.begin() as tx:  # a process claimed it, then was killed mid-step
        assert tx.claim_records(first, "killed-process", tx.now + 0.3)
    rt.store.engine.dispose()

    shown = run("stack", "show", "small", "-f", "json")
    assert shown.exit_code == 0
    assert json.loads(shown.stdout)["stack_status"] == "CREATE_COMPLETE"


def test_ctrl_c_leaves_the_stack_for_the_next_command(db_url: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    t = write(tmp_path, "small.yaml", SMALL)
    with monkeypatch.context() as m:
        m.setattr(local, "run_to_end", interrupted)
        result = run("stack", "create", "small", "-t", str(t), "--wait")
    assert result.exit_code == 130
    assert "stays CREATE_IN_PROGRESS; the next command that touches it resumes it" in \
        result.output
    rows = as_json(run("stack", "resources", "small", "-f", "json"))
    assert {r["resource_status"] for r in rows} == {"CREATE_COMPLETE"}


# with a broker --------------------------------------------------------------------------------

class _Queue:
    """A dispatcher that only queues (as a broker would, with no worker running)."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def dispatch(self, work: Sequence[Any]) -> None:
        self.sent.extend(work)


def test_with_a_broker_commands_return_at_once(db_url: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import convergence.runtime as runtime_module

    queue = _Queue()
    real = runtime_module.open_runtime
    monkeypatch.setattr(runtime_module, "open_runtime",
                        lambda settings, **kw: real(settings, dispatcher=queue, **kw))
    t = write(tmp_path, "small.yaml", SMALL)
    created = run("stack", "create", "small", "-t", str(t), "-f", "json")
    assert created.exit_code == 0
    assert as_json(created)["stack_status"] == "CREATE_IN_PROGRESS"
    assert queue.sent  # the plan went to the broker
    shown = as_json(run("stack", "show", "small", "-f", "json"))
    assert shown["stack_status"] == "CREATE_IN_PROGRESS"  # the workers' job, not ours


# logging --------------------------------------------------------------------------------------

def test_cli_logs_are_console_lines_on_stderr_with_bound_fields_and_no_secrets(
        db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from convergence.logs import bind

    assert run("stack", "list").exit_code == 0  # configures console logging, WARNING
    capsys.readouterr()
    with bind(stack="s-1", traversal="t-1", generation=3, resource="web_node", node=7):
        logging.getLogger("convergence.engine.step").warning(
            "step failed", extra={"parameters": {"db_password": "hunter2"}})
        logging.getLogger("convergence.engine.step").info("not shown at WARNING")
    logging.getLogger("sqlalchemy.engine").warning("from a library")
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 2
    assert "step failed" in lines[0]
    for field in ("stack_id=s-1", "traversal=t-1", "generation=3", "resource=web_node",
                  "node=7", "parameters=******"):
        assert field in lines[0]
    assert "hunter2" not in captured.err
    assert "from a library" in lines[1] and "stack_id" not in lines[1]  # unbound after


def test_os_cloud_puts_the_stack_in_a_named_cloud_or_is_refused(
        db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clouds = write(tmp_path, "clouds.yaml", """\
        clouds:
          elsewhere:
            auth: {auth_url: "http://127.0.0.1:9/v3", username: u, password: p,
                   project_name: p}
        """)
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(clouds))
    monkeypatch.delenv("OS_CLOUD", raising=False)
    template = write(tmp_path, "small.yaml", SMALL)
    refused = run("stack", "create", "lost", "-t", str(template), "--os-cloud", "nowhere")
    assert refused.exit_code != 0
    assert "cloud: no clouds.yaml has a cloud named 'nowhere'" in refused.output
    made = run("stack", "create", "kept", "-t", str(template), "--os-cloud", "elsewhere",
               "--wait")
    assert made.exit_code == 0, made.output  # test resources need no cloud
    rt = runtime(db_url)
    with rt.store.read() as tx:
        names = {s.name: s.cloud for s in tx.stacks(DEFAULT_TENANT)}
    rt.store.engine.dispose()
    assert names.get("kept") == "elsewhere" and "lost" not in names
