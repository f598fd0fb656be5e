"""``convergence template validate``: what a user sees, and the exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from convergence.cli import cli
from convergence.services import templates
from convergence.template import TemplateError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["template", "validate", *args])
    return result.exit_code, result.output


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_the_shipped_example_is_valid_through_the_installed_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "convergence", "template", "validate",
         str(EXAMPLES / "web-stack.yaml"), "-e", str(EXAMPLES / "web-stack-env.yaml")],
        capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "valid" in out.stdout
    assert "node_count  Number  default=2  MinValue=1 MaxValue=20" in out.stdout
    assert "environment_name  String  default=\"demo\"" in out.stdout  # from parameter_defaults
    assert "db_password_length  Number  default=******" in out.stdout  # hidden stays hidden
    assert "Resources: 5" in out.stdout


def test_errors_are_printed_one_per_line_with_paths(tmp_path: Path) -> None:
    t = write(tmp_path, "t.yaml", """\
        heat_template_version: 2018-08-31
        resources:
          a:
            type: OS::Heat::TestResource
            properties:
              value: {get_param: missing}
          b: {type: OS::Trove::Instance}
        """)
    code, out = run(str(t))
    assert code == 1
    lines = out.strip().splitlines()
    assert lines[0] == f"{t}: invalid (2 errors)"
    assert lines[1:] == [
        "resources.a.properties.value.get_param: get_param: parameter 'missing' is not defined",
        "resources.b.type: resource type 'OS::Trove::Instance' is not available",
    ]


def test_malformed_yaml_reports_line_and_column(tmp_path: Path) -> None:
    t = write(tmp_path, "t.yaml", "heat_template_version: 2018-08-31\nresources: [a\n")
    code, out = run(str(t))
    assert code == 1
    assert "malformed YAML" in out and "line 3" in out


def test_parameters_on_the_command_line(tmp_path: Path) -> None:
    t = write(tmp_path, "t.yaml", """\
        heat_template_version: 2018-08-31
        parameters:
          size: {type: number, constraints: [{range: {min: 1, max: 3}}]}
          name: {type: string}
        resources: {}
        """)
    assert run(str(t))[0] == 0  # no values given: nothing is missing
    code, out = run(str(t), "-P", "size=7")
    assert code == 1
    assert any(line.startswith("parameters.size") and "7" in line for line in out.splitlines())
    assert any(line.startswith("parameters.name") for line in out.splitlines())
    assert run(str(t), "-P", "size=2", "-P", "name=x")[0] == 0


def test_environments_are_merged_in_order(tmp_path: Path) -> None:
    t = write(tmp_path, "t.yaml", """\
        heat_template_version: 2018-08-31
        resources:
          a: {type: My::Thing}
        """)
    e1 = write(tmp_path, "e1.yaml", "resource_registry: {My::Thing: OS::Nope}\n")
    e2 = write(tmp_path, "e2.yaml", "resource_registry: {My::Thing: OS::Heat::None}\n")
    assert run(str(t), "-e", str(e2), "-e", str(e1))[0] == 1
    assert run(str(t), "-e", str(e1), "-e", str(e2))[0] == 0


def test_environment_errors_are_reported_with_template_errors(tmp_path: Path) -> None:
    t = write(tmp_path, "t.yaml", """\
        heat_template_version: 2018-08-31
        resources:
          a: {type: OS::Nope}
        """)
    e = write(tmp_path, "e.yaml", "parameter_defualts: {}\n")
    code, out = run(str(t), "-e", str(e))
    assert code == 1
    assert "parameter_defualts" in out
    assert "OS::Nope" in out


def test_referenced_files_outside_the_folder_are_sent_and_nested_templates_resolve(
        tmp_path: Path) -> None:
    write(tmp_path, "scripts/boot.sh", "#!/bin/sh\necho hi\n")
    write(tmp_path, "nested/node.yaml", """\
        heat_template_version: 2018-08-31
        parameters:
          script: {type: string}
        resources:
          v:
            type: OS::Heat::Value
            properties: {value: {get_file: ../scripts/boot.sh}}
        outputs:
          out: {value: {get_attr: [v, value]}}
        """)
    t = write(tmp_path, "stacks/top.yaml", """\
        heat_template_version: 2018-08-31
        resources:
          node:
            type: ../nested/node.yaml
            properties: {script: {get_file: ../scripts/boot.sh}}
        outputs:
          o: {value: {get_attr: [node, out]}}
        """)
    assert run(str(t), "--files-dir", str(tmp_path))[0] == 0
    assert run(str(t))[0] == 0  # keyed from the template's own folder: ../nested/node.yaml


def test_the_server_disk_is_never_read() -> None:
    # The client reads what a template names (an absolute path too, as heatclient does); the
    # server only looks names up in the files map it was sent.
    text = textwrap.dedent("""\
        heat_template_version: 2018-08-31
        resources:
          a:
            type: OS::Heat::Value
            properties: {value: {get_file: /etc/passwd}}
        """)
    with pytest.raises(TemplateError) as refused:
        templates.validate_template(text, files={})
    assert "'/etc/passwd' is not in the files supplied" in str(refused.value)


def test_json_output(tmp_path: Path) -> None:
    code, out = run(str(EXAMPLES / "web-stack.yaml"), "-e", str(EXAMPLES / "web-stack-env.yaml"),
                    "--format", "json")
    assert code == 0
    body = json.loads(out)
    assert body["Parameters"]["flavor"]["AllowedValues"] == ["m1.small", "m1.medium", "m1.large"]
    assert body["Parameters"]["db_password_length"]["NoEcho"] == "true"
    t = write(tmp_path, "t.yaml", "heat_template_version: 1999-01-01\n")
    code, out = run(str(t), "--format", "json")
    assert code == 1
    [error] = json.loads(out)["errors"]
    assert error["path"] == "heat_template_version" and error["kind"] == "version"


@pytest.mark.parametrize("args", [
    ["-P", "novalue"],
    ["--format", "xml"],
])
def test_usage_errors_exit_2(args: list[str]) -> None:
    code, _ = run(str(EXAMPLES / "web-stack.yaml"), *args)
    assert code == 2


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    assert run(str(tmp_path / "nope.yaml"))[0] == 2
