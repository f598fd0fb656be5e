"""What an ``openstack stack ...`` user reaches for, in both modes: ``resource type list|show``,
``stack template show``, ``stack environment show``, ``stack file list``, ``stack failures
list``, ``stack resource mark unhealthy``, ``--parameter-file``, ``-c``/``-f value|csv``, the
stack and resource list pages, deleting several stacks, ``event list --nested-depth``,
``--dry-run``, and ``stack show``'s parameters and ``stack list``'s descriptions.

Every test runs twice: embedded (a SQLite file of its own, through ``CONVERGENCE_DATABASE_URL``)
and remote (``--url`` to a real ``convergence api`` process, a tenant of its own; the database
settings then point nowhere, so embedded mode would fail). Outcomes are checked on the state
behind the CLI: the store through ``convergence.services`` (embedded) or the API (remote).
"""

from __future__ import annotations

import json
import logging
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from click.testing import CliRunner, Result

from convergence.cli import cli
from convergence.ports.views import StackView
from convergence.runtime import open_runtime
from convergence.services import queries
from convergence.settings import Settings
from tests.api_process import running_api

TEMPLATE = """\
    heat_template_version: 2018-08-31
    description: two test resources
    parameters:
      value: {type: string, default: one}
      secret: {type: string, hidden: true, default: s3cr3t}
      count: {type: number, default: 2}
    resources:
      first:
        type: OS::Heat::TestResource
        properties: {value: {get_param: value}}
      second:
        type: OS::Heat::TestResource
        depends_on: [first]
        properties: {value: {get_file: data.txt}}
    outputs:
      copied: {value: {get_attr: [first, output]}}
    """

FAILING = """\
    heat_template_version: 2018-08-31
    resources:
      good:
        type: OS::Heat::TestResource
      bad:
        type: OS::Heat::TestResource
        depends_on: [good]
        properties: {fail: true}
    """

ENV = """\
    parameters:
      value: from-env
    parameter_defaults:
      count: 7
    """


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_api(tmp_path_factory.mktemp("osc")) as url:
        yield url


class Cli:
    """The command line in one mode, and the state behind it (the store or the API)."""

    def __init__(self, url: str | None, db_url: str, tenant: str) -> None:
        self.url = url
        self.db_url = db_url
        self.tenant = tenant

    @property
    def remote(self) -> bool:
        return self.url is not None

    def __call__(self, *args: str) -> Result:
        prefix = ["--url", self.url] if self.url else []
        return CliRunner().invoke(cli, [*prefix, *args], catch_exceptions=False)

    def ok(self, *args: str) -> Result:
        result = self(*args)
        assert result.exit_code == 0, result.output
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "-f", "json").stdout)

    # The state behind the CLI ------------------------------------------------------------

    def _api(self, path: str) -> Any:
        r = httpx.get(f"{self.url}/v1/{self.tenant}{path}", follow_redirects=True, timeout=30)
        r.raise_for_status()
        return r.json()

    def resources(self, stack: str) -> dict[str, tuple[str, str]]:
        """Each resource's (``ACTION_STATUS``, status reason), as the engine holds it."""
        if self.url is not None:
            rows = self._api(f"/stacks/{stack}/resources")["resources"]
            return {r["resource_name"]: (r["resource_status"], r["resource_status_reason"])
                    for r in rows}
        rt = open_runtime(Settings(database_url=self.db_url))
        try:
            records = queries.list_resources(rt, self.tenant, stack)
        finally:
            rt.store.engine.dispose()
        return {r.name: (f"{r.action}_{r.status}", r.status_reason)
                for r in sorted(records, key=lambda r: r.id)}

    def stacks(self) -> dict[str, str]:
        """The live stacks, name to ``ACTION_STATUS``."""
        if self.url is not None:
            return {s["stack_name"]: s["stack_status"]
                    for s in self._api("/stacks")["stacks"]}
        rt = open_runtime(Settings(database_url=self.db_url))
        try:
            return {s.name: s.stack_status for s in queries.list_stacks(rt, self.tenant)}
        finally:
            rt.store.engine.dispose()

    def generation(self, stack: str) -> int:
        if self.url is not None:
            return int(self._api(f"/stacks/{stack}")["stack"]["generation"])
        rt = open_runtime(Settings(database_url=self.db_url))
        try:
            return queries.get_stack(rt, self.tenant, stack).generation
        finally:
            rt.store.engine.dispose()


