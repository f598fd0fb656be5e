"""The files a client sends with a template: what the template and environments reference, and
nothing else from the folder (``convergence.cli.files``).

The leak that started this: a stack created from ``mystack.yaml`` stored every text file next
to it, ``.ssh/id_rsa`` and ``.aws_credentials`` included, and served them back from
``GET .../files``. The stories here create stacks through the API (a real ``convergence api``
process) and in embedded mode and read back what was stored; the rest look at the files map
``read_input`` builds, and at stacks whose outputs show that the server found every file under
the key it was sent with.
"""

from __future__ import annotations

import json
import logging
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from convergence.cli import cli, remote
from convergence.cli import files as cli_files
from convergence.cli.common import read_input
from convergence.cli.files import MAX_FILE_BYTES, key_for, rebase_registry
from convergence.runtime import open_runtime
from convergence.services import preview, queries, templates
from convergence.settings import Settings
from convergence.template import TemplateError
from tests.api_process import running_api

SECRETS = {
    ".ssh/id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n",
    ".aws_credentials": "[default]\naws_secret_access_key = secret\n",
    "notes.txt": "nothing to do with the stack\n",
}

MYSTACK = """\
    heat_template_version: 2018-08-31
    resources:
      boot:
        type: OS::Heat::Value
        properties: {value: {get_file: scripts/boot.sh}}
    outputs:
      script: {value: {get_attr: [boot, value]}}
    """


def tree(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def leaky_folder(tmp_path: Path) -> Path:
    return tree(tmp_path / "proj", {"mystack.yaml": MYSTACK, "scripts/boot.sh": "echo boot\n",
                                    **SECRETS})


def _drop_cli_logging() -> None:
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == "convergence"]:
        root.removeHandler(handler)


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("CONVERGENCE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CONVERGENCE_DATABASE_URL", url)
    monkeypatch.delenv("CONVERGENCE_BROKER_URL", raising=False)
    monkeypatch.delenv("CONVERGENCE_PROJECT_ID", raising=False)
    monkeypatch.delenv("CONVERGENCE_URL", raising=False)
    yield url
    _drop_cli_logging()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_api(tmp_path_factory.mktemp("sent-files")) as url:
        yield url