@pytest.fixture(params=["embedded", "remote"])
def run(request: pytest.FixtureRequest, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    db_url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("CONVERGENCE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("CONVERGENCE_BROKER_URL", raising=False)
    monkeypatch.delenv("CONVERGENCE_URL", raising=False)
    if request.param == "remote":
        url: str | None = request.getfixturevalue("server")
        tenant = tmp_path.name
        monkeypatch.setenv("CONVERGENCE_PROJECT_ID", tenant)
        monkeypatch.setenv("CONVERGENCE_DATABASE_URL", "sqlite:////nonexistent/dir/never.db")
    else:
        url, tenant = None, "default"
        monkeypatch.delenv("CONVERGENCE_PROJECT_ID", raising=False)
        monkeypatch.setenv("CONVERGENCE_DATABASE_URL", db_url)
    yield Cli(url, db_url, tenant)
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == "convergence"]:
        root.removeHandler(handler)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def template(tmp_path: Path) -> Path:
    write(tmp_path, "data.txt", "from a file")
    return write(tmp_path, "t.yaml", TEMPLATE)


def create(run: Cli, name: str, template: Path, *args: str) -> Result:
    return run("stack", "create", name, "-t", str(template), "--wait", *args)


# resource type list|show ---------------------------------------------------------------------

def test_resource_type_list_and_show(run: Cli) -> None:
    rows = run.json("resource", "type", "list")
    names = [r["resource_type"] for r in rows]
    assert "OS::Heat::TestResource" in names and names == sorted(names)
    only = run.ok("resource", "type", "list", "--filter", "name=Random", "-f", "value")
    assert only.stdout.splitlines() == ["OS::Heat::RandomString"]
    described = run.ok("resource", "type", "list", "--long", "-f", "csv").stdout.splitlines()
    assert described[0] == '"Resource Type","Description"'
    assert '"OS::Heat::RandomString","Generates a random string."' in described

    shown = yaml.safe_load(run.ok("resource", "type", "show", "OS::Heat::RandomString").stdout)
    assert shown["resource_type"] == "OS::Heat::RandomString"
    assert shown["properties"]["length"]["type"] == "integer"
    assert "value" in shown["attributes"]

    generated = run.json("resource", "type", "show", "OS::Heat::RandomString",
                         "--template-type", "hot")
    assert generated["resources"]["RandomStringResource"]["type"] == "OS::Heat::RandomString"
    assert generated["parameters"]["length"]["type"] == "number"

    cfn = run("resource", "type", "show", "OS::Heat::RandomString", "--template-type", "cfn")
    assert cfn.exit_code == 1 and "only hot templates" in cfn.stderr
    assert run("resource", "type", "show", "OS::Heat::RandomString",
               "--template-type", "xml").exit_code == 2
    missing = run("resource", "type", "show", "OS::Nope::Nothing")
    assert missing.exit_code == 1 and "OS::Nope::Nothing" in missing.stderr


# stack template show, environment show, file list --------------------------------------------

def test_template_environment_and_files_of_a_stack(run: Cli, tmp_path: Path,
                                                   template: Path) -> None:
    env = write(tmp_path, "env.yaml", ENV)
    create(run, "web", template, "-e", str(env))
    assert run.resources("web")["second"][0] == "CREATE_COMPLETE"

    shown = yaml.safe_load(run.ok("stack", "template", "show", "web").stdout)  # YAML first
    expected = yaml.safe_load(textwrap.dedent(TEMPLATE))
    assert shown["resources"] == expected["resources"]
    assert run.json("stack", "template", "show", "web") == \
        {**expected, "heat_template_version": "2018-08-31"}
    assert run.json("stack", "template", "show", "web", "-c", "description") == \
        {"description": "two test resources"}

    environment = yaml.safe_load(run.ok("stack", "environment", "show", "web").stdout)
    assert list(environment) == ["parameters", "resource_registry", "parameter_defaults"]
    assert environment["parameters"] == {"value": "from-env"}
    assert environment["parameter_defaults"] == {"count": 7}

    files = yaml.safe_load(run.ok("stack", "file", "list", "web").stdout)
    assert files == {"files": {"data.txt": "from a file"}}

    missing = run("stack", "template", "show", "nope")
    assert missing.exit_code == 1 and "nope" in missing.stderr


# stack show's parameters, stack list's descriptions ------------------------------------------

def test_show_gives_every_parameter_and_list_the_description(run: Cli, tmp_path: Path,
                                                              template: Path) -> None:
    env = write(tmp_path, "env.yaml", ENV)
    create(run, "web", template, "-e", str(env), "-P", "secret=hunter2")

    shown = run.json("stack", "show", "web")
    assert shown["description"] == "two test resources"
    assert shown["parameters"] == {
        "value": "from-env", "secret": "******", "count": "7",
        "OS::stack_id": shown["id"], "OS::stack_name": "web", "OS::project_id": run.tenant}

    rows = run.json("stack", "list")
    assert [(r["stack_name"], r["description"]) for r in rows] == \
        [("web", "two test resources")]
    assert run.ok("stack", "list", "-f", "value", "-c", "description").stdout == \
        "two test resources\n"


# stack failures list ---------------------------------------------------------------------------

def test_failures_list_shows_the_failed_resources(run: Cli, tmp_path: Path,
                                                  template: Path) -> None:
    failing = write(tmp_path, "f.yaml", FAILING)
    assert create(run, "f", failing, "--disable-rollback").exit_code == 1
    assert run.resources("f")["bad"][0] == "CREATE_FAILED"

    text = run.ok("stack", "failures", "list", "f").stdout
    assert text.startswith("f.bad:\n  resource_type: OS::Heat::TestResource\n")
    assert "  status: CREATE_FAILED\n  status_reason: |\n    " in text
    assert "f.good" not in text
    found = run.json("stack", "failures", "list", "f")
    assert list(found) == ["f.bad"]
    assert found["f.bad"]["status"] == "CREATE_FAILED"
    assert found["f.bad"]["status_reason"] == run.resources("f")["bad"][1]

    create(run, "web", template)
    assert run.ok("stack", "failures", "list", "web").stdout == ""  # not FAILED: nothing


# stack resource mark unhealthy ---------------------------------------------------------------

def test_mark_unhealthy_then_reset(run: Cli, template: Path) -> None:
    create(run, "web", template)

    run.ok("stack", "resource", "mark", "unhealthy", "web", "first", "disk broke")
    assert run.resources("web")["first"] == ("CHECK_FAILED", "disk broke")
    assert run.resources("web")["second"][0] == "CREATE_COMPLETE"
    failed = run.ok("resource", "list", "web", "--filter", "status=CHECK_FAILED",
                    "-f", "value", "-c", "resource_name")
    assert failed.stdout == "first\n"

    run.ok("resource", "mark-unhealthy", "web", "first", "--reset")
    assert run.resources("web")["first"][0] == "CHECK_COMPLETE"
    run.ok("resource", "mark", "unhealthy", "web", "second")
    assert run.resources("web")["second"][0] == "CHECK_FAILED"

    missing = run("stack", "resource", "mark", "unhealthy", "web", "nothing")
    assert missing.exit_code == 1 and "nothing" in missing.stderr


# --parameter-file ------------------------------------------------------------------------------

def test_parameter_file_gives_a_file_content_as_the_value(run: Cli, tmp_path: Path,
                                                          template: Path) -> None:
    write(tmp_path, "value.txt", "line one\nline two\n")
    # A relative FILE is read from the template's folder (the test runs elsewhere).
    create(run, "web", template, "--parameter-file", "value=value.txt", "-P", "value=lost")
    shown = run.json("stack", "show", "web")
    assert shown["parameters"]["value"] == "line one\nline two\n"
    assert shown["outputs"][0]["output_value"] == "line one\nline two\n"

    write(tmp_path, "other.txt", "two")
    run.ok("stack", "update", "web", "--existing", "--wait",
           "--parameter-file", f"value={tmp_path / 'other.txt'}")
    assert run.json("stack", "show", "web")["parameters"]["value"] == "two"

    missing = run("stack", "create", "x", "-t", str(template), "--parameter-file", "v=none.txt")
    assert missing.exit_code == 2 and "none.txt" in missing.stderr
    assert "x" not in run.stacks()


# -c, -f value|csv ------------------------------------------------------------------------------

def test_columns_and_value_and_csv_formats(run: Cli, template: Path) -> None:
    create(run, "web", template)

    assert run.ok("stack", "list", "-f", "value", "-c", "stack_status", "-c", "Stack Name"
                  ).stdout == "web CREATE_COMPLETE\n"  # the command's column order
    csv = run.ok("stack", "list", "-f", "csv", "-c", "id", "-c", "stack_name").stdout
    stack_id = run.json("stack", "show", "web")["id"]
    assert csv.splitlines() == ['"ID","Stack Name"', f'"{stack_id}","web"']
    assert run.ok("stack", "show", "web", "-f", "value", "-c", "stack_name",
                  "-c", "generation").stdout == "web\n1\n"
    assert run.json("stack", "show", "web", "-c", "stack_status") == \
        {"stack_status": "CREATE_COMPLETE"}
    show_csv = run.ok("stack", "show", "web", "-f", "csv", "-c", "stack_name",
                      "-c", "generation").stdout
    assert show_csv.splitlines() == ['"stack_name","generation"', '"web",1']
    resources = run.ok("resource", "list", "web", "-f", "value", "-c", "resource_name",
                       "-c", "resource_status").stdout.splitlines()
    assert sorted(resources) == ["first CREATE_COMPLETE", "second CREATE_COMPLETE"]
    events = run.ok("event", "list", "web", "-f", "value", "-c", "resource_status",
                    "--filter", "resource_name=web").stdout.splitlines()
    assert events == ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]
    output = run.ok("output", "show", "web", "copied", "-f", "value", "-c", "output_value")
    assert output.stdout == "one\n"

    unknown = run("stack", "list", "-c", "nothing")
    assert unknown.exit_code == 2 and "No recognized column names" in unknown.stderr


# stack list --filter --sort --limit --marker -----------------------------------------------------

def test_stack_list_filters_sorts_and_pages(run: Cli, tmp_path: Path, template: Path) -> None:
    for name in ("b", "a", "c"):
        create(run, name, template)
    assert create(run, "f", write(tmp_path, "f.yaml", FAILING), "--disable-rollback"
                  ).exit_code == 1

    def names(*args: str) -> list[str]:
        return run.ok("stack", "list", "-f", "value", "-c", "stack_name", *args
                      ).stdout.split()

    assert names() == ["b", "a", "c", "f"]  # oldest first
    assert names("--sort", "stack_name") == ["a", "b", "c", "f"]
    assert names("--sort", "stack_name:desc") == ["f", "c", "b", "a"]
    assert names("--sort", "stack_status:desc,stack_name:asc") == ["f", "a", "b", "c"]
    assert names("--filter", "name=a", "--filter", "name=c") == ["a", "c"]
    assert names("--property", "status=FAILED") == ["f"]
    assert names("--filter", "status=CREATE_COMPLETE", "--sort", "stack_name",
                 "--limit", "2") == ["a", "b"]
    marker = run.json("stack", "list", "--sort", "stack_name", "--filter", "name=b")[0]["id"]
    assert names("--sort", "stack_name", "--marker", marker) == ["c", "f"]
    assert run("stack", "list", "--filter", "colour=red").exit_code == 2
    assert run("stack", "list", "--sort", "colour").exit_code == 2