@pytest.fixture
def api(server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The API, a tenant of its own per test; embedded mode would fail (no database)."""
    monkeypatch.setenv("CONVERGENCE_PROJECT_ID", tmp_path.name)
    monkeypatch.delenv("CONVERGENCE_URL", raising=False)
    monkeypatch.setenv("CONVERGENCE_DATABASE_URL", "sqlite:////nonexistent/dir/never.db")
    yield server
    _drop_cli_logging()


def stored_files_over_the_api(url: str, tenant: str, name: str) -> dict[str, str]:
    shown = run("--url", url, "stack", "show", name, "-f", "json")
    assert shown.exit_code == 0, shown.output
    stack_id = json.loads(shown.stdout)["id"]
    answer = httpx.get(f"{url}/v1/{tenant}/stacks/{name}/{stack_id}/files", timeout=10)
    assert answer.status_code == 200, answer.text
    files: dict[str, str] = answer.json()
    return files


def stored_stack(db_url: str, name: str) -> dict[str, Any]:
    rt = open_runtime(Settings(database_url=db_url))
    try:
        return queries.export_stack(rt, "default", name)
    finally:
        rt.store.engine.dispose()


def outputs(db_url: str, name: str) -> dict[str, Any]:
    shown = run("stack", "show", name, "-f", "json")
    assert shown.exit_code == 0, shown.output
    return {o["output_key"]: o["output_value"] for o in json.loads(shown.stdout)["outputs"]}


# The reported leak ---------------------------------------------------------------------------

def test_a_stack_created_through_the_api_stores_only_the_referenced_file(
        api: str, tmp_path: Path) -> None:
    folder = leaky_folder(tmp_path)
    created = run("--url", api, "stack", "create", "leak", "-t", str(folder / "mystack.yaml"),
                  "--wait")
    assert created.exit_code == 0, created.output
    assert stored_files_over_the_api(api, tmp_path.name, "leak") == \
        {"scripts/boot.sh": "echo boot\n"}


def test_a_stack_created_in_embedded_mode_stores_only_the_referenced_file(
        db_url: str, tmp_path: Path) -> None:
    folder = leaky_folder(tmp_path)
    created = run("stack", "create", "leak", "-t", str(folder / "mystack.yaml"))
    assert created.exit_code == 0, created.output
    assert stored_stack(db_url, "leak")["files"] == {"scripts/boot.sh": "echo boot\n"}
    assert outputs(db_url, "leak") == {"script": "echo boot\n"}


def test_files_dir_sets_the_keys_but_sends_nothing_unreferenced(db_url: str,
                                                                tmp_path: Path) -> None:
    folder = leaky_folder(tmp_path)
    created = run("stack", "create", "leak", "-t", str(folder / "mystack.yaml"),
                  "--files-dir", str(folder))
    assert created.exit_code == 0, created.output
    assert set(stored_stack(db_url, "leak")["files"]) == {"scripts/boot.sh"}


def test_an_update_sends_only_what_the_new_template_references(db_url: str,
                                                               tmp_path: Path) -> None:
    folder = leaky_folder(tmp_path)
    tree(folder, {"v2.yaml": MYSTACK.replace("scripts/boot.sh", "scripts/boot2.sh"),
                  "scripts/boot2.sh": "echo two\n"})
    assert run("stack", "create", "s", "-t", str(folder / "mystack.yaml")).exit_code == 0
    updated = run("stack", "update", "s", "-t", str(folder / "v2.yaml"))
    assert updated.exit_code == 0, updated.output
    assert stored_stack(db_url, "s")["files"] == {"scripts/boot2.sh": "echo two\n"}
    assert outputs(db_url, "s") == {"script": "echo two\n"}


# What is followed ----------------------------------------------------------------------------

NESTED = {
    "app/stacks/top.yaml": """\
        heat_template_version: 2018-08-31
        resources:
          conf:
            type: OS::Heat::Value
            properties: {value: {get_file: ../conf/app.conf}}
          node:
            type: ../nested/node.yaml
            properties:
              script: {get_file: ../../shared/boot.sh}
        outputs:
          conf: {value: {get_attr: [conf, value]}}
          node: {value: {get_attr: [node, out]}}
        """,
    "app/conf/app.conf": "port = 80\n",
    "app/nested/node.yaml": """\
        heat_template_version: 2018-08-31
        parameters:
          script: {type: string}
        resources:
          data:
            type: OS::Heat::Value
            properties: {value: {get_file: data/seed.txt}}
          inner:
            type: deeper/inner.yaml
        outputs:
          out:
            value:
              str_replace:
                template: $s|$d|$i
                params:
                  $s: {get_param: script}
                  $d: {get_attr: [data, value]}
                  $i: {get_attr: [inner, out]}
        """,
    "app/nested/data/seed.txt": "seed",
    "app/nested/deeper/inner.yaml": """\
        heat_template_version: 2018-08-31
        resources:
          v:
            type: OS::Heat::Value
            properties: {value: {get_file: ../../conf/app.conf}}
        outputs:
          out: {value: {get_attr: [v, value]}}
        """,
    "shared/boot.sh": "boot",
    "app/stacks/unused.sh": "not referenced",
    "app/nested/.env": "SECRET=1",
}


def test_get_file_and_template_types_are_followed_relative_to_the_referencing_file(
        tmp_path: Path) -> None:
    root = tree(tmp_path / "src", NESTED)
    _, files, _ = read_input(root / "app/stacks/top.yaml", [], None)
    assert files == {
        "../conf/app.conf": "port = 80\n",
        "../nested/node.yaml": (root / "app/nested/node.yaml").read_text(),
        "../../shared/boot.sh": "boot",
        "../nested/data/seed.txt": "seed",
        "../nested/deeper/inner.yaml": (root / "app/nested/deeper/inner.yaml").read_text(),
    }


@pytest.mark.parametrize("files_dir", [None, "app", "."])
def test_the_server_finds_every_nested_reference_under_its_key(
        tmp_path: Path, files_dir: str | None) -> None:
    # Validation resolves each nested template's get_file and types from its own key.
    root = tree(tmp_path / "src", NESTED)
    extra = ["--files-dir", str(root / files_dir)] if files_dir else []
    checked = run("template", "validate", str(root / "app/stacks/top.yaml"), *extra)
    assert checked.exit_code == 0, checked.output


def test_get_file_contents_reach_the_stack_from_other_folders(db_url: str,
                                                              tmp_path: Path) -> None:
    root = tree(tmp_path / "src", {**NESTED, "app/stacks/flat.yaml": """\
        heat_template_version: 2018-08-31
        resources:
          conf:
            type: OS::Heat::Value
            properties: {value: {get_file: ../conf/app.conf}}
          boot:
            type: OS::Heat::Value
            properties: {value: {get_file: ./../../shared/boot.sh}}
        outputs:
          conf: {value: {get_attr: [conf, value]}}
          boot: {value: {get_attr: [boot, value]}}
        """})
    created = run("stack", "create", "flat", "-t", str(root / "app/stacks/flat.yaml"))
    assert created.exit_code == 0, created.output
    assert outputs(db_url, "flat") == {"conf": "port = 80\n", "boot": "boot"}
    assert stored_stack(db_url, "flat")["files"] == {"../conf/app.conf": "port = 80\n",
                                                     "./../../shared/boot.sh": "boot"}


ENV_TREE = {
    "top.yaml": """\
        heat_template_version: 2018-08-31
        resources:
          plain: {type: My::Node}
          special: {type: My::Node}
        outputs:
          plain: {value: {get_attr: [plain, out]}}
          special: {value: {get_attr: [special, out]}}
        """,
    "envs/prod.yaml": """\
        parameter_defaults: {colour: blue}
        resource_registry:
          My::Node: ../lib/node.yaml
          My::Unused: OS::Heat::None
          resources:
            special:
              My::Node: special/node.yaml
              hooks: pre-create
        """,
    "lib/node.yaml": """\
        heat_template_version: 2018-08-31
        resources:
          v:
            type: OS::Heat::Value
            properties: {value: {get_file: node.txt}}
        outputs:
          out: {value: {get_attr: [v, value]}}
        """,
    "lib/node.txt": "plain node",
    "envs/special/node.yaml": """\
        heat_template_version: 2018-08-31
        resources:
          v:
            type: OS::Heat::Value
            properties: {value: {get_file: ../../lib/node.txt}}
        outputs:
          out: {value: {str_replace: {template: special $v, params: {$v: {get_attr: [v, value]}}}}}
        """,
    "envs/other.yaml": "resource_registry: {}\n",
    "lib/unused.yaml": "heat_template_version: 2018-08-31\n",
}


def test_environment_mappings_are_followed_relative_to_the_environment_file(
        tmp_path: Path) -> None:
    root = tree(tmp_path / "src", ENV_TREE)
    _, files, [env] = read_input(root / "top.yaml", [root / "envs/prod.yaml"], None)
    assert set(files) == {"lib/node.yaml", "lib/node.txt", "envs/special/node.yaml"}
    assert env["resource_registry"] == {
        "My::Node": "lib/node.yaml", "My::Unused": "OS::Heat::None",
        "resources": {"special": {"My::Node": "envs/special/node.yaml", "hooks": "pre-create"}},
    }
    assert env["parameter_defaults"] == {"colour": "blue"}


def test_an_environment_mapped_tree_validates_through_the_api(
        api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sent = record_remote_validate(monkeypatch)
    root = tree(tmp_path / "src", {**ENV_TREE, ".git-credentials": "https://me:token@host"})
    checked = run("--url", api, "template", "validate", str(root / "top.yaml"),
                  "-e", str(root / "envs/prod.yaml"))
    assert checked.exit_code == 0, checked.output
    assert [set(files) for files in sent] == [
        {"lib/node.yaml", "lib/node.txt", "envs/special/node.yaml"}]


def test_without_a_template_keys_are_relative_to_the_first_environment(
        tmp_path: Path) -> None:
    # stack update --existing -e ENV: the stored template has no key; mappings are found as
    # written, so they are keyed from the environment's folder.
    root = tree(tmp_path / "src", ENV_TREE)
    _, files, [env] = read_input(None, [root / "envs/prod.yaml"], None)
    assert set(files) == {"../lib/node.yaml", "../lib/node.txt", "special/node.yaml"}
    assert env["resource_registry"]["My::Node"] == "../lib/node.yaml"


def test_a_cycle_of_templates_is_sent_once_each(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "a.yaml": "heat_template_version: 2018-08-31\nresources: {b: {type: sub/b.yaml}}\n",
        "sub/b.yaml": "heat_template_version: 2018-08-31\nresources: {a: {type: ../a.yaml}}\n",
    })
    _, files, _ = read_input(root / "a.yaml", [], None)
    assert set(files) == {"sub/b.yaml", "a.yaml"}
    # The server refuses the endless nesting, not the client.
    checked = run("template", "validate", str(root / "a.yaml"))
    assert checked.exit_code == 1
    assert "deeper than" in checked.output


def test_a_dotfile_is_sent_when_a_template_names_it(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "t.yaml": """\
            heat_template_version: 2018-08-31
            resources:
              v:
                type: OS::Heat::Value
                properties: {value: {get_file: .config/app.ini}}
            """,
        ".config/app.ini": "[app]\n",
        **SECRETS,
    })
    _, files, _ = read_input(root / "t.yaml", [], None)
    assert files == {".config/app.ini": "[app]\n"}


def test_resource_group_definitions_and_templates_read_by_get_file_are_followed(
        tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "t.yaml": """\
            heat_template_version: 2018-08-31
            resources:
              group:
                type: OS::Heat::ResourceGroup
                properties:
                  resource_def: {type: members/member.yaml}
              chained:
                type: OS::Heat::Value
                properties: {value: {get_file: fragments/fragment.yaml}}
            """,
        "members/member.yaml": """\
            heat_template_version: 2018-08-31
            resources: {v: {type: OS::Heat::Value, properties: {value: {get_file: m.txt}}}}
            """,
        "members/m.txt": "m",
        "fragments/fragment.yaml": """\
            heat_template_version: 2018-08-31
            resources: {v: {type: OS::Heat::Value, properties: {value: {get_file: f.txt}}}}
            """,
        "fragments/f.txt": "f",
        "fragments/unused.txt": "no",
    })
    _, files, _ = read_input(root / "t.yaml", [], None)
    assert set(files) == {"members/member.yaml", "members/m.txt", "fragments/fragment.yaml",
                          "fragments/f.txt"}


def test_file_urls_and_absolute_paths_are_read_and_keyed_as_written(tmp_path: Path) -> None:
    elsewhere = tree(tmp_path / "elsewhere", {
        "lib.yaml": """\
            heat_template_version: 2018-08-31
            resources: {v: {type: OS::Heat::Value, properties: {value: {get_file: x.sh}}}}
            """,
        "x.sh": "x",
        "abs.txt": "abs",
    })
    url = (elsewhere / "lib.yaml").as_uri()
    root = tree(tmp_path / "proj", {"t.yaml": f"""\
        heat_template_version: 2018-08-31
        resources:
          lib: {{type: "{url}"}}
          v:
            type: OS::Heat::Value
            properties: {{value: {{get_file: {elsewhere / "abs.txt"}}}}}
          remote:
            type: OS::Heat::Value
            properties: {{value: {{get_file: "https://example.com/never-fetched.sh"}}}}
        """})
    _, files, _ = read_input(root / "t.yaml", [], None)
    assert files == {url: (elsewhere / "lib.yaml").read_text(),
                     (elsewhere / "x.sh").as_uri(): "x",
                     str(elsewhere / "abs.txt"): "abs"}


def test_a_base_url_in_the_registry_is_where_its_relative_mappings_are(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "lib/node.yaml": "heat_template_version: 2018-08-31\n",
        "env.yaml": f"resource_registry:\n  base_url: {(tmp_path / 'lib').as_uri()}/\n"
                    "  My::Node: node.yaml\n",
    })
    _, files, [env] = read_input(None, [root / "env.yaml"], None)
    url = (tmp_path / "lib/node.yaml").as_uri()
    assert files == {url: "heat_template_version: 2018-08-31\n"}
    assert env["resource_registry"]["My::Node"] == url


# What is refused -----------------------------------------------------------------------------

def test_a_missing_referenced_file_is_an_error_naming_the_file_and_the_reference(
        db_url: str, tmp_path: Path) -> None:
    root = tree(tmp_path / "proj", {
        "t.yaml": """\
            heat_template_version: 2018-08-31
            resources:
              node: {type: nested/node.yaml}
              v:
                type: OS::Heat::Value
                properties: {value: {get_file: scripts/gone.sh}}
            """,
        "nested/node.yaml": """\
            heat_template_version: 2018-08-31
            resources: {v: {type: OS::Heat::Value, properties: {value: {get_file: x.txt}}}}
            """,
    })
    t = root / "t.yaml"
    created = run("stack", "create", "s", "-t", str(t))
    assert created.exit_code == 1
    assert created.stderr.splitlines() == [
        "Error: the input was refused (2 errors):",
        f"{t}: resources.v.properties.value.get_file: get_file: 'scripts/gone.sh': "
        f"no such file: {root / 'scripts/gone.sh'}",
        f"{root / 'nested/node.yaml'}: resources.v.properties.value.get_file: "
        f"get_file: 'x.txt': no such file: {root / 'nested/x.txt'}",
    ]
    assert json.loads(run("stack", "list", "-f", "json").stdout) == []


def test_a_missing_mapped_template_names_the_environment(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "t.yaml": "heat_template_version: 2018-08-31\nresources: {a: {type: My::T}}\n",
        "env.yaml": "resource_registry: {My::T: lib/t.yaml}\n",
    })
    checked = run("template", "validate", str(root / "t.yaml"), "-e", str(root / "env.yaml"),
                  "--format", "json")
    assert checked.exit_code == 1
    assert json.loads(checked.stdout) == {"errors": [{
        "path": f"{root / 'env.yaml'}: resource_registry.My::T",
        "message": f"template 'lib/t.yaml': no such file: {root / 'lib/t.yaml'}",
        "kind": "file"}]}


@pytest.mark.parametrize(("name", "content", "why"), [
    ("logo.png", b"\x89PNG\r\n\x1a\n\0\0", "is binary, not text"),
    ("latin1.txt", "caf\xe9".encode("latin-1"), "is not UTF-8 text (byte 3)"),
    ("big.txt", b"x" * (MAX_FILE_BYTES + 1), f"is larger than {MAX_FILE_BYTES} bytes"),
])
def test_a_file_that_cannot_be_sent_is_refused(tmp_path: Path, name: str, content: bytes,
                                               why: str) -> None:
    tree(tmp_path, {"t.yaml": f"""\
        heat_template_version: 2018-08-31
        resources:
          v:
            type: OS::Heat::Value
            properties: {{value: {{get_file: {name}}}}}
        """})
    (tmp_path / name).write_bytes(content)
    with pytest.raises(TemplateError) as refused:
        read_input(tmp_path / "t.yaml", [], None)
    [problem] = refused.value.problems
    assert problem.message == f"get_file: '{name}': {tmp_path / name} {why}"
    assert problem.kind == "file"


def test_a_folder_is_not_a_file(tmp_path: Path) -> None:
    tree(tmp_path, {"t.yaml": "heat_template_version: 2018-08-31\nresources: "
                              "{v: {type: OS::Heat::Value, properties: {value: "
                              "{get_file: scripts}}}}\n",
                    "scripts/a.sh": "a"})
    with pytest.raises(TemplateError, match="is a folder, not a file"):
        read_input(tmp_path / "t.yaml", [], None)


def test_a_name_the_server_would_find_elsewhere_is_refused(tmp_path: Path) -> None:
    # The server tries a name as written before resolving it against the nested template's
    # key, so nested/x.sh cannot be sent while the top folder's x.sh is.
    root = tree(tmp_path, {
        "t.yaml": """\
            heat_template_version: 2018-08-31
            resources:
              v: {type: OS::Heat::Value, properties: {value: {get_file: x.sh}}}
              n: {type: nested/n.yaml}
            """,
        "x.sh": "top",
        "nested/n.yaml": """\
            heat_template_version: 2018-08-31
            resources: {v: {type: OS::Heat::Value, properties: {value: {get_file: x.sh}}}}
            """,
        "nested/x.sh": "nested",
    })
    with pytest.raises(TemplateError, match=r"would be read on the server as 'x\.sh'"):
        read_input(root / "t.yaml", [], None)


def test_two_files_wanting_one_key_are_refused(tmp_path: Path) -> None:
    # With --files-dir elsewhere, the template's own names (found as written) and the
    # environment's mappings (keyed from the files dir) can name two files alike.
    root = tree(tmp_path, {
        "stacks/t.yaml": "heat_template_version: 2018-08-31\n"
                         "resources: {a: {type: lib/t.yaml}, b: {type: My::T}}\n",
        "stacks/lib/t.yaml": "heat_template_version: 2018-08-31\n",
        "lib/t.yaml": "heat_template_version: 2018-08-31\n",
        "env.yaml": "resource_registry: {My::T: lib/t.yaml}\n",
    })
    with pytest.raises(TemplateError) as refused:
        read_input(root / "stacks/t.yaml", [root / "env.yaml"], root)
    [problem] = refused.value.problems
    assert problem.path == f"{root / 'env.yaml'}: resource_registry.My::T"
    assert problem.message == (f"template 'lib/t.yaml': would be sent as 'lib/t.yaml', the key "
                               f"of {root / 'stacks/lib/t.yaml'} already; rename one of them")


def test_a_template_that_does_not_parse_is_left_to_the_server(tmp_path: Path) -> None:
    tree(tmp_path, {"t.yaml": "heat_template_version: 2018-08-31\nresources: [\n"})
    checked = run("template", "validate", str(tmp_path / "t.yaml"))
    assert checked.exit_code == 1
    assert "malformed YAML" in checked.output


# template validate ---------------------------------------------------------------------------

def test_template_validate_sends_only_referenced_files(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[Mapping[str, str] | None] = []
    validate = templates.validate_template

    def recording(*args: Any, **kwargs: Any) -> dict[str, Any]:
        sent.append(kwargs.get("files"))
        return validate(*args, **kwargs)

    monkeypatch.setattr(templates, "validate_template", recording)
    folder = leaky_folder(tmp_path)
    checked = run("template", "validate", str(folder / "mystack.yaml"))
    assert checked.exit_code == 0, checked.output
    assert sent == [{"scripts/boot.sh": "echo boot\n"}]


def record_remote_validate(monkeypatch: pytest.MonkeyPatch) -> list[Mapping[str, str]]:
    """The files maps the CLI sends to the API's validate (the request still goes out)."""
    sent: list[Mapping[str, str]] = []
    validate = remote.RemoteClient.validate_template

    def recording(self: remote.RemoteClient, text: str, **kwargs: Any) -> dict[str, Any]:
        sent.append(kwargs["files"])
        return validate(self, text, **kwargs)

    monkeypatch.setattr(remote.RemoteClient, "validate_template", recording)
    return sent


def test_template_validate_over_the_api_sends_only_referenced_files(
        api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sent = record_remote_validate(monkeypatch)
    root = tree(tmp_path / "src", {**NESTED, ".netrc": "machine x password y"})
    checked = run("--url", api, "template", "validate", str(root / "app/stacks/top.yaml"))
    assert checked.exit_code == 0, checked.output
    assert [set(files) for files in sent] == [{
        "../conf/app.conf", "../nested/node.yaml", "../../shared/boot.sh",
        "../nested/data/seed.txt", "../nested/deeper/inner.yaml"}]


def test_a_dry_run_previews_with_only_referenced_files(db_url: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[Mapping[str, str]] = []
    preview_create = preview.preview_create

    def recording(rt: Any, tenant: str, name: str, content: Any) -> Any:
        sent.append(content.files)
        return preview_create(rt, tenant, name, content)

    monkeypatch.setattr(preview, "preview_create", recording)
    folder = leaky_folder(tmp_path)
    shown = run("stack", "create", "leak", "-t", str(folder / "mystack.yaml"), "--dry-run")
    assert shown.exit_code == 0, shown.output
    assert sent == [{"scripts/boot.sh": "echo boot\n"}]


# The pieces ----------------------------------------------------------------------------------

def test_keys_are_relative_to_the_root_outside_it_too(tmp_path: Path) -> None:
    assert key_for(tmp_path / "a/b.yaml", tmp_path) == "a/b.yaml"
    assert key_for(tmp_path / "c.yaml", tmp_path / "a") == "../c.yaml"


def test_a_template_validated_at_its_key_gets_keys_resolved_from_it(tmp_path: Path) -> None:
    root = tree(tmp_path, NESTED)
    top = root / "app/stacks/top.yaml"
    files, _ = cli_files.sent_files(top, top.read_text(), [], root / "app",
                                    location="stacks/top.yaml")
    assert set(files) == {"conf/app.conf", "nested/node.yaml", "../shared/boot.sh",
                          "nested/data/seed.txt", "nested/deeper/inner.yaml"}


def test_rebase_registry_rewrites_without_reading(tmp_path: Path) -> None:
    env = {"resource_registry": {"A": "lib/a.yaml", "B": "OS::Heat::None",
                                 "resources": {"r": {"A": "b.yaml", "hooks": ["pre-create"]}}}}
    assert rebase_registry(env, tmp_path / "envs/e.yaml", tmp_path)["resource_registry"] == {
        "A": "envs/lib/a.yaml", "B": "OS::Heat::None",
        "resources": {"r": {"A": "envs/b.yaml", "hooks": ["pre-create"]}}}