# resource list --filter --sort --limit --long ---------------------------------------------------

def test_resource_list_filters_sorts_and_limits(run: Cli, template: Path) -> None:
    create(run, "web", template)

    def names(*args: str) -> list[str]:
        return run.ok("resource", "list", "web", "-f", "value", "-c", "resource_name", *args
                      ).stdout.split()

    assert names("--sort", "resource_name:desc") == ["second", "first"]
    assert names("--sort", "resource_name", "--limit", "1") == ["first"]
    assert names("--filter", "name=second") == ["second"]
    assert names("--filter", "type=OS::Heat::None") == []
    assert names("--filter", "action=CREATE", "--filter", "status=COMPLETE",
                 "--sort", "resource_name") == ["first", "second"]
    long = run.json("stack", "resource", "list", "web", "--long", "--filter", "id=first")
    assert [(r["resource_name"], r["stack_name"]) for r in long] == [("first", "web")]
    assert "Stack Name" in run.ok("resource", "list", "web", "-n", "1").stdout
    assert run("resource", "list", "web", "--filter", "colour=red").exit_code == 2


# stack delete A B C ----------------------------------------------------------------------------

def test_delete_several_stacks_attempts_each(run: Cli, template: Path) -> None:
    for name in ("a", "b", "keep"):
        create(run, name, template)

    deleted = run("stack", "delete", "a", "nope", "b", "-y", "--wait")

    assert deleted.exit_code == 1
    assert "nope" in deleted.stderr
    assert "Unable to delete 1 of the 3 stacks." in deleted.stderr
    assert run.stacks() == {"keep": "CREATE_COMPLETE"}
    assert run("stack", "delete", "keep", "-y", "--wait").exit_code == 0
    assert run.stacks() == {}


# event list --nested-depth ---------------------------------------------------------------------

def test_event_list_takes_a_nested_depth(run: Cli, template: Path) -> None:
    create(run, "web", template)

    events = run.json("event", "list", "web", "--nested-depth", "2")
    assert events and {e["stack_name"] for e in events} == {"web"}
    assert len(events) == len(run.json("event", "list", "web"))
    table = run.ok("event", "list", "web", "--nested-depth", "1").stdout
    assert "Stack Name" in table
    both = run("event", "list", "web", "--resource", "first", "--nested-depth", "1")
    assert both.exit_code == 2 and "--nested-depth" in both.stderr


# --dry-run -----------------------------------------------------------------------------------

def test_dry_runs_show_what_would_happen_and_change_nothing(run: Cli, tmp_path: Path,
                                                             template: Path) -> None:
    preview = run.json("stack", "create", "web", "-t", str(template), "--dry-run",
                       "-P", "value=two")
    assert preview["stack_name"] == "web"
    assert preview["description"] == "two test resources"
    assert preview["parameters"]["value"] == "two" and preview["parameters"]["secret"] == "******"
    resources = {r["resource_name"]: r for r in preview["resources"]}
    assert set(resources) == {"first", "second"}
    assert resources["first"]["required_by"] == ["second"]
    assert resources["first"]["properties"]["value"] == "two"
    assert run.stacks() == {}  # nothing made

    create(run, "web", template)
    changes = run.json("stack", "update", "web", "--existing", "-P", "value=three",
                       "--dry-run")
    assert list(changes) == ["added", "deleted", "replaced", "unchanged", "updated"]
    assert [r["resource_name"] for r in changes["updated"]] == ["first"]
    assert [r["resource_name"] for r in changes["unchanged"]] == ["second"]
    assert run.generation("web") == 1  # no update accepted
    assert run.json("stack", "show", "web")["parameters"]["value"] == "one"

    taken = run("stack", "create", "web", "-t", str(template), "--dry-run")
    assert taken.exit_code == 1 and "already exists" in taken.stderr


# template validate -f --------------------------------------------------------------------------

def test_template_validate_takes_format_options(run: Cli, template: Path) -> None:
    answer = run.json("template", "validate", str(template))
    assert answer["Description"] == "two test resources"
    assert yaml.safe_load(run.ok("template", "validate", str(template), "-f", "yaml").stdout
                          )["ResourceCount"] == 2
    assert run.ok("template", "validate", str(template), "-f", "value",
                  "-c", "Description").stdout == "two test resources\n"


# failures in nested stacks, and long reasons ----------------------------------------------------

class NestedBackend:
    """Stacks of resource rows, a failed resource owning a nested stack: the shape
    ``failures list`` walks (no resource type makes nested stacks here yet)."""

    def __init__(self) -> None:
        def stack(name: str, status: str) -> StackView:
            return StackView(id=name, name=name, tenant="t", generation=1,
                             observed_generation=1, traversal_id=None, template_id=None,
                             rollback_template_id=None, action="CREATE", status=status,
                             status_reason="", outputs={}, timeout_mins=None,
                             disable_rollback=True, created_at=0.0, updated_at=0.0,
                             deleted_at=None)

        def row(name: str, status: str, reason: str = "") -> dict[str, Any]:
            return {"resource_name": name, "resource_type": "T", "physical_resource_id": name,
                    "resource_status": status, "resource_status_reason": reason}

        self.top = stack("top", "FAILED")
        self.stacks = {"group": stack("group", "FAILED"), "empty": stack("empty", "FAILED")}
        self.rows = {
            "top": [row("ok", "CREATE_COMPLETE"), row("group", "CREATE_FAILED", "child"),
                    row("empty", "CREATE_FAILED", "nothing inside"),
                    row("plain", "UPDATE_FAILED", "\n".join(f"line {i}" for i in range(12)))],
            "group": [row("m0", "CREATE_FAILED", "quota"), row("m1", "CREATE_COMPLETE")],
            "empty": [row("m", "CREATE_COMPLETE")],
        }

    def resource_rows(self, s: Any, listing: Any) -> list[dict[str, Any]]:
        return self.rows[s.name]

    def nested_stack(self, s: Any, resource_name: str) -> Any:
        return self.stacks.get(resource_name)


def test_failures_walk_into_nested_stacks_and_cut_long_reasons() -> None:
    from convergence.cli import resource_cmd  # here: each test of this file stands alone

    backend = NestedBackend()
    found = resource_cmd.failed_resources(backend, backend.top)  # type: ignore[arg-type]

    # A failed nested stack shows its own failures instead of itself; one with none, itself.
    assert list(found) == ["top.group.m0", "top.empty", "top.plain"]
    short = resource_cmd._failure_text("top.plain", found["top.plain"], long_=False)
    assert short.splitlines()[-11:] == ["    ...", *(f"    line {i}" for i in range(2, 12))]
    whole = resource_cmd._failure_text("top.plain", found["top.plain"], long_=True)
    assert "    line 0" in whole and "..." not in whole
